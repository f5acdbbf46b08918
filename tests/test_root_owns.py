"""Root touches only what root owns (docs/healthcheck.md "Files it writes",
docs/monitoring.md, docs/spack-env.md): each attack an unprivileged user can make on
what ocibench does as root, made here by the real user `nobody`, then refused.

* the healthcheck's lock: nobody cannot hold it (root's is in a 0700 directory of
  root's), and a lock held by another run is a bounded wait, then one line;
* the state directory: one that others can write is refused (a planted link is never
  followed, nothing is written there, no drain is resumed from a file found there);
  a state file owned by another user is not trusted;
* the atomic replacement behind the state file and the textfile sets modes on its
  descriptor: a temporary file swapped for a link never changes another file's mode;
* the textfile's directory: one another user owns (Debian's node_exporter directory
  is `prometheus`'s) is refused;
* the bundle: a .deb swapped after "checksums verified" never reaches apt-get (a
  bundle another user can change is verified and installed as a copy of the caller's).

nobody's side runs the system's Python with the standard library only, in a directory
of /tmp that nobody can reach (the checkout may sit in a 0700 home).  Slurm's side of
the state (a person's drain resumed) is in tests/test_healthcheck_cluster.py.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import SYSTEM_PYTHON
from health_fakes import FakeNode
from ocibench import atomic, paths
from ocibench.health import check, export, state
from test_bundle_integrity import (  # noqa: F401  (the fixtures: request.getfixturevalue)
    _bundle,
    _setup,
    _write_sums,
    machine,
    pristine_env,
    python_env,
)
from test_healthcheck import no_slurm_path

NODE = "gpu-1"
PERSON_REASON = "reseating the cables (a person's drain)"


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory directly in the real /tmp, root's and 0755 so that nobody can reach
    what is in it; removed afterwards."""
    top = Path(tempfile.mkdtemp(prefix="ocibench-root-owns-", dir="/tmp"))
    top.chmod(0o755)
    yield top
    shutil.rmtree(top)


def as_nobody(user: pwd.struct_passwd, code: str, *args: str, cwd: Path | None = None,
              wait: bool = True):
    argv = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups",
            SYSTEM_PYTHON, "-c", code, *args]
    if wait:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=cwd)
        assert done.returncode == 0, f"nobody's step failed: {done.stderr}"
        return done
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=cwd)


def owned_by(user: pwd.struct_passwd, *where: Path) -> None:
    for path in where:
        os.chown(path, user.pw_uid, user.pw_gid, follow_symlinks=False)


def mode(path: Path) -> int:
    return os.stat(path).st_mode & 0o7777


# --------------------------------------------------------------------- the healthcheck

@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeNode:
    """A healthy fake node; root's lock directory in the test's own directory."""
    monkeypatch.setenv("OCIBENCH_RUN_DIR", str(tmp_path / "run"))
    return FakeNode(tmp_path / "node")


def healthcheck(fake: FakeNode, where: Path, path: Path, *args: str,
                timeout: float = 60) -> subprocess.CompletedProcess:
    """`ocibench healthcheck` as root on the fake node, with no Slurm on PATH (a run
    that asks Slurm says it could not), its state at ``path``."""
    tools = where / "tools"
    search = f"{fake.bin}:{tools}" if tools.is_dir() else no_slurm_path(fake, where)
    env = {**os.environ, "PATH": search,
           "PYTHONPATH": str(paths.REPO_ROOT / "src"),
           "OCIBENCH_HISTORY_DB": str(where / "no-history.sqlite")}
    return subprocess.run(
        [sys.executable, "-m", "ocibench.cli", "healthcheck", "--shape", fake.shape.name,
         "--root", str(fake.root), "--node", NODE, "--state", str(path), *args],
        capture_output=True, text=True, timeout=timeout, env=env)


def lock_of(path: Path) -> Path:
    return state.lock_path(path) if hasattr(state, "lock_path") else \
        path.with_name(path.name + ".lock")


#: nobody holds the first of its arguments it can open, and says which.
HOLD = """
import fcntl, sys, time
for name in sys.argv[1:]:
    try:
        handle = open(name)
        fcntl.flock(handle, fcntl.LOCK_EX)
    except OSError as err:
        print("cannot hold", name, err.strerror, flush=True)
        continue
    print("holding", name, flush=True)
    time.sleep(300)
print("held nothing", flush=True)
"""


