"""The ``local`` shape knows when its GPUs are NVLink-connected, so that NCCL falling
back to shared memory between them FAILS there as it does on a documented NVLink shape.

Before: ``local`` had ``links: {}`` on every machine, and the checks run on ``local``
on the GPU machine (2 x H200, 18 NVLink 4 links each) recorded an all-reduce forced
onto SHM (``NCCL_P2P_DISABLE=1``, a tenth of NVLink) as a healthy run.  The fake
nvidia-smi prints what the H200 machine printed (tests/data/nccl_path/README.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ocibench import shapes
from ocibench.figures.evaluate import evaluate
from ocibench.metrics import RunVerdict

DATA = Path(__file__).parent / "data" / "nccl_path"
PARAMS = {"nodes": 1, "gpus_per_node": 2, "begin": "8", "end": "1G", "factor": 2}


def _fake_smi(bin_dir: Path, nvlink_status: str) -> None:
    (bin_dir / "nvlink.txt").write_text(nvlink_status)
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"""#!/bin/sh
case "$*" in
  *--query-gpu=*) printf '0, NVIDIA H200, 9.0, 00000000:00:05.0\\n1, NVIDIA H200, 9.0, 00000000:00:06.0\\n' ;;
  "nvlink --status") cat {bin_dir}/nvlink.txt ;;
  *) echo "nvidia-smi: $*: not in this fake" >&2; exit 2 ;;
esac
""")
    smi.chmod(0o755)


def _status(active: dict[int, int], links: int = 18) -> str:
    return (DATA / "nvidia-smi-nvlink-status.h200x2.txt").read_text() if active is None \
        else "".join(
            f"GPU {g}: NVIDIA H200 (UUID: GPU-0000000{g}-0000-0000-0000-000000000000)\n"
            + "".join(f"\t Link {k}: {'26.562 GB/s' if k < up else '<inactive>'}\n"
                      for k in range(links))
            for g, up in active.items())


@pytest.fixture
def h200x2(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return tmp_path


def test_the_captured_status_gives_local_its_nvlink_rate(h200x2):
    _fake_smi(h200x2, _status(None))
    assert shapes.load("local").data["links"] == {"nvlink_gbs": 478.1}


def test_shm_between_nvlink_gpus_fails_on_local_naming_the_path(h200x2):
    _fake_smi(h200x2, _status(None))
    text = (DATA / "all_reduce_perf.shm.h200x2.txt").read_text()
    result = evaluate("nccl_all_reduce_perf", text, "local", PARAMS)
    assert result.verdict is RunVerdict.FAIL
    assert "SHM/direct/direct" in result.reason and "NVLink-connected" in result.reason
    assert "NCCL_P2P_DISABLE set by environment to 1" in result.reason
    healthy = (DATA / "all_reduce_perf.p2p_info.h200x2.txt").read_text()
    assert evaluate("nccl_all_reduce_perf", healthy, "local", PARAMS).verdict \
        is RunVerdict.RECORDED


@pytest.mark.parametrize("active, visible", [
    ({0: 18, 1: 0}, None),   # a GPU whose links are all down: PCIe only, the rule is off
    ({0: 18, 1: 18}, "0"),   # one GPU visible: no link between the GPUs used
])
def test_no_rate_where_the_gpus_used_are_not_joined_by_nvlink(h200x2, monkeypatch, active,
                                                              visible):
    _fake_smi(h200x2, _status(active))
    if visible is not None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert "nvlink_gbs" not in shapes.load("local").data["links"]


def test_a_status_the_tool_cannot_give_is_unknown_not_a_rate(h200x2):
    _fake_smi(h200x2, "")
    (h200x2 / "nvidia-smi").write_text((h200x2 / "nvidia-smi").read_text().replace(
        "cat ", "exit 9; cat "))
    shape = shapes.load("local")
    assert "nvlink_gbs" not in shape.data["links"]
    assert any(line.startswith("links.nvlink_gbs: unknown: ") for line in shape.unknown)
