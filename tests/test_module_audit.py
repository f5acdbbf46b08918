"""ocibench.module_audit and `ocibench audit-modules` on real trees in a temporary
directory.  The checks' use of it (a job stops before `module use`) is tested with a
real ReFrame run in test_reframe.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ocibench import module_audit

#: A uid no file here belongs to (chown needs root; the test is skipped without it).
STRANGER = 54321


@pytest.fixture
def tree(tmp_path) -> Path:
    """A small Lmod tree as Spack writes it, owner-writable only."""
    top = tmp_path / "modules" / "BM.GPU4.8"
    core = top / "linux-ubuntu24.04-zen2" / "Core"
    for name in ("openmpi/5.0.8.lua", "omb/7.5.lua"):
        (core / name).parent.mkdir(parents=True, exist_ok=True)
        (core / name).write_text('whatis("a module")\n')
    for path in [top, *top.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return top


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ocibench.cli", "audit-modules", *args],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})


def test_a_tree_only_its_owner_can_write_is_safe(tree):
    assert module_audit.audit([tree]) == []
    done = _cli(str(tree))
    assert done.returncode == 0 and done.stdout == f"safe: {tree}\n"


def test_group_or_world_write_anywhere_is_named(tree):
    modulefile = tree / "linux-ubuntu24.04-zen2" / "Core" / "omb" / "7.5.lua"
    modulefile.chmod(0o666)
    core = modulefile.parent.parent
    core.chmod(0o775)
    assert module_audit.audit([tree]) == [
        f"{core}: directory writable by group (mode 0775; chmod go-w)",
        f"{modulefile}: file writable by group and others (mode 0666; chmod go-w)",
    ]
    done = _cli(str(tree))
    assert done.returncode == 1
    assert done.stdout.splitlines() == [*module_audit.audit([tree]), f"2 problem(s) in {tree}"]


def test_a_link_to_a_writable_file_is_followed(tree, tmp_path):
    outside = tmp_path / "elsewhere.lua"
    outside.write_text('os.execute("id")\n')
    outside.chmod(0o666)
    link = tree / "linux-ubuntu24.04-zen2" / "Core" / "omb" / "7.6.lua"
    link.symlink_to(outside)
    assert module_audit.audit([tree]) == [
        f"{link}: file writable by group and others (mode 0666; chmod go-w)"]


def test_a_file_of_another_user_is_named(tree):
    if os.geteuid() != 0:
        pytest.skip("chown to another user needs root")
    modulefile = tree / "linux-ubuntu24.04-zen2" / "Core" / "openmpi" / "5.0.8.lua"
    os.chown(modulefile, STRANGER, -1)
    owner = os.stat(tree).st_uid
    assert module_audit.audit([tree]) == [
        f"{modulefile}: file owned by uid {STRANGER}, not by "
        f"{module_audit._who(owner)} who owns the tree {tree}"]


def test_what_is_above_a_tree_or_would_create_it_counts(tree, tmp_path):
    parent = tree.parent
    parent.chmod(0o777)
    assert module_audit.audit([tree]) == [
        f"{parent}: directory above the tree {tree} is writable by group and others "
        "(mode 0777): they can replace the tree"]
    parent.chmod(0o1777)   # sticky, as /tmp: others cannot rename the tree away
    assert module_audit.audit([tree]) == []
    missing = parent / "not-yet"
    assert module_audit.audit([missing]) == [
        f"{missing}: does not exist, and {parent} is writable by group and others "
        "(mode 1777): anyone there can create it"]


def test_the_default_is_the_shapes_tree_and_modulepath(tree, tmp_path):
    other = tmp_path / "site-modules"
    other.mkdir(mode=0o777)
    other.chmod(0o777)
    root = tree.parent
    done = _cli("--shape", "BM.GPU4.8", env={"OCIBENCH_MODULES_ROOT": str(root),
                                             "MODULEPATH": f"{tree}/x/Core:{other}"})
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        f"{other}: directory writable by group and others (mode 0777; chmod go-w)",
        f"1 problem(s) in {tree}, {tree}/x/Core, {other}"]


@pytest.mark.parametrize("args, message", [
    (["/nonexistent/modules"], "no such file or directory: /nonexistent/modules"),
    (["--shape", ""], "--shape is empty"),
    (["--shape", "BM.Nope"], "unknown shape 'BM.Nope'"),
])
def test_usage_errors_exit_2(args, message):
    done = _cli(*args)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
