"""scripts/mirror-from-checkouts.sh as a newcomer runs it: before `make setup`.

README's air-gapped steps run the script on a fresh machine, where the Python tools
(`make setup` installs them) or the pinned Spack may not be there yet.  Each case runs
the real script on a git repository made here, with a per-user cache of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ocibench import paths

SCRIPT = paths.REPO_ROOT / "scripts" / "mirror-from-checkouts.sh"


@pytest.fixture(scope="module")
def upstream(tmp_path_factory) -> Path:
    """A git repository with a tagged release, as a snapshot of an upstream is."""
    repo = tmp_path_factory.mktemp("upstream") / "stream"
    repo.mkdir()
    (repo / "stream.c").write_text("/* stream.c,v 5.10 */\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    for argv in (["init", "-q"], ["add", "."], ["commit", "-qm", "release"], ["tag", "v5.10"]):
        subprocess.run(git + argv, check=True, capture_output=True)
    return repo


def _run(tmp: Path, python_dir: Path | None, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OCIBENCH_", "PYTHONPATH", "SPACK_"))}
    env.update(OCIBENCH_CACHE=str(tmp / "cache"), OCIBENCH_SHAPE="local")
    if python_dir:
        env["PATH"] = f"{python_dir}:{env['PATH']}"
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True,
                          text=True, timeout=120)


def test_without_the_python_tools_it_says_run_make_setup(upstream, tmp_path):
    """A python3 without the project's tools (a fresh venv): one line naming them and
    `make setup`, no traceback, nothing written (it printed a traceback first)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   capture_output=True)
    done = _run(tmp_path, venv / "bin", f"stream={upstream}#v5.10")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "run `make setup` first" in lines[0], done.stderr
    assert "jsonschema" in lines[0], lines[0]
    assert not (tmp_path / "cache").exists()


def test_without_spack_a_tag_becomes_a_develop_source_saying_why(upstream, tmp_path):
    """No pinned Spack yet: the tag's archive cannot be checked against its recipe, so
    it is a develop source, and the script says so and how to do better."""
    done = _run(tmp_path, None, f"stream={upstream}#v5.10")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "cannot be checked against its recipe" in done.stdout, done.stdout
    assert "make setup" in done.stdout
    develop = (tmp_path / "cache" / "develop" / "local.yaml").read_text()
    assert "spec: stream@=5.10" in develop
    assert (tmp_path / "cache" / "dev-src" / "stream-5.10" / "stream.c").is_file()
