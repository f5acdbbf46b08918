"""BabelStream and TransferBench as this project ran them on 2 x H100 (NVLink): every
value read as printed, in the unit printed, by the parsers that judge AMD's published
runs (tests/test_ceiling_tools.py).  tests/data/formats/README.md says how each was made.

No NVIDIA shape documents a figure of these tools, so on ``local`` the values are
recorded; on an AMD shape a CUDA output is never judged.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ocibench.figures import outputs
from ocibench.figures.evaluate import evaluate
from ocibench.metrics import RunVerdict

DATA = Path(__file__).parent / "data" / "formats"
BABEL = DATA / "babelstream"
TB = DATA / "transferbench"
_ROW = re.compile(r"^(Copy|Mul|Add|Triad|Dot)\s+(\S+)\s", re.MULTILINE)
_CSV_ROW = re.compile(r"^(Copy|Mul|Add|Triad|Dot),\d+,\d+,\d+,([^,]+),", re.MULTILINE)


def printed(text: str) -> dict[str, float]:
    """Each kernel's bandwidth as the table prints it, read here without the parser."""
    return {k: float(v) for k, v in _ROW.findall(text) or _CSV_ROW.findall(text)}


@pytest.mark.parametrize("name", ["cuda-h100-dev0-n50-s268435456.txt",
                                  "cuda-h100-dev1-n50-s268435456.txt",
                                  "cuda-h100-default.txt", "cuda-h100-csv.txt"])
def test_babelstream_captures_give_the_mbytes_they_print(name):
    text = (BABEL / name).read_text()
    measured = outputs.parse("babelstream", text, {})
    assert measured.values == pytest.approx(printed(text), rel=1e-12)
    assert measured.vendor == "nvidia"     # "Implementation: CUDA"
    ev = evaluate("babelstream", text, "local", {})
    assert ev.verdict is RunVerdict.RECORDED, ev.reason


def test_mibibytes_are_read_as_such():
    """--mibibytes prints MiBytes/sec (2^20 bytes a second), figures are in MB/s."""
    text = (BABEL / "cuda-h100-mibibytes.txt").read_text()
    assert "MiBytes/sec" in text
    measured = outputs.parse("babelstream", text, {})
    for kernel, mib in printed(text).items():
        assert measured.values[kernel] == pytest.approx(mib * 2**20 / 1e6, rel=1e-12)


def test_two_gpus_give_each_kernels_slower_gpu():
    """The check's output: one table a GPU (AMD's floor holds for every GPU)."""
    first, second = ((BABEL / f"cuda-h100-dev{d}-n50-s268435456.txt").read_text()
                     for d in (0, 1))
    measured = outputs.parse("babelstream", first + second, {"gpus": 2})
    expected = {k: min(printed(first)[k], printed(second)[k]) for k in printed(first)}
    assert measured.values == pytest.approx(expected, rel=1e-12)
    assert evaluate(
        "babelstream", first, "local", {"gpus": 2}).verdict is RunVerdict.FAIL


def test_a_triad_only_run_is_shown_and_never_compared():
    """--triad-only prints one mean bandwidth (GB/s), no table: recorded where no figure
    is documented, UNJUDGED against AMD's best-run floor; it used to FAIL as 'truncated'."""
    text = (BABEL / "cuda-h100-triad-only.txt").read_text()
    measured = outputs.parse("babelstream", text, {})
    assert measured.values == {"Triad": pytest.approx(2932.373 * 1e3)}
    assert evaluate("babelstream", text, "local", {}).verdict is RunVerdict.RECORDED
    ev = evaluate("babelstream", text, "BM.GPU.MI300X.8", {})
    assert ev.verdict is RunVerdict.UNJUDGED and "--triad-only" in ev.reason


def test_a_cuda_babelstream_run_is_not_judged_on_an_amd_shape():
    text = (BABEL / "cuda-h100-dev0-n50-s268435456.txt").read_text()
    ev = evaluate("babelstream", text, "BM.GPU.MI300X.8", {})
    assert ev.verdict is RunVerdict.UNJUDGED, ev.reason


def test_transferbench_cuda_p2p_gives_the_averages_and_slowest_pair_it_prints():
    text = (TB / "cuda-h100-p2p.txt").read_text()
    measured = outputs.parse("transferbench_p2p", text, {})
    # GB/s as printed ("Averages (During UniDir): ... 185.44"), kept in MB/s; the slowest
    # GPU pair of each matrix, the diagonal (a GPU to itself) left out
    assert measured.values == pytest.approx({"unidir_avg": 185440.0, "bidir_avg": 173870.0,
                                             "unidir_min": 183460.0, "bidir_min": 167420.0})
    assert evaluate("transferbench_p2p", text, "local", {}).verdict is RunVerdict.RECORDED


def test_transferbench_cuda_a2a_gives_its_average():
    text = (TB / "cuda-h100-a2a.txt").read_text()
    measured = outputs.parse("transferbench_a2a", text, {})
    assert measured.values == pytest.approx({"avg": 102852.0, "min": 102317.0})