def test_nobody_cannot_hold_the_healthchecks_lock(nobody, shared, node, tmp_path) -> None:
    """nobody takes the node's lock (any file it can open will do for flock(2)), and the
    next run is not stopped by it.  Without the fix the lock was <state>.lock, 0644,
    with an unbounded wait: nobody held it and the healthcheck (and the prolog) of the
    node never ran again."""
    (shared / "state").mkdir()
    path = shared / "state" / "healthcheck.json"
    first = healthcheck(node, tmp_path, path)
    assert first.returncode == check.UNJUDGED, first.stdout + first.stderr  # no history
    candidates = {path.with_name(path.name + ".lock"), lock_of(path)}
    holder = as_nobody(nobody, HOLD, *map(str, sorted(candidates)), wait=False)
    try:
        said = [holder.stdout.readline().strip() for _ in candidates]
        try:
            done = healthcheck(node, tmp_path, path, timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the healthcheck waited 30 s on nobody's lock ({said})")
    finally:
        holder.kill()
        holder.communicate()
    assert not any(line.startswith("holding") for line in said), said
    assert done.returncode == check.UNJUDGED, done.stdout + done.stderr
    assert "another run" not in done.stdout


def test_a_lock_held_by_another_run_is_a_bounded_wait_then_one_line(node, tmp_path) -> None:
    """Another run of root's holds the node's lock (a run that hangs): this run waits
    state.LOCK_WAIT_S, then says so in one line and exits 3 (nothing judged); as the
    prolog it exits 0 (the job runs: an unknown never stops a job)."""
    path = tmp_path / "state" / "healthcheck.json"
    with state.locked(path):
        began = time.monotonic()
        done = healthcheck(node, tmp_path, path, timeout=60)
        took = time.monotonic() - began
        prolog = healthcheck(node, tmp_path, path, "--prolog", timeout=60)
    assert done.returncode == check.UNJUDGED, done.stdout + done.stderr
    assert state.LOCK_WAIT_S <= took < state.LOCK_WAIT_S + 15, took
    lines = done.stdout.splitlines()
    assert lines[0] == f"healthcheck of {NODE} against {node.shape.name}", lines
    assert len(lines) == 2 and done.stderr == "", done.stdout + done.stderr
    assert lines[1] == (f"{lock_of(path)}: another run holds this node's lock (held by "
                        f"pid {os.getpid()}; waited {state.LOCK_WAIT_S:g} s): this run "
                        "judged nothing"), lines
    assert prolog.returncode == check.OK and lines[1] in prolog.stdout, prolog.stdout
    assert not path.exists(), "the runs that judged nothing wrote a state"
    # released: the next run judges the node
    assert healthcheck(node, tmp_path, path).returncode == check.UNJUDGED  # no history
    assert state.read(path) is not None


def test_roots_lock_directory_is_roots_alone(node, tmp_path) -> None:
    """root's lock is in a directory of root's that only root can open (0700), the lock
    itself 0600, whatever the umask; a directory there of another mode is made 0700."""
    path = tmp_path / "state" / "healthcheck.json"
    run_dir = Path(os.environ["OCIBENCH_RUN_DIR"])
    run_dir.mkdir(mode=0o755)
    old = os.umask(0)
    try:
        with state.locked(path):
            pass
    finally:
        os.umask(old)
    lock = state.lock_path(path)
    assert lock.parent == run_dir and mode(run_dir) == 0o700
    assert mode(lock) == 0o600 and os.stat(lock).st_uid == 0


def _state_text(node_name: str = NODE, drained_reason: str = PERSON_REASON) -> str:
    """A state file as a run that drained the node would have written: the record by
    which a run resumes a drain (drained_reason)."""
    return json.dumps({
        "node": node_name, "time": time.time() - 60, "duration_s": 0.5, "interval_s": 300,
        "action": "none", "reason": "", "probes": [], "link_downed": {},
        "drained_reason": drained_reason, "drained_probes": ["gpu_count"]})


PLANT = """
import os, sys
os.symlink(sys.argv[1], sys.argv[2])
with open(sys.argv[3], "w") as out:
    out.write(sys.argv[4])
"""


def test_a_state_directory_others_can_write_is_refused(nobody, shared, node,
                                                       tmp_path) -> None:
    """In a state directory anyone can write, nobody plants the lock as a link to a
    file of root's directory (root would create it: /etc/nologin, say) and writes a
    state file that records a drain (a person's reason): root's run refuses the
    directory in one line, follows nothing, writes nothing there, and does not look
    after the drain it did not record (it never asks Slurm).  Without the fix root
    created the link's target, took the file as its memory and looked after the
    person's drain (asked Slurm, and with Slurm there, resumed it: the cluster test)."""
    target_dir = shared / "roots"
    target_dir.mkdir(mode=0o700)
    target = target_dir / "nologin"
    state_dir = shared / "state"
    state_dir.mkdir()
    state_dir.chmod(0o777)
    path = state_dir / "healthcheck.json"
    as_nobody(nobody, PLANT, str(target), str(path.with_name(path.name + ".lock")),
              str(path), _state_text())
    before = sorted(os.listdir(state_dir))
    theirs = path.read_bytes()
    done = healthcheck(node, tmp_path, path)
    out = done.stdout + done.stderr
    assert not target.exists(), f"root followed nobody's link and created {target}"
    assert sorted(os.listdir(state_dir)) == before and path.read_bytes() == theirs, out
    assert f"{state_dir}: directory writable by group and others (mode 0777" in out, out
    assert "cannot ask Slurm" not in out, f"the run looked after nobody's drain:\n{out}"
    assert "Traceback" not in out
    # even a state file of root's is not trusted there: whoever may write the directory
    # can put back an old one (rename needs no permission on the file), with its drain
    os.chown(path, 0, 0, follow_symlinks=False)
    done = healthcheck(node, tmp_path, path)
    out = done.stdout + done.stderr
    assert f"{path} not trusted; starting without it" in out, out
    assert "cannot ask Slurm" not in out, f"the run looked after the file's drain:\n{out}"


def test_a_state_file_of_another_user_is_not_trusted(nobody, shared, node,
                                                     tmp_path) -> None:
    """A state file owned by another user (written when the directory was theirs) is
    not this run's memory: one line, no drain of its looked after, and the run writes
    its own."""
    (shared / "state").mkdir()
    path = shared / "state" / "healthcheck.json"
    path.write_text(_state_text())
    owned_by(nobody, path)
    done = healthcheck(node, tmp_path, path)
    out = done.stdout + done.stderr
    assert f"warning: {path}: owned by nobody (uid {nobody.pw_uid}), not root: not " \
        "trusted; starting without it" in out, out
    assert "cannot ask Slurm" not in out, f"the run looked after nobody's drain:\n{out}"
    assert done.returncode == check.UNJUDGED, out
    assert os.stat(path).st_uid == 0 and state.read(path).drained_reason == ""


# ------------------------------------------------------------- the sweep's record of drains

def test_the_sweeps_record_of_drains_is_trusted_only_as_roots(nobody, shared) -> None:
    """`ocibench sweep --undrain` resumes the nodes its record names.  A record nobody
    wrote (in a directory of root's: nobody owns the file) is not trusted, a record in a
    directory nobody can write is refused, and a lock nobody planted as a link is never
    followed.  Without the fix each was read or followed: nobody could name a person's
    drain as the sweep's, and have it resumed."""
    from ocibench.sweep import state as sweep_state
    ours = "ocibench: osu_latency %nodes=2 2000.00 us > 1400.00 us"
    planted = json.dumps({"version": 1, "nodes": {"gpu-1": {"reason": PERSON_REASON}}})

    # a record of nobody's, in root's directory
    (shared / "mine").mkdir()
    record = shared / "mine" / "drained.json"
    record.write_text(planted)
    owned_by(nobody, record)
    with pytest.raises(sweep_state.StateError, match="owned by nobody .*not trusted"):
        sweep_state.DrainRecord(record).ours("gpu-1", PERSON_REASON)
    with pytest.raises(sweep_state.StateError):
        sweep_state.DrainRecord(record).add("gpu-2", ours, "sweep/1")
    assert record.read_text() == planted              # nothing written over it

    # a directory nobody can write: refused, whatever the file in it says
    (shared / "open").mkdir()
    (shared / "open").chmod(0o777)
    as_nobody(nobody, "import sys; open(sys.argv[1], 'w').write(sys.argv[2])",
              str(shared / "open" / "drained.json"), planted)
    with pytest.raises(sweep_state.StateError, match="not trusted"):
        sweep_state.DrainRecord(shared / "open" / "drained.json").ours("gpu-1", PERSON_REASON)

    # a lock planted as a link, in a directory that was open while the link was made
    (shared / "linked").mkdir()
    victim = shared / "victim"
    victim.write_text("root's\n")
    victim.chmod(0o600)
    (shared / "linked" / "drained.json.lock").symlink_to(victim)
    with pytest.raises(sweep_state.StateError, match="symbolic link"):
        sweep_state.DrainRecord(shared / "linked" / "drained.json").add("gpu-2", ours, "s")
    assert victim.read_text() == "root's\n" and mode(victim) == 0o600
    assert not (shared / "linked" / "drained.json").exists()


# ---------------------------------------------------------- replacing a file atomically

#: nobody, in a directory it may write: every temporary file that appears there is
#: moved away and replaced by a link to root's file, until told to stop.
SWAP = """
import os, sys, time
target, stop = sys.argv[1], sys.argv[2]
swapped = 0
while not os.path.exists(stop):
    for name in os.listdir("."):
        if name.endswith(".tmp") and not os.path.islink(name):
            try:
                os.rename(name, "stolen-%d" % swapped)
                os.symlink(target, name)
                swapped += 1
            except OSError:
                pass
print(swapped, flush=True)
"""

#: Enough text that writing it leaves nobody time to swap the temporary file (the
#: window root's chmod-by-name left open: between the temporary file and the rename).
BIG = "# padding\n" * 3_000_000


def _race(nobody, directory: Path, target: Path, write) -> tuple[int, Exception | None]:
    """``write()`` as root while nobody swaps temporary files in ``directory`` for links
    to ``target``; how many nobody swapped, and what ``write`` raised."""
    stop = directory.parent / "stop"
    racer = as_nobody(nobody, SWAP, str(target), str(stop), cwd=directory, wait=False)
    raised = None
    try:
        time.sleep(0.3)   # the racer is looking
        try:
            for _ in range(3):
                write()
        except Exception as err:   # noqa: BLE001  (the caller judges it)
            raised = err
    finally:
        stop.touch()
        out, err = racer.communicate(timeout=30)
    assert racer.returncode == 0, err
    return int(out.split()[0]), raised


def test_a_swapped_temporary_file_never_changes_another_files_mode(nobody, shared) -> None:
    """atomic.replace in a directory nobody can write (the textfile's, the sweep's):
    nobody swaps its temporary file for a link to root's 0600 file while root writes;
    root's file keeps its mode.  Without the fix (os.chmod by name) it became 0644."""
    directory = shared / "open"
    directory.mkdir()
    owned_by(nobody, directory)
    secret = shared / "secret"
    secret.write_text("root's\n")
    secret.chmod(0o600)
    swapped, raised = _race(nobody, directory, secret, lambda: atomic.replace(
        directory / "ocibench.prom", BIG, mode=0o644))
    assert swapped > 0, "nobody never saw a temporary file: the test proves nothing"
    assert mode(secret) == 0o600, "root's chmod followed nobody's link"
    assert secret.read_text() == "root's\n"


def test_a_textfile_directory_of_another_user_is_refused(nobody, shared, tmp_path) -> None:
    """`metrics --textfile` into a directory nobody owns (Debian's node_exporter
    directory is prometheus's): refused in one line, nothing written there, root's
    file untouched; the same race as above turned root's 0600 file 0644 without it."""
    directory = shared / "textfile"
    directory.mkdir()
    owned_by(nobody, directory)
    secret = shared / "secret"
    secret.write_text("root's\n")
    secret.chmod(0o600)
    swapped, raised = _race(nobody, directory, secret, lambda: export.write_textfile(
        BIG, directory / "ocibench.prom"))
    assert mode(secret) == 0o600, f"root's chmod followed nobody's link ({swapped} swaps)"
    assert isinstance(raised, export.ExportError), raised
    assert str(raised) == (f"{directory}: directory owned by nobody (uid {nobody.pw_uid}); "
                           "only root (who runs this audit) may own the directory of "
                           "the textfile: they can change it"), raised
    assert os.listdir(directory) == []
    # the command: exit 2, one line
    health = tmp_path / "state" / "healthcheck.json"
    state.write(state.HealthState(node=NODE, time=time.time(), duration_s=0.1,
                                  interval_s=None, action="none", reason=""), health)
    done = subprocess.run(
        [sys.executable, "-m", "ocibench.cli", "metrics", "--healthcheck", str(health),
         "--textfile", str(directory / "ocibench.prom")], capture_output=True, text=True,
        timeout=60, env={**os.environ, "PYTHONPATH": str(paths.REPO_ROOT / "src")})
    assert done.returncode == 2 and done.stderr == f"ocibench metrics: {raised}\n", done.stderr
    assert os.listdir(directory) == []


# --------------------------------------------------------------------------- the bundle

def _deb(where: Path, description: str) -> Path:
    """A .deb of one package, ocibench-bundle-test, that says who made it."""
    pkg = where / f"pkg-{len(description)}"
    (pkg / "DEBIAN").mkdir(parents=True)
    (pkg / "DEBIAN" / "control").write_text(
        "Package: ocibench-bundle-test\nVersion: 1.0\nArchitecture: all\n"
        f"Maintainer: test <test@localhost>\nDescription: {description}\n")
    out = where / f"{len(description)}.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(pkg), str(out)],
                   check=True, capture_output=True)
    shutil.rmtree(pkg)
    return out


