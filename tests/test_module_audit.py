"""ocibench.node.module_audit and `ocibench audit-modules` on real trees in a temporary
directory.  The checks' use of it (a job stops before `module use`) is tested with a
real ReFrame run in test_reframe.py; here, the job's own lines
(reframe_site.module_use_cmds) with real Lmod, as root, while the real unprivileged
user `nobody` swaps a modulefile under them."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import SYSTEM_PYTHON
from ocibench.node import module_audit
from ocibench.reframe import site as reframe_site

SRC = Path(module_audit.__file__).resolve().parents[2]

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


@pytest.fixture(scope="module")
def nobody_src() -> Iterator[Path]:
    """A ``src`` directory with this checkout's ``ocibench`` that nobody can read: this
    checkout's own, or, when it lies below a directory only its owner can enter (a
    0700 home, Oracle Linux's default; pytest's own temporary directories), a copy in
    the real /tmp, removed afterwards.  Without it nobody's Python finds no ocibench."""
    if os.geteuid() != 0:
        pytest.skip("acting as another user needs root")
    blocked = next((p for p in [*reversed(SRC.parents), SRC]
                    if p.stat().st_mode & 0o005 != 0o005), None)
    if blocked is None:
        yield SRC
        return
    top = Path(tempfile.mkdtemp(prefix="ocibench-src-", dir="/tmp"))
    try:
        shutil.copytree(SRC / "ocibench", top / "ocibench",
                        ignore=shutil.ignore_patterns("__pycache__"))
        for path in [top, *top.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        yield top
    finally:
        shutil.rmtree(top)


@pytest.fixture
def in_tmp() -> Iterator[Path]:
    """A directory directly in the real /tmp (sticky, root's), removed afterwards;
    0755 so that nobody can reach what is in it."""
    top = Path(tempfile.mkdtemp(prefix="ocibench-audit-", dir="/tmp"))
    top.chmod(0o755)
    yield top
    shutil.rmtree(top)


def _as(user: pwd.struct_passwd, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}",
                           "--clear-groups", *argv], capture_output=True, text=True,
                          timeout=60, **kwargs)


def _job_audit(*trees: Path) -> subprocess.CompletedProcess:
    """What a job runs before `module use` (ocibench.reframe.site.module_use_cmds)."""
    return subprocess.run([sys.executable, "-m", "ocibench.node.module_audit", *map(str, trees)],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "MODULEPATH": ""})


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
        f"{link} -> {outside}: file writable by group and others (mode 0666; chmod go-w)"]


def test_a_file_of_another_user_is_named(tree):
    if os.geteuid() != 0:
        pytest.skip("chown to another user needs root")
    modulefile = tree / "linux-ubuntu24.04-zen2" / "Core" / "openmpi" / "5.0.8.lua"
    os.chown(modulefile, STRANGER, -1)
    assert module_audit.audit([tree]) == [
        f"{modulefile}: file owned by uid {STRANGER}; only root (who runs this audit) may "
        "own what Lmod loads: they can change it"]


def test_what_is_above_a_tree_or_would_create_it_counts(tree, tmp_path):
    parent = tree.parent
    parent.chmod(0o777)
    assert module_audit.audit([tree]) == [
        f"{parent}: directory writable by group and others without the sticky bit "
        f"(mode 0777): they can replace {tree}"]
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


# --------------------------------------------------------------------------- faults
# One case per class of the audit's faults; each was seen failing with the fix removed.

def _core(tree: Path) -> Path:
    return tree / "linux-ubuntu24.04-zen2" / "Core"


def test_a_link_into_a_directory_others_may_write_is_unsafe(tree, tmp_path):
    """A root-owned 0644 modulefile reached through a link, in a 0777 directory without
    the sticky bit: another user can replace it after the audit."""
    drop = tmp_path / "drop"
    drop.mkdir()
    drop.chmod(0o777)
    target = drop / "omb.lua"
    target.write_text('whatis("omb")\n')
    target.chmod(0o644)
    (_core(tree) / "omb" / "7.6.lua").symlink_to(target)
    expected = (f"{drop}: directory writable by group and others without the sticky bit "
                f"(mode 0777): they can replace {target}")
    assert module_audit.audit([tree]) == [expected]
    done = _job_audit(tree)
    assert done.returncode == 1
    assert done.stderr.splitlines()[0] == f"ocibench: unsafe module tree: {expected}"
    drop.chmod(0o1777)   # sticky: only the file's owner (this user), root and drop's may
    assert module_audit.audit([tree]) == []


