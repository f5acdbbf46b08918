"""The healthcheck on the action ladder (ocibench.ladder): each failing probe's next step,
fault code and evidence commands in its log, and a repeat offender (flagged, drained, put
back, flagged again: the state's ``offences``) one step up."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ocibench.health import check, state
from ocibench.health.state import FAIL, PASS


def _previous(**kw: object) -> state.HealthState:
    base = state.HealthState(
        node="node1", time=1790000000.0, duration_s=0.8, interval_s=300,
        action=state.DRAIN, reason="ocibench: rdma mlx5_0:1 (DOWN)",
        probes=(state.ProbeResult("rdma mlx5_0:1", FAIL, "DOWN", 1790000000.0, 0.05),),
        drained_reason="ocibench: rdma mlx5_0:1 (DOWN)", drained_probes=("rdma mlx5_0:1",))
    return replace(base, **kw)  # type: ignore[arg-type]


def test_a_drain_that_ended_is_an_offence_of_its_probes() -> None:
    assert check.ended_drains(_previous(), ended=True) == {"rdma": 1}
    assert check.ended_drains(_previous(offences={"rdma": 1}), ended=True) == {"rdma": 2}
    # still drained (or a dry run): no offence yet
    assert check.ended_drains(_previous(), ended=False) == {}
    assert check.ended_drains(None, ended=True) == {}


def test_a_failing_probe_says_its_next_step_and_a_repeat_moves_up() -> None:
    failed = [state.ProbeResult("rdma mlx5_0:1", FAIL, "DOWN", 0.0, 0.0),
              state.ProbeResult("xid", PASS, "none", 0.0, 0.0)]
    first = check.next_steps(failed, {})
    assert len(first) == 1 and first[0].startswith(
        "rdma mlx5_0:1: next: reboot HPCGPU-0008-0001: ")
    assert "ibstat" in first[0]
    again = check.next_steps(failed, {"rdma": 1})
    assert again[0].startswith("rdma mlx5_0:1: next: return-to-oci HPCGPU-0008-0001 "
                               "(repeat 1: was reboot)"), again


def test_a_probe_of_no_entry_is_said_so_not_guessed() -> None:
    lines = check.next_steps([state.ProbeResult("no_such_probe", FAIL, "x", 0.0, 0.0)], {})
    assert lines == ["no_such_probe: next: no ladder entry (ocibench.ladder): report it"]


def test_offences_are_kept_in_the_state_file(tmp_path: Path) -> None:
    path = tmp_path / "healthcheck.json"
    kept = _previous(offences={"xid": 2})
    state.write(kept, path)
    assert state.read(path) == kept
    path.write_text(path.read_text().replace('"xid": 2', '"xid": "two"'))
    try:
        state.read(path)
    except state.StateError as err:
        assert "field 'offences' is not probe -> count" in str(err)
    else:
        raise AssertionError("a bad offences field was read")


def test_a_run_says_the_next_step_of_each_failing_probe(tmp_path: Path, monkeypatch) -> None:
    """A whole run on a fake node (tests/health_fakes.py) missing a GPU, without Slurm:
    its output names the step, OCI's fault code and the commands; a repeat offender's
    (the state's offences) is one step up."""
    from health_fakes import FakeNode
    from test_healthcheck import _options, no_slurm_path

    node = FakeNode(tmp_path / "node")
    monkeypatch.setenv("PATH", no_slurm_path(node, tmp_path))
    node.gpus(7)
    outcome = check.check(_options(node, tmp_path))
    nexts = [line for line in outcome.lines if ": next: " in line]
    assert len(nexts) == 1 and nexts[0].startswith(
        "gpu_count: next: reboot HPCGPU-0001-0001: fewer GPUs"), outcome.lines
    assert "nvidia-smi -L" in nexts[0]
    written = state.read(tmp_path / "state.json")
    assert written is not None
    state.write(replace(written, offences={"gpu_count": 1}), tmp_path / "state.json")
    outcome = check.check(_options(node, tmp_path))
    assert any(line.startswith("gpu_count: next: return-to-oci HPCGPU-0001-0001 (repeat 1")
               for line in outcome.lines), outcome.lines
