"""Outside the vendor table (ocibench.accelerators), no code says a vendor's stack.

The words are the table's own (each row's buffer flag and Spack variant: cuda, rocm;
the tools its probe and a ticket run: nvidia-smi, amd-smi), looked for in what the code
does: its names and its string literals, in src/ and
checks/.  Comments and docstrings may say them: they explain and cite (a seed's
``-d cuda D D``, UCX's src/uct/cuda).  A vendor added to the table adds its words.
"""

from __future__ import annotations

import ast
import re

from ocibench import accelerators
from ocibench.paths import REPO_ROOT

TABLE = REPO_ROOT / "src" / "ocibench" / "accelerators"

#: Files that may still say a vendor's words, each with the reason; the test fails once
#: a file here says none (the entry is then stale and goes).
ALLOWED: dict[str, str] = {
    # Its texts tell a person what failed and what to do, in the words the admin knows
    # (the fabric manager CUDA needs, an MPI built CUDA-aware, ROCm's tools); they
    # decide nothing: which entry applies is decided by the probe, figure or path that
    # names it.
    "src/ocibench/ladder.py": "the action ladder's texts for people",
    # NVIDIA-only hardware, no vendor branch: GB200's NVLink fabric registration, IMEX
    # and NVLink-C2C (nvidia-smi -q's Fabric section, nvidia-smi c2c -s), probed where
    # the shape declares the capabilities only NVIDIA's GPUs have.
    "src/ocibench/node/nvlink_fabric.py": "GB200's NVLink fabric, IMEX and C2C probes",
}


def vendor_words() -> re.Pattern[str]:
    words = {w for a in accelerators.VENDORS.values()
             for w in (a.buffer_flag, a.spack_variant.lstrip("+"), a.ucx_memory,
                       a.probe_command[0], *(args[0] for _file, args in a.ticket.tools))}
    return re.compile("|".join(sorted(map(re.escape, words))), re.IGNORECASE)


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                             ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _texts(node: ast.AST, docstrings: set[int]) -> list[str]:
    """The names and string literals one node of the syntax tree holds."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [] if id(node) in docstrings else [node.value]
    for kind, attr in ((ast.Name, "id"), (ast.Attribute, "attr"), (ast.arg, "arg"),
                       (ast.FunctionDef, "name"), (ast.ClassDef, "name"),
                       (ast.alias, "name"), (ast.keyword, "arg")):
        if isinstance(node, kind):
            value = getattr(node, attr)
            return [value] if value else []
    return []


def said(source: str, words: re.Pattern[str]) -> list[str]:
    """'line: word in text' for each vendor word in the code of ``source``."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        for text in _texts(node, docstrings):
            for match in words.finditer(text):
                found.append(f"{getattr(node, 'lineno', '?')}: {match.group(0)} in {text[:60]!r}")
    return found


def test_the_words_are_the_tables() -> None:
    words = vendor_words()
    assert words.fullmatch("cuda") and words.fullmatch("ROCM")
    assert words.fullmatch("nvidia-smi") and words.fullmatch("amd-smi")


def test_the_scan_finds_code_and_skips_what_explains() -> None:
    words = vendor_words()
    source = ('"""Seeds run -d cuda."""\n'
              "# UCX's src/uct/cuda\n"
              "def f(has_rocm):\n"
              '    """cuda in a docstring"""\n'
              '    return ["-d", "cuda"]\n')
    assert [line.split(":")[0] for line in said(source, words)] == ["3", "5"]


def test_no_code_outside_the_table_says_a_vendors_words() -> None:
    words = vendor_words()
    files = sorted([*(REPO_ROOT / "src").rglob("*.py"), *(REPO_ROOT / "checks").rglob("*.py")])
    assert any(path.parent == TABLE for path in files)
    found, stale = {}, []
    for path in files:
        if TABLE in path.parents:
            continue
        rel = str(path.relative_to(REPO_ROOT))
        where = said(path.read_text(), words)
        if rel in ALLOWED:
            stale += [] if where else [rel]
        elif where:
            found[rel] = where
    assert not found, "vendor words outside ocibench.accelerators: " + "; ".join(
        f"{rel}:{lines[0]}" + (f" (+{len(lines) - 1})" if len(lines) > 1 else "")
        for rel, lines in found.items())
    assert not stale, f"ALLOWED lists files that no longer say a vendor's words: {stale}"