def test_another_users_tree_under_sticky_tmp_is_unsafe(tree, in_tmp, nobody, nobody_src):
    """/tmp's sticky bit keeps others from replacing the tree, not its owner: a tree
    nobody owns may be changed by nobody between the audit and the load."""
    top = in_tmp / "modules"
    shutil.copytree(tree, top, symlinks=True)
    for path in [top, *top.rglob("*")]:
        os.chown(path, nobody.pw_uid, nobody.pw_gid)
    problems = module_audit.audit([top])
    entries = [top, *sorted(top.rglob("*"))]
    assert problems[0] == (f"{top}: directory owned by nobody (uid {nobody.pw_uid}); only "
                           "root (who runs this audit) may own what Lmod loads: they can "
                           "change it")
    assert len(problems) == len(entries)
    assert all(f"{p}: " in "\n".join(problems) for p in entries)
    assert _cli(str(top)).returncode == 1
    # nobody auditing its own tree to load it itself: nobody else can change it
    mine = _as(nobody, [SYSTEM_PYTHON, "-m", "ocibench.node.module_audit", str(top)],
               cwd="/", env={"PYTHONPATH": str(nobody_src), "PATH": os.environ["PATH"]})
    assert (mine.returncode, mine.stderr) == (0, "")


def test_a_group_writable_directory_on_the_way_is_unsafe(tree, tmp_path):
    """Above the tree, and above a directory a link in it leads to."""
    tmp_path.chmod(0o775)
    assert module_audit.audit([tree]) == [
        f"{tmp_path}: directory writable by group without the sticky bit (mode 0775): "
        f"they can replace {tree.parent}"]
    tmp_path.chmod(0o755)
    shared = tmp_path / "shared"
    (shared / "ucx").mkdir(parents=True)
    (shared / "ucx" / "1.18.lua").write_text('whatis("ucx")\n')
    (shared / "ucx").chmod(0o755)
    (shared / "ucx" / "1.18.lua").chmod(0o644)
    shared.chmod(0o775)
    (_core(tree) / "ucx").symlink_to(shared / "ucx")
    assert module_audit.audit([tree]) == [
        f"{shared}: directory writable by group without the sticky bit (mode 0775): "
        f"they can replace {shared}/ucx"]


def test_loops_are_unsafe(tree, tmp_path):
    core = _core(tree)
    (core / "a.lua").symlink_to("b.lua")
    (core / "b.lua").symlink_to("a.lua")
    problems = module_audit.audit([tree])
    assert problems == [
        f"{core}/a.lua: more than 40 links to follow, the last {core}/a.lua "
        "(a loop of symbolic links)",
        f"{core}/b.lua: more than 40 links to follow, the last {core}/b.lua "
        "(a loop of symbolic links)"]
    (core / "a.lua").unlink()
    (core / "b.lua").unlink()
    (core / "up").symlink_to("..")
    assert module_audit.audit([tree]) == [
        f"{core}/up -> {core.parent}: a directory above itself (a loop of links)"]
    loop = tmp_path / "loop"
    loop.symlink_to("loop")
    done = _job_audit(loop)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[0] == (
        f"ocibench: unsafe module tree: {loop}: more than 40 links to follow, the last "
        f"{loop} (a loop of symbolic links)")
    done = _cli(str(loop))
    assert done.returncode == 1 and "(a loop of symbolic links)" in done.stdout


def test_dangling_links_are_unsafe(tree, tmp_path):
    gone = tmp_path / "gone.lua"
    link = _core(tree) / "omb" / "7.6.lua"
    link.symlink_to(gone)
    assert module_audit.audit([tree]) == [f"{link}: a link to {gone}, which does not exist"]
    top = tmp_path / "tree-link"
    top.symlink_to(tmp_path / "gone")
    done = _job_audit(top)
    assert done.returncode == 1
    assert done.stderr.splitlines()[0] == (
        f"ocibench: unsafe module tree: {top}: a link to {tmp_path}/gone, "
        "which does not exist")


