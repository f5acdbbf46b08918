"""The healthcheck's state file (ocibench.health.state): written whole, read back, and a
file that is not one refused in one line naming the file and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ocibench.health import state


def _state() -> state.HealthState:
    return state.HealthState(
        node="node1", time=1790000000.0, duration_s=0.8, interval_s=300,
        action=state.DRAIN, reason="ocibench: gpu_count (7 GPUs, the shape: 8)",
        probes=(state.ProbeResult("gpu_count", state.FAIL, "nvidia-smi: 7 GPUs",
                                  1790000000.0, 0.05),),
        link_downed={"mlx5_0:1": 3})


def test_written_state_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "healthcheck.json"
    state.write(_state(), path)
    assert state.read(path) == _state()
    data = json.loads(path.read_text())
    assert data["probes"][0]["state"] == "fail" and data["interval_s"] == 300
    # nothing left beside it (the temporary file was renamed)
    assert [p.name for p in path.parent.iterdir()] == ["healthcheck.json"]


def test_no_file_is_no_state(tmp_path: Path) -> None:
    assert state.read(tmp_path / "none.json") is None


@pytest.mark.parametrize("text, says", [
    ("{", "not JSON"),
    ("[]", "not a JSON object"),
    ('{"node": "n", "time": 1, "duration_s": 1, "interval_s": null, "action": "explode",'
     ' "reason": "", "probes": []}', "field 'action' is 'explode'"),
    ('{"node": "n", "time": "soon", "duration_s": 1, "interval_s": null, "action": "none",'
     ' "reason": "", "probes": []}', "field 'time' is 'soon'"),
    ('{"node": "n", "time": 1, "duration_s": 1, "interval_s": null, "action": "none",'
     ' "reason": "", "probes": [{"name": "x", "state": "ok", "evidence": "", "time": 1,'
     ' "duration_s": 0}]}', "probes[0]: field 'state' is 'ok'"),
    ('{"node": "n", "time": 1, "duration_s": 1, "interval_s": null, "action": "none",'
     ' "reason": "", "probes": [], "link_downed": {"p": "3"}}', "field 'link_downed'"),
    # a node name is a host name: never a terminal escape printed raw (ocibench.hostnames)
    ('{"node": "\\u001b[31mred", "time": 1, "duration_s": 1, "interval_s": null,'
     ' "action": "none", "reason": "", "probes": []}',
     "field 'node' is '\\x1b[31mred' is not a host name"),
    ('{"node": "n", "time": Infinity, "duration_s": 1, "interval_s": null,'
     ' "action": "none", "reason": "", "probes": []}', "field 'time' is inf"),
    ('{"node": "n", "time": 1, "duration_s": 1, "interval_s": null, "action": "none",'
     ' "reason": "", "probes": [], "kernel_seq_passed": "12"}', "field 'kernel_seq_passed'"),
])
def test_a_bad_file_is_one_line_naming_it(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "healthcheck.json"
    path.write_text(text)
    with pytest.raises(state.StateError) as err:
        state.read(path)
    message = str(err.value)
    assert str(path) in message and says in message and "\n" not in message


def test_an_unwritable_place_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(state.StateError, match=f"cannot write {blocker}/x.json"):
        state.write(_state(), blocker / "x.json")


def test_default_path_follows_the_environment(monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    monkeypatch.setenv("OCIBENCH_HEALTH_STATE", str(tmp_path / "h.json"))
    assert state.default_path() == tmp_path / "h.json"
    monkeypatch.delenv("OCIBENCH_HEALTH_STATE")
    monkeypatch.setattr("os.geteuid", lambda: 0)
    assert state.default_path() == state.SYSTEM_PATH
