"""A shape file is read and validated once per process, and read again once it changes.

ReFrame's start-up reads every shape file through several readers (its configuration,
the checks' parameter ranges, each check's configure); ``ocibench.shapes.load`` keeps
what it parsed, keyed by the file's path and content, so that each file costs one YAML
parse and one validation, and the ``local`` machine probe runs once.
"""

from __future__ import annotations

import collections
import copy
import os
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ocibench import paths, shapes
from ocibench.shapes import probe

#: Run ReFrame in this interpreter after wrapping ocibench.shapes._parse, the one place
#: a shape file's YAML is parsed: every parse appends the file's name to $PARSE_LOG.  The
#: wrapper is the start-up benchmark's own (scripts/bench-reframe-start.py), so the test
#: counts what the benchmark counts.  A wrapper that finds no _parse fails the run
#: (never a silent count of nothing).
_COUNTING_REFRAME = runpy.run_path(
    str(paths.REPO_ROOT / "scripts" / "bench-reframe-start.py"), run_name="bench")["COUNTING"]


def _counted_listing(tmp_path: Path, exe: str, wrapper: str) -> Path:
    """``reframe -l`` of every check against ``local``, under a counting ``wrapper``
    (its log's path is returned): the listing must succeed and list the checks."""
    log = tmp_path / "parses.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RFM_")}
    env.update(PARSE_LOG=str(log), OCIBENCH_SHAPE=shapes.LOCAL,
               PYTHONPATH=os.pathsep.join(filter(None, [str(paths.REPO_ROOT / "src"),
                                                         env.get("PYTHONPATH")])),
               OCIBENCH_PERFLOG_DIR=str(tmp_path / "perflogs"),
               OCIBENCH_REPORT_DIR=str(tmp_path / "reports"))
    env.pop(shapes.SHAPES_DIR_ENV, None)
    done = subprocess.run(
        [sys.executable, "-c", wrapper, exe,
         "-C", str(paths.SITE_DIR / "reframe_config.py"), "-c", str(paths.CHECKS_DIR),
         "--nocolor", "--prefix", str(tmp_path), "-l"],
        capture_output=True, text=True, cwd=paths.REPO_ROOT, timeout=600, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Found" in done.stdout, done.stdout   # the checks were listed
    return log


def test_a_reframe_listing_parses_each_shape_file_once(tmp_path):
    exe = shutil.which("reframe")
    if not exe:
        pytest.skip("reframe is not on PATH (pip install -e '.[test]')")
    log = _counted_listing(tmp_path, exe, _COUNTING_REFRAME)
    parsed = collections.Counter(log.read_text().split())
    every_file = {f"{name}.yaml" for name in shapes.known_shapes()}
    assert set(parsed) == every_file          # each was read (the wrapper counted)
    twice = {name: count for name, count in parsed.items() if count > 1}
    assert not twice, f"shape files parsed more than once in one listing: {twice}"


@pytest.fixture
def shape_copy(tmp_path, monkeypatch) -> Path:
    """A copy of one shipped shape file in a shapes directory of the test's own."""
    monkeypatch.setenv(shapes.SHAPES_DIR_ENV, str(tmp_path))
    path = tmp_path / "BM.Optimized3.36.yaml"
    shutil.copyfile(shapes.SHAPES_DIR / path.name, path)
    return path


def test_a_shape_is_kept_while_its_file_is_unchanged(shape_copy):
    first = shapes.load("BM.Optimized3.36")
    assert shapes.load("BM.Optimized3.36") is first
    # rewritten with the same bytes (a new mtime): still the same content, still kept
    shape_copy.write_bytes(shape_copy.read_bytes())
    assert shapes.load_file(shape_copy) is first


def test_a_changed_shape_file_is_read_again(shape_copy):
    first = shapes.load("BM.Optimized3.36")
    text = shape_copy.read_text()
    # Same size and written at once: a cache keyed by path, mtime or size alone keeps
    # the old shape; the content says it changed.
    changed = text.replace("shape: BM.Optimized3.36", "shape: BM.Optimized3.37", 1)
    shape_copy.write_text(changed)
    with pytest.raises(shapes.ShapeError, match="'shape' is 'BM.Optimized3.37'"):
        shapes.load("BM.Optimized3.36")
    # a broken file is refused every time it is asked for, and read again once mended
    with pytest.raises(shapes.ShapeError, match="'shape' is 'BM.Optimized3.37'"):
        shapes.load("BM.Optimized3.36")
    shape_copy.write_text(text)
    again = shapes.load("BM.Optimized3.36")
    assert again.data == first.data


def test_the_local_probe_runs_once_per_process(monkeypatch, tmp_path):
    calls = []
    real = probe.complete_local

    def counted(*args, **kwargs):
        calls.append(os.environ.get("PATH"))
        return real(*args, **kwargs)

    monkeypatch.setattr(probe, "complete_local", counted)
    # a PATH of its own: the tools this probe finds are not those an earlier test faked
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("lscpu",):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    monkeypatch.setenv("PATH", str(bin_dir))
    first = shapes.load(shapes.LOCAL)
    assert shapes.load(shapes.LOCAL) is first
    assert len(calls) == 1
    # Another PATH finds other tools (a GPU tool installed, a fake one in a test): the
    # machine is described again, once.
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{tmp_path}")
    shapes.load(shapes.LOCAL)
    shapes.load(shapes.LOCAL)
    assert len(calls) == 2


def test_readers_never_change_a_kept_shape(monkeypatch):
    """A kept Shape is shared by every reader of the process: ReFrame's configuration and
    the Spack scopes read it and leave it as it was loaded."""
    from ocibench.reframe import site
    from ocibench.spack import scopes

    monkeypatch.setenv(shapes.SHAPE_ENV, shapes.LOCAL)
    names = [n for n in shapes.known_shapes() if n != shapes.LOCAL]
    as_loaded = {name: copy.deepcopy(shapes.load(name).data) for name in names}
    site.build([])
    for name in names:
        shape = shapes.load(name)
        if not scopes.is_machine_described(shape):   # those need this machine's Spack
            scopes.derive(shape)
    assert {name: shapes.load(name).data for name in names} == as_loaded


#: As _COUNTING_REFRAME, counting each time a shape file is read (``shapes.load_file``:
#: its bytes read and hashed, whether or not they are parsed again) and each probe of
#: this machine (``probe.complete_local``).
_COUNTING_READS = _COUNTING_REFRAME.replace("shapes._parse = counted", """shapes._parse = counted
from ocibench.shapes import probe
real_read, real_probe = shapes.load_file, probe.complete_local
def counted_read(path, *args, **kwargs):
    with open(os.environ["PARSE_LOG"] + ".reads", "a") as log:
        log.write(os.path.basename(str(path)) + "\\n")
    return real_read(path, *args, **kwargs)
def counted_probe(*args, **kwargs):
    with open(os.environ["PARSE_LOG"] + ".reads", "a") as log:
        log.write("probe\\n")
    return real_probe(*args, **kwargs)
shapes.load_file, probe.complete_local = counted_read, counted_probe""")


def test_reframe_checks_take_the_shapes_the_configuration_built(tmp_path):
    """During a listing each shape file is read once, by the configuration: the checks'
    parameter ranges and each check's configure take the shapes it built
    (ocibench.reframe.site.built_shape), and ``local``'s machine is probed once."""
    exe = shutil.which("reframe")
    if not exe:
        pytest.skip("reframe is not on PATH (pip install -e '.[test]')")
    assert "shapes._parse = counted" in _COUNTING_REFRAME   # the wrapper above took
    log = _counted_listing(tmp_path, exe, _COUNTING_READS)
    counted = collections.Counter(Path(f"{log}.reads").read_text().split())
    assert counted.pop("probe", 0) == 1, "local's machine probed more or less than once"
    assert set(counted) == {f"{name}.yaml" for name in shapes.known_shapes()}
    again = {name: count for name, count in counted.items() if count > 1}
    assert not again, f"shape files read more than once in one listing: {again}"