def test_what_the_caller_cannot_read_is_unsafe(tree, nobody, nobody_src):
    """nobody auditing a tree below root's 0700 directory: one line, no traceback."""
    done = _as(nobody, [SYSTEM_PYTHON, "-m", "ocibench.node.module_audit", str(tree)],
               cwd="/", env={"PYTHONPATH": str(nobody_src), "PATH": os.environ["PATH"]})
    blocked = next(p for p in reversed(tree.parents) if p.stat().st_mode & 0o005 != 0o005)
    first = next(p for p in [*reversed(tree.parents), tree] if p.parent == blocked)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[0] == (
        f"ocibench: unsafe module tree: {first}: cannot be read (Permission denied), "
        f"on the way to {tree}")


# --------------------------------------------------------------------------- the race

#: Loads raced in the privilege test: with the old audit, about one in five ran
#: nobody's modulefile as root, so 30 loads leave it no chance to pass.
RACE_LOADS = 30


def test_another_user_racing_a_link_never_runs_code_as_root(nobody, in_tmp, lmod_init):
    """Root runs a job's lines (audit, module use, module load) RACE_LOADS times while
    nobody swaps the file a modulefile links to, in a 0777 directory, between root's
    0644 file and its own, whose Lua writes the loading uid to a marker.  No load may
    run nobody's Lua; a safe tree loaded the same way before and after shows that
    Lmod does run a modulefile's Lua here (so that the marker could be written)."""
    marks = in_tmp / "marks"
    good = in_tmp / "good"
    racy = in_tmp / "racy"
    drop = in_tmp / "drop"
    for directory in (marks, good / "Core" / "ok", racy / "Core" / "evil", drop):
        directory.mkdir(parents=True)
    (good / "Core" / "ok" / "1.0.lua").write_text(f'os.execute("id -u >> {marks}/ok")\n')
    (drop / "evil.lua").write_text('whatis("the modulefile root audited")\n')
    (racy / "Core" / "evil" / "1.0.lua").symlink_to(drop / "evil.lua")
    theirs = drop / ".theirs"
    theirs.write_text(f'os.execute("id -u >> {marks}/evil")\n')
    os.chown(theirs, nobody.pw_uid, nobody.pw_gid)
    drop.chmod(0o777)

    def job(root: Path, module: str) -> str:
        lines = reframe_site.module_use_cmds(root, [root / "Core"]) + [f"module load {module}"]
        return "(" + " && ".join(lines) + ") || echo refused"

    script = (f"source {lmod_init}\n{job(good, 'ok')}\n"
              f"for i in $(seq {RACE_LOADS}); do {job(racy, 'evil')}; done\n{job(good, 'ok')}\n")
    # rename(2) in a directory anyone may write, without the sticky bit: allowed.
    # Half the time root's file is there, half the time nobody's; no fork per swap,
    # to leave the CPUs to the loads.
    swap = ("import os, time\n"
            "while True:\n"
            "    os.rename('evil.lua', '.root'); os.rename('.theirs', 'evil.lua')\n"
            "    time.sleep(0.01)\n"
            "    os.rename('evil.lua', '.theirs'); os.rename('.root', 'evil.lua')\n"
            "    time.sleep(0.01)\n")
    swapper = subprocess.Popen(
        ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups",
         SYSTEM_PYTHON, "-c", swap], cwd=drop, stderr=subprocess.PIPE, text=True)
    try:
        done = subprocess.run(["bash", "--noprofile", "--norc", "-c", script],
                              capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PYTHONPATH": str(SRC), "MODULEPATH": ""})
        swapping = swapper.poll() is None
    finally:
        swapper.kill()
        _, swap_errors = swapper.communicate()
    assert swapping, f"nobody's swap loop stopped: {swap_errors}"
    ran_as = (marks / "evil").read_text().split() if (marks / "evil").exists() else []
    assert not ran_as, (f"nobody's modulefile ran in {len(ran_as)} of {RACE_LOADS} loads, "
                        f"as uid {sorted(set(ran_as))}")
    assert (marks / "ok").read_text().split() == ["0", "0"], done.stderr
    assert done.stdout.split() == ["refused"] * RACE_LOADS
    assert done.stderr.count(
        f"ocibench: unsafe module tree: {drop}: directory writable by group and others "
        f"without the sticky bit (mode 0777): they can replace {drop}/evil.lua") == RACE_LOADS