#: apt-get as set-up calls it with the bundle's packages: it records each file it was
#: given and the package's Description, and installs nothing.
FAKE_APT = """#!/bin/sh
for file in "$@"; do
  case $file in *.deb) echo "$file|$(dpkg-deb -f "$file" Description)" >>"{record}";; esac
done
"""

#: set-up's Python, which runs nobody's swap at set-up's first use of Python after the
#: check (ocibench.requirements, before pip and apt-get): the moment the attacker needs.
HOOK = """#!/bin/sh
case " $* " in
  *" ocibench.requirements "*)
    [ -e "{done}" ] || {{ setpriv --reuid={uid} --regid={gid} --clear-groups \\
      {python} -c 'import os, sys; os.rename(sys.argv[1], sys.argv[2])' "{evil}" "{deb}" \\
      && touch "{done}"; }} ;;
esac
exec "{venv}/bin/python" "$@"
"""


def test_a_deb_swapped_after_verification_never_reaches_apt(nobody, shared, request,
                                                            tmp_path) -> None:
    """A bundle whose os-packages/ nobody owns: after set-up's "checksums verified",
    nobody renames its own .deb over the verified one.  apt-get (a stand-in on PATH that
    records what it is given; LMOD_PKG names no Lmod, so set-up installs the bundle's)
    gets the verified package, from a copy only root can change.  Without the fix it got
    nobody's, from the bundle in place."""
    if not shutil.which("dpkg-deb"):
        pytest.skip("no dpkg-deb to build a .deb (Debian's dpkg)")
    request.getfixturevalue("machine")   # Lmod and Open MPI here: set-up installs neither
    venv = request.getfixturevalue("python_env")
    bundle = _bundle(shared)
    good = _deb(tmp_path, "the package the admin verified")
    deb = bundle / "os-packages" / "ocibench-bundle-test_1.0_all.deb"
    shutil.move(good, deb)
    _write_sums(bundle)
    theirs = shared / "nobodys"
    theirs.mkdir()
    evil = theirs / deb.name
    shutil.move(_deb(tmp_path, "nobody's package, installed as root"), evil)
    owned_by(nobody, theirs, evil, bundle / "os-packages", deb)
    tools = tmp_path / "tools"
    tools.mkdir()
    record = tmp_path / "apt-got"
    (tools / "apt-get").write_text(FAKE_APT.format(record=record))
    hook = tmp_path / "hook" / "bin" / "python"   # _setup runs <venv>/bin/python
    hook.parent.mkdir(parents=True)
    hook.write_text(HOOK.format(done=tmp_path / "swapped", uid=nobody.pw_uid,
                                gid=nobody.pw_gid, python=SYSTEM_PYTHON, evil=evil, deb=deb,
                                venv=venv))
    for script in (tools / "apt-get", hook):
        script.chmod(0o755)
    done = _setup(bundle, hook.parents[1], tmp_path, LMOD_PKG=str(tmp_path / "no-lmod"),
                  PATH=f"{tools}:{os.environ['PATH']}")
    out = done.stdout + done.stderr
    assert (tmp_path / "swapped").exists(), f"nobody's swap never ran:\n{out}"
    assert "checksums verified" in out and "installing lmod from the bundle" in out, out
    got = record.read_text().splitlines()
    assert len(got) == 1, out
    given, description = got[0].split("|")
    assert description == "the package the admin verified", \
        f"apt-get installed {given}: {description}"
    stage = tmp_path / "cache" / "bundle"
    assert Path(given).parent == stage / "os-packages", given
    assert f"{bundle}/os-packages: directory owned by nobody" in out, out
    assert mode(stage) == 0o700 and os.stat(stage).st_uid == 0


