"""What every shape's concretized stack must be, asserted on the roots that
src/ocibench/spack/scripts/concretize.py prints: tests/test_spack_env.py concretizes
each documented shape, tests/test_local_install.py reads what `make install`
concretized for `local` (one solve of `local` in the suite, not two).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from ocibench import shapes
from ocibench.spack import scopes as spack_config

Roots = dict[str, list[dict[str, Any]]]


def roots_by_name(printed: str) -> Roots:
    """concretize.py's JSON: package name -> its roots (IMB may be two)."""
    roots: Roots = {}
    for root in json.loads(printed):
        roots.setdefault(root["name"], []).append(root)
    return roots


def variants(root: dict[str, Any]) -> dict[str, Any]:
    return root["variants"]


def assert_stack(shape: str, roots: Roots) -> None:
    """The shape's target everywhere, every stack package a root, only the shape's
    compilers, Open MPI over UCX under the benchmarks, and the shape's pins."""
    data = shapes.load(shape)
    target = data.cpu["spack_target"]
    for name, found in roots.items():
        for root in found:
            assert root["target"] == target, f"{name} built for {root['target']}, not {target}"
    # every stack package is a root (nccl-tests only with CUDA)
    has_cuda = "cuda" in roots
    for pkg in data.data["software"]["stack"]:
        if pkg in spack_config.GPU_ONLY and not has_cuda:
            continue
        assert pkg in roots, f"{pkg} missing from the concretized {shape}"
    # compilers: only the shape's (documented shapes)
    if not spack_config.is_machine_described(data):
        allowed = {c["spec"].split()[0] for c in data.data["software"]["compilers"]}
        for name, found in roots.items():
            for root in found:
                assert set(root["compilers"]) <= allowed, f"{name}: {root['compilers']}"
    # openmpi: UCX-based (seed 002 sec 1), also as the benchmarks' dependency
    ompi = roots["openmpi"][0]
    assert "ucx" in variants(ompi)["fabrics"]
    for name in ("osu-micro-benchmarks", "intel-mpi-benchmarks"):
        for root in roots.get(name, []):
            if "openmpi" in root["deps"]:
                assert root["deps"]["openmpi"]["version"] == ompi["version"]
    stack = data.data["software"]["stack"]
    if str(stack.get("openmpi", "any")) != "any":
        assert ompi["version"] == str(stack["openmpi"])
    if data.data["scheduler"] == "slurm" and not ompi["external"]:
        assert variants(ompi)["schedulers"] == ["slurm"]


def assert_local_uses_the_machines_mpi_and_cuda(roots: Roots) -> None:
    """`local`: this machine's Open MPI (an external); with a CUDA toolkit, OMB +cuda
    +nccl over the machine's CUDA and NCCL, and nccl-tests; without, neither."""
    assert roots["openmpi"][0]["external"], "local: the machine's MPI is an external"
    cuda = shutil.which("nvcc") or Path("/usr/local/cuda/bin/nvcc").exists()
    if cuda:
        omb = roots["osu-micro-benchmarks"][0]
        assert variants(omb)["cuda"] and variants(omb)["nccl"]
        assert omb["deps"]["cuda"]["external"] and omb["deps"]["nccl"]["external"]
        assert "nccl-tests" in roots
    else:
        assert "nccl-tests" not in roots and "cuda" not in roots
