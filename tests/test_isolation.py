"""`make test` leaves the user's installation alone: the check conftest.py makes at the
end of every session can see a change, and the session's Spack is redirected."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import user_installation
from ocibench import requirements
from ocibench.paths import REPO_ROOT


def test_a_snapshot_sees_a_file_added_rewritten_or_removed(tmp_path: Path) -> None:
    tree = tmp_path / "modules"
    (tree / "local" / "Core" / "openmpi").mkdir(parents=True)
    module = tree / "local" / "Core" / "openmpi" / "4.1.lua"
    module.write_text("whatis('openmpi')\n")
    places = {"module trees": tree}
    before = user_installation.snapshot(places)
    assert user_installation.changes(before, user_installation.snapshot(places)) == []

    (tree / "local" / "Core" / "omb").mkdir()
    added = user_installation.changes(before, user_installation.snapshot(places))
    assert added == ["module trees: local/Core, added local/Core/omb"]  # and its directory

    places = {"module tree of openmpi": module.parent}
    before = user_installation.snapshot(places)
    stamp = module.stat().st_mtime_ns
    module.write_text("whatis('openmpi')\n")  # same bytes, written again
    os.utime(module, ns=(stamp + 10**9, stamp + 10**9))
    assert user_installation.changes(before, user_installation.snapshot(places)) == [
        "module tree of openmpi: 4.1.lua"]

    module.unlink()
    assert user_installation.changes(before, user_installation.snapshot(places)) == [
        "module tree of openmpi: ., removed 4.1.lua"]


def test_a_change_names_at_most_five_files(tmp_path: Path) -> None:
    places = {"Spack store": tmp_path}
    before = user_installation.snapshot(places)
    time.sleep(0.01)
    for i in range(7):
        (tmp_path / f"pkg-{i}").write_text("")
    [line] = user_installation.changes(before, user_installation.snapshot(places))
    assert line.startswith("Spack store: ") and line.endswith(" and 3 more")


def test_the_session_spack_has_its_own_user_scope(user_installation_untouched: Path) -> None:
    home = str(user_installation_untouched)
    assert os.environ["SPACK_USER_CONFIG_PATH"] == home
    assert os.environ["SPACK_USER_CACHE_PATH"] == home
    assert Path(home) != Path.home() / ".spack"


def test_the_watched_places_are_the_users() -> None:
    places = user_installation.watched()
    assert {"module trees", "Spack store", "Spack configuration", "~/.spack"} <= set(places)
    assert any(name.startswith("Python environment") for name in places)


def test_no_script_pip_installs_the_project() -> None:
    """`pip install -e .` in one clone re-points the global `ocibench` at it: the scripts
    install only the tools (ocibench.requirements), and run the checkout's src/."""
    for script in [*(REPO_ROOT / "scripts").rglob("*.sh"), REPO_ROOT / ".ci" / "run"]:
        text = script.read_text()
        assert not re.search(r"pip\S* install[^\n]*(-e|--editable|\s\.)(\s|\[|'|$)", text), script


def test_bin_ocibench_runs_this_checkout(tmp_path: Path) -> None:
    """From any directory, with no PYTHONPATH, `bin/ocibench` imports this checkout."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["OCIBENCH_PYTHON"] = sys.executable
    done = subprocess.run([str(REPO_ROOT / "bin" / "ocibench"), "shape", "--list"],
                          cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0 and "local" in done.stdout.split(), done.stderr
    where = subprocess.run(
        [str(REPO_ROOT / "bin" / "ocibench"), "--help"], cwd=tmp_path, env=env,
        capture_output=True, text=True)
    assert where.returncode == 0 and "usage: ocibench" in where.stdout


def test_the_tools_come_from_pyproject() -> None:
    listed = requirements.requirements(["test", "report"])
    assert "pytest-xdist>=3,<4" in listed and any(r.startswith("clingo") for r in listed)
    assert not any(r.startswith("ocibench") for r in listed)
    done = subprocess.run([sys.executable, "-m", "ocibench.requirements", "nosuch"],
                          capture_output=True, text=True)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        "ocibench.requirements: no extra nosuch in pyproject.toml (known: report, test, node)"]


def test_the_history_and_healthcheck_state_are_pinned_and_watched(monkeypatch,
                                                                  tmp_path: Path) -> None:
    """Each test's history and healthcheck state are temporary files (conftest.py), and
    the user's own are among what the session's end compares (a sweep test once wrote
    the user's <cache>/history.sqlite, and another test read it)."""
    from ocibench import paths
    from ocibench.health import state

    base = tmp_path.parent   # this session's temporary directory
    for name in ("OCIBENCH_HISTORY_DB", "OCIBENCH_HEALTH_STATE"):
        assert base in Path(os.environ[name]).parents, (name, os.environ[name])
    monkeypatch.delenv("OCIBENCH_HISTORY_DB")
    monkeypatch.delenv("OCIBENCH_HEALTH_STATE")
    monkeypatch.setenv("OCIBENCH_CACHE", str(tmp_path / "cache"))
    places = user_installation.watched()
    assert places["results history"] == paths.history_db() == tmp_path / "cache" / "history.sqlite"
    assert places["healthcheck state"] == state.default_path()
