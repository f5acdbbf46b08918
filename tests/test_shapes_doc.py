"""docs/shapes.md's table of shape files is the files' own (scripts/shapes-table.py):
a shape file added, removed or re-summarised without the doc fails here."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from ocibench import paths

SCRIPT = paths.REPO_ROOT / "scripts" / "shapes-table.py"
DOC = paths.REPO_ROOT / "docs" / "shapes.md"
SHAPES = paths.REPO_ROOT / "site" / "shapes"


def _check(shapes_dir: Path = SHAPES, doc: Path = DOC) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OCIBENCH_SHAPES_DIR": str(shapes_dir)}
    return subprocess.run([sys.executable, str(SCRIPT), "--check", "--doc", str(doc)],
                          capture_output=True, text=True, env=env, timeout=120)


def test_the_doc_lists_every_shape_file_as_it_is() -> None:
    done = _check()
    assert done.returncode == 0, done.stderr
    table = DOC.read_text()
    for path in SHAPES.glob("*.yaml"):
        assert f"| `{path.name}` |" in table, path.name


def test_a_shape_file_the_doc_does_not_know_fails(tmp_path: Path) -> None:
    shapes_dir = tmp_path / "shapes"
    shutil.copytree(SHAPES, shapes_dir)
    # a new shape, by the way docs/shapes.md tells: copy the closest file, edit it
    text = (SHAPES / "BM.GPU.H100.8.yaml").read_text()
    (shapes_dir / "BM.GPU.H100.16.yaml").write_text(
        text.replace("shape: BM.GPU.H100.8", "shape: BM.GPU.H100.16"))
    done = _check(shapes_dir)
    assert done.returncode == 1, done
    assert done.stderr == (f"{DOC}: the table of shape files differs from the shape files: "
                           "run python3 scripts/shapes-table.py\n")
    # and the script writes it: then the two agree
    doc = tmp_path / "shapes.md"
    doc.write_text(DOC.read_text())
    env = {**os.environ, "OCIBENCH_SHAPES_DIR": str(shapes_dir)}
    subprocess.run([sys.executable, str(SCRIPT), "--doc", str(doc)], check=True, env=env,
                   timeout=120)
    assert "| `BM.GPU.H100.16.yaml` | 8x H100 80GB" in doc.read_text()
    assert _check(shapes_dir, doc).returncode == 0


def test_a_summary_changed_without_the_doc_fails(tmp_path: Path) -> None:
    shapes_dir = tmp_path / "shapes"
    shutil.copytree(SHAPES, shapes_dir)
    path = shapes_dir / "BM.GPU4.8.yaml"
    path.write_text(path.read_text().replace("summary: 8x A100-SXM4-40GB",
                                             "summary: 8x A100-SXM4-80GB"))
    assert _check(shapes_dir).returncode == 1