def _check(bundle: Path, cache: Path, *args: str) -> subprocess.CompletedProcess:
    """The check as set-up and install run it: `bundle_verify --stage`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OCIBENCH_BUNDLE_")}
    return subprocess.run(
        [sys.executable, "-m", "ocibench.spack.bundle_verify", "--stage", *args, str(bundle)],
        capture_output=True, text=True, timeout=120,
        env={**env, "OCIBENCH_CACHE": str(cache), "PYTHONPATH": str(paths.REPO_ROOT / "src")})


def test_a_bundle_only_its_owner_can_change_is_used_in_place(tmp_path) -> None:
    bundle = _bundle(tmp_path)
    done = _check(bundle, tmp_path / "cache", "--print", "shape")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [str(bundle), "local"] and done.stderr == ""
    assert not (tmp_path / "cache").exists()


def test_a_bundle_another_user_can_change_is_verified_as_a_copy(nobody, shared,
                                                                tmp_path) -> None:
    """Another user's directory in the bundle: the check copies it into the cache (0700,
    the caller's) and verifies the copy, naming why; again with the same list, the copy
    is verified again, not made again; with a new list, made again (what the new list
    does not name removed), and the bundle's faults are still its own."""
    bundle = _bundle(shared)
    owned_by(nobody, bundle / "wheels")
    cache = tmp_path / "cache"
    copy = cache / "bundle"
    done = _check(bundle, cache)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        str(copy), f"bundle {bundle} (its copy in {copy}): checksums verified: 7 files, all "
        "as SHA256SUMS lists them, nothing unlisted; NOT authenticated (no "
        "OCIBENCH_BUNDLE_SHA256 or OCIBENCH_BUNDLE_SIGNER): checked against its own list "
        "only"], done.stdout
    assert done.stderr == (
        f"bundle {bundle}: another user can change it: {bundle}/wheels: directory owned by "
        f"nobody (uid {nobody.pw_uid}); only root (who runs this audit) may own what set-up "
        "installs: they can change it; verifying and using a copy that only you can "
        f"change, in {copy}\n"), done.stderr
    assert mode(copy) == 0o700 and os.stat(copy).st_uid == 0
    for path in bundle.rglob("*"):
        if path.is_file():
            assert (copy / path.relative_to(bundle)).read_bytes() == path.read_bytes()
    wheel = next((copy / "wheels").iterdir())
    inode = wheel.stat().st_ino
    # the same list: verified again, not copied again
    assert _check(bundle, cache).returncode == 0 and wheel.stat().st_ino == inode
    # a new list: copied again, the copy holding what it names and nothing else
    (bundle / "develop" / "stream-5.10.tar.gz").unlink()
    (bundle / "develop" / "SOURCES").unlink()
    _write_sums(bundle)
    assert _check(bundle, cache).returncode == 0
    assert not (copy / "develop").exists() and wheel.stat().st_ino != inode
    # the bundle's own faults, named in the bundle
    (bundle / "wheels" / "stray.whl").write_text("")
    done = _check(bundle, cache)
    assert done.returncode == 1 and done.stdout == ""
    assert f"bundle refused: {bundle}/wheels/stray.whl: not listed in SHA256SUMS" \
        in done.stderr, done.stderr
    (bundle / "wheels" / "stray.whl").unlink()
    (bundle / "BUNDLE").write_text("shape=local\nshape=other\n")
    _write_sums(bundle)
    done = _check(bundle, cache)
    assert done.returncode == 1
    assert f"bundle refused: {bundle}/BUNDLE: line 2 gives shape again" in done.stderr, \
        done.stderr
