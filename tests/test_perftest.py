"""perftest parsing (ib_write_bw, ib_write_lat) and its parameters.

tests/data/perftest/: the good, best-of-3, truncated and crashed outputs are perftest's
format transcribed from its source (marked in each file: no RDMA device could be reached
to capture one); the no-device outputs are captured from Debian's perftest on a machine
without RDMA devices.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ocibench import benchmarks
from ocibench.figures import evaluate, outputs

DATA = Path(__file__).parent / "data" / "perftest"


def _parse(name: str, check: str, **params):
    return outputs.parse(check, (DATA / name).read_text(), params)


def test_ib_write_bw_gives_bw_peak_in_gbits() -> None:
    """OCI judges parts[2] of the 65536-byte row: BW peak[Gb/sec]."""
    m = _parse("ib_write_bw.good.txt", "ib_write_bw", device="mlx5_0")
    assert (m.metric, m.unit, m.values) == ("bandwidth", "Gb/s", {65536: 196.41})


def test_ib_write_lat_gives_t_avg() -> None:
    """OCI judges awk '{print $6}' of the 8-byte row: t_avg[usec]."""
    m = _parse("ib_write_lat.good.txt", "ib_write_lat")
    assert (m.metric, m.unit, m.values) == ("latency", "us", {8: 1.72})


def test_best_of_three_attempts() -> None:
    assert _parse("ib_write_bw.best_of_3.txt", "ib_write_bw", attempts=3).values == {65536: 197.02}


@pytest.mark.parametrize("name, check, params, reason", [
    ("ib_write_bw.truncated.txt", "ib_write_bw", {}, "output truncated: no closing line"),
    ("ib_write_lat.truncated.txt", "ib_write_lat", {}, "output truncated: no closing line"),
    ("ib_write_bw.crashed.txt", "ib_write_bw", {},
     "ib_write_bw failed: 'Failed to complete run_iter_bw function successfully'"),
    ("ib_write_bw.no_device.txt", "ib_write_bw", {}, "ib_write_bw failed: 'Did not detect devices'"),
    ("ib_write_lat.no_device.txt", "ib_write_lat", {}, "ib_write_lat failed: 'Did not detect devices'"),
    ("ib_write_bw.good.txt", "ib_write_bw", {"device": "mlx5_3"}, "ran on device mlx5_0, not mlx5_3"),
    ("ib_write_bw.good.txt", "ib_write_bw", {"qps": 4}, "expected 4 queue pairs, saw 2"),
    ("ib_write_bw.best_of_3.txt", "ib_write_bw", {}, "expected 1 runs (attempts), saw 3"),
])
def test_bad_outputs_fail_with_a_named_reason(name, check, params, reason) -> None:
    with pytest.raises(outputs.SanityError) as err:
        _parse(name, check, **params)
    assert reason in str(err.value) and "\n" not in str(err.value)
    assert not isinstance(err.value, outputs.Unjudged)   # a broken run: FAIL


@pytest.mark.parametrize("name, check, params, reason", [
    ("ib_write_bw.good.txt", "ib_write_bw", {"size": 8},
     "no results line for size 8 (the run measured 65536)"),
    ("ib_write_bw.sweep.txt", "ib_write_bw", {"size": 3}, "(the run measured 2, 4, 8,"),
    ("ib_write_lat.good.txt", "ib_write_bw", {}, "not ib_write_bw output: no 'RDMA_Write BW Test'"),
])
def test_outputs_of_another_variant_are_unjudged(name, check, params, reason) -> None:
    """A sane output measured at another size, or of another test, is not a broken
    run: UNJUDGED with what it measured, never FAIL."""
    with pytest.raises(outputs.Unjudged) as err:
        _parse(name, check, **params)
    assert reason in str(err.value) and "\n" not in str(err.value)


#: perftest's MB is 2^20 bytes (print_report_bw: format_factor 0x100000 for MB/sec
#: and MiB/sec; 125000000 bytes/s for Gb/sec).
MIB_IN_GBITS = 2**20 * 8 / 1e9


@pytest.mark.parametrize("name, value", [
    ("ib_write_bw.mbytes.txt", 196.41 * MIB_IN_GBITS),      # MiB/sec (25.x)
    ("ib_write_bw.mb4x.txt", 23413.07 * MIB_IN_GBITS),      # MB/sec (4.x)
    ("ib_write_bw.duration.txt", 196.35),                  # -D: peak 0.00, the average
    ("ib_write_bw.sweep.txt", 196.41),                     # -a: the row at -s 65536
])
def test_every_bandwidth_format_is_read_in_gbits(name, value) -> None:
    m = _parse(name, "ib_write_bw")
    assert (m.unit, list(m.values)) == ("Gb/s", [65536])
    assert m.values[65536] == pytest.approx(value, rel=1e-12)


def test_latency_sweeps_and_duration_mode_give_t_avg() -> None:
    assert _parse("ib_write_lat.duration.txt", "ib_write_lat").values == {8: 1.72}
    sweep = (DATA / "ib_write_bw.sweep.txt").read_text()
    assert outputs.parse("ib_write_bw", sweep, {"size": 4096}).values == {4096: 107.30}


def test_a_value_that_is_no_number_fails() -> None:
    text = (DATA / "ib_write_bw.good.txt").read_text().replace("196.41 ", "nan    ")
    with pytest.raises(outputs.SanityError, match="not finite"):
        outputs.parse("ib_write_bw", text, {})


@pytest.mark.parametrize("given, message", [
    ({"nodes": 1}, "nodes must be one of 2"),
    ({"device": "mlx5 0"}, "is not an RDMA device name"),
    ({"attempts": 0}, "not a positive integer"),
])
def test_bad_parameters_are_one_line_errors(given, message) -> None:
    with pytest.raises(benchmarks.ParamError, match=message):
        benchmarks.resolve("ib_write_bw", given)


def test_defaults_are_ocis_command_line() -> None:
    assert benchmarks.resolve("ib_write_bw", {}) == {
        "nodes": 2, "port": 1, "size": 65536, "qps": 2, "attempts": 1}
    assert benchmarks.resolve("ib_write_lat", {}) == {
        "nodes": 2, "port": 1, "size": 8, "iterations": 10000, "attempts": 1}


def test_evaluate_keeps_the_gbits_unit() -> None:
    """The row carries the unit the output printed (not bandwidth's default MB/s).  The
    H100 figure holds OCI's floor only: judged once the floor judgement is wired."""
    result = evaluate.evaluate("ib_write_bw", (DATA / "ib_write_bw.good.txt").read_text(),
                               "BM.GPU.H100.8", {"device": "mlx5_0"})
    assert result.sanity is None
    [row] = result.rows
    assert (row.key, row.measured, row.unit) == (65536, 196.41, "Gb/s")
