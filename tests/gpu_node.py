"""The `local` shape as it is on a GPU node, for tests that run on a machine without one.

Only the facts ocibench.spack.scopes reads are set: the GPUs (their vendor and arch) and the
filesystem root its probes read (/dev/xpmem, the XPMEM user library).  Nothing here
stands in for Spack or a build: the scope derived from it is concretized and built
for real.
"""

from __future__ import annotations

import copy
from pathlib import Path

from ocibench import shapes

#: An H100/H200 node (sm_90), like the GPU machines this project borrows.
GPU_ARCH = "90"


def local_with_gpus(arch: str = GPU_ARCH) -> shapes.Shape:
    """`local` as shapes.load gives it on a node where nvidia-smi lists two GPUs."""
    shape = shapes.load(shapes.LOCAL)
    data = copy.deepcopy(shape.data)
    node = data["cpu"]["numa_nodes"][0]["id"]
    data["gpus"] = {"vendor": "nvidia", "model": "NVIDIA H100 80GB HBM3", "arch": arch,
                    "devices": [{"index": i, "numa_node": node} for i in range(2)]}
    return shapes.Shape(name=shape.name, data=data, path=shape.path)


def fake_root(tmp: Path, *, xpmem: bool = False, xpmem_library: str | None = None) -> Path:
    """A filesystem root with /dev/xpmem (a plain file: the probes only stat it) and,
    optionally, an XPMEM user library under ``xpmem_library`` (e.g. "opt/xpmem")."""
    (tmp / "dev").mkdir(parents=True, exist_ok=True)
    if xpmem:
        (tmp / "dev" / "xpmem").write_text("")
    if xpmem_library:
        prefix = tmp / xpmem_library
        (prefix / "include").mkdir(parents=True)
        (prefix / "lib").mkdir()
        (prefix / "include" / "xpmem.h").write_text("/* fake */\n")
        (prefix / "lib" / "libxpmem.so").write_text("")
    return tmp
