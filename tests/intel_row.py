"""The Intel-like row of docs/adding-a-vendor.md ("A vendor whose recipes differ"): a
GPU vendor whose variant is not in every recipe.  For the tests only, never shipped.

Its Spack variants are what the pinned spack-packages (releases/v2025.11) has: no
recipe of the stack but BabelStream builds for Intel GPUs (openmpi, ucx, ucc,
osu-micro-benchmarks and gdrcopy have no ``level_zero`` variant, only mpich has;
babelstream has ``+sycl2020``, offloading to Intel GPUs by default).  Its ticket evidence
is Intel XPU Manager's ``xpu-smi`` and the i915 driver's kernel-log lines.  The rest is
NVIDIA's row renamed: only what Spack and the ticket read matters here.
"""

from __future__ import annotations

import copy
import dataclasses

from ocibench import accelerators, shapes

INTEL = dataclasses.replace(
    accelerators.NVIDIA,
    vendor="intel",
    arch_pattern=r"pvc|bmg",
    arch_help="the GPU's code name: pvc for the Data Center GPU Max",
    build_host_arch="pvc",
    spack_variant="+level_zero",
    spack_arch_variant="sycl_target",
    spack_recipes={"babelstream": ("+sycl2020",)},
    toolkit_packages=("oneapi-level-zero",),
    mpi_aware_variant="level_zero",
    collective="oneCCL",
    collective_package="intel-oneapi-ccl",
    collective_variant="+oneccl",
    collective_tests_package="oneccl-benchmarks",
    babelstream_model="sycl2020",
    ceiling_package="intel-pti-gpu",
    gpu_modules=("oneapi-level-zero", "intel-oneapi-ccl"),
    ticket=accelerators.TicketEvidence(
        tools=(("xpu-smi-discovery.txt", ("xpu-smi", "discovery")),),
        firmware=("xpu-smi", "discovery", "--dump", "1,2,19"),
        kernel_words="i915"),
)


def intel_shape() -> shapes.Shape:
    """BM.GPU.H100.8 with Intel's GPUs and toolkit instead: its stack as it is (the
    vendor's collective tests aside), to be derived with INTEL in the vendor table."""
    base = shapes.load("BM.GPU.H100.8")
    data = copy.deepcopy(base.data)
    data["gpus"].update(vendor="intel", model="Intel Data Center GPU Max 1550", arch="pvc")
    data["gpus"].pop("nvlink_domain", None)
    externals = data["software"]["externals"]
    for name in ("cuda", "nccl"):
        externals.pop(name, None)
    externals["oneapi-level-zero"] = {"spec": "oneapi-level-zero@1.21.9",
                                      "prefix": "/usr"}
    externals["intel-oneapi-ccl"] = {"spec": "intel-oneapi-ccl@2021.15.0",
                                     "prefix": "/opt/intel/oneapi"}
    return shapes.Shape(name="BM.GPU.Intel-test.8", data=data, path=base.path)
