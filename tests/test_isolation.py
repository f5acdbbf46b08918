"""`make test` leaves the user's installation alone: the check conftest.py makes at the
end of every session can see a change, and the session's Spack is redirected."""

from __future__ import annotations

import os
import time
from pathlib import Path

import user_installation


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
