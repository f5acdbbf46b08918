"""The pageable-host copy rate of a GPU: what OMB's host buffers get.

NVIDIA's nvbandwidth measures its host<->device copies from pinned memory only
(``cuMemHostAlloc`` in its memcpy.cpp, HostBuffer); OMB allocates its host buffers
with ``posix_memalign`` (pageable), and a copy from pageable memory goes through the
driver's staging buffer at a lower rate (on 2 x H200: 8.2 GB/s host to GPU against
55 GB/s pinned, docs/gpu-results.md).  This is that rate, measured the plainest way:
synchronous ``cuMemcpyHtoD``/``cuMemcpyDtoH`` of a pageable buffer (Python's own
allocation, written before the first copy), through the driver API of the vendor's
row in ocibench.accelerators (``host_copy``: for NVIDIA the CUDA driver API of
``libcuda.so.1``, the driver's, so no toolkit is needed), after warm-up copies, timed
with the wall clock around each copy.  GB/s are 10^9 bytes per second, nvbandwidth's.
The vendor is the first whose driver library loads.

    python3 -m ocibench.node.pageable_copy [--size BYTES] [--copies N] [--h2d-gpu G] [--d2h-gpu G]

(the GPUs default to those of OMB's host<->device runs on this node: GPU 1 and GPU 0,
or GPU 0 for both where the node has one)

prints one line per direction, which ``ocibench.figures.outputs`` reads::

    pageable host_to_device GPU 1: 8.21 GB/s (268435456 bytes, median of 20 copies)
    pageable device_to_host GPU 0: 16.40 GB/s (268435456 bytes, median of 20 copies)

On failure it prints one line ``pageable_copy: ...`` on stderr and exits 1.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import time

from ocibench import accelerators

#: OMB's osu_bw message in the checks (-m 268435456): the rate at that size.
SIZE = 268435456
COPIES, WARMUP = 20, 3
#: The ranks of OMB's host<->device runs whose buffers are on a GPU
#: (ocibench.placement.host_device_cores): rank 1 for H-D, rank 0 for D-H; OMB gives
#: rank r GPU r mod GPUs, so on one GPU both are GPU 0.
H2D_RANK, D2H_RANK = 1, 0


def default_gpus(count: int) -> tuple[int, int]:
    """(H-D's GPU, D-H's GPU) on a node of ``count`` GPUs, as OMB picks them: GPU 1 and
    GPU 0 on two or more, GPU 0 for both on one."""
    return H2D_RANK % count, D2H_RANK % count


class CopyError(RuntimeError):
    """The measurement cannot run; the message is one line."""


def _driver() -> tuple[accelerators.HostCopyApi, ctypes.CDLL]:
    """The first vendor's driver API whose library loads here."""
    apis = [a.host_copy for a in accelerators.VENDORS.values() if a.host_copy]
    errors = []
    for api in apis:
        try:
            return api, ctypes.CDLL(api.library)
        except OSError as err:
            errors.append(str(err))
    raise CopyError(f"no GPU driver ({', '.join(a.library for a in apis)}): "
                    f"{'; '.join(errors)}")


def _call(api: accelerators.HostCopyApi, lib: ctypes.CDLL, name: str, *args) -> None:
    status = getattr(lib, name)(*args)
    if status != 0:
        text = ctypes.c_char_p()
        getattr(lib, api.error_string)(status, ctypes.byref(text))
        why = text.value.decode() if text.value else f"status {status}"
        raise CopyError(f"{name}: {why}")


def gpu_count() -> int:
    """The GPUs the vendor's driver sees here."""
    api, lib = _driver()
    _call(api, lib, api.init, 0)
    count = ctypes.c_int()
    _call(api, lib, api.device_count, ctypes.byref(count))
    if count.value < 1:
        raise CopyError("the driver sees no GPU")
    return count.value


def measure(gpu: int, to_device: bool, size: int = SIZE, copies: int = COPIES) -> float:
    """GB/s of synchronous copies between a pageable host buffer and GPU ``gpu``: the
    median over ``copies`` after WARMUP."""
    api, lib = _driver()
    _call(api, lib, api.init, 0)
    count = ctypes.c_int()
    _call(api, lib, api.device_count, ctypes.byref(count))
    if gpu >= count.value:
        raise CopyError(f"GPU {gpu} asked for; this node has {count.value}")
    device, context = ctypes.c_int(), ctypes.c_void_p()
    _call(api, lib, api.device_get, ctypes.byref(device), gpu)
    _call(api, lib, api.context_retain, ctypes.byref(context), device)
    _call(api, lib, api.context_set, context)
    memory = ctypes.c_uint64()
    _call(api, lib, api.alloc, ctypes.byref(memory), ctypes.c_size_t(size))
    host = ctypes.create_string_buffer(size)   # pageable; zeroed, hence touched
    name, args = ((api.to_device, (memory, host, ctypes.c_size_t(size))) if to_device
                  else (api.to_host, (host, memory, ctypes.c_size_t(size))))
    rates = []
    try:
        for index in range(WARMUP + copies):
            start = time.perf_counter()
            _call(api, lib, name, *args)   # synchronous for pageable host memory
            if index >= WARMUP:
                rates.append(size / (time.perf_counter() - start) / 1e9)
    finally:
        getattr(lib, api.free)(memory)
        getattr(lib, api.context_release)(device)
    return statistics.median(rates)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m ocibench.node.pageable_copy",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=SIZE, help="bytes per copy")
    parser.add_argument("--copies", type=int, default=COPIES, help="timed copies")
    parser.add_argument("--h2d-gpu", type=int, default=None,
                        help="default: OMB's H-D device rank's GPU, 1 (0 on one GPU)")
    parser.add_argument("--d2h-gpu", type=int, default=None,
                        help="default: OMB's D-H device rank's GPU, 0")
    args = parser.parse_args(argv)
    try:
        if args.h2d_gpu is None or args.d2h_gpu is None:
            h2d, d2h = default_gpus(gpu_count())
            args.h2d_gpu = h2d if args.h2d_gpu is None else args.h2d_gpu
            args.d2h_gpu = d2h if args.d2h_gpu is None else args.d2h_gpu
        for direction, gpu, to_device in (("host_to_device", args.h2d_gpu, True),
                                          ("device_to_host", args.d2h_gpu, False)):
            rate = measure(gpu, to_device, args.size, args.copies)
            print(f"pageable {direction} GPU {gpu}: {rate:.2f} GB/s "
                  f"({args.size} bytes, median of {args.copies} copies)", flush=True)
    except CopyError as err:
        print(f"pageable_copy: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
