"""The layers of ``ocibench`` (docs/architecture.md): no module imports a layer above its
own.  Read from the code's own imports (``ast``), so a new upward import fails here."""

from __future__ import annotations

import ast
from pathlib import Path

from ocibench.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "src" / "ocibench"

#: Bottom to top.  A module may import its own layer and those below it.  The
#: vocabulary is every module directly under ocibench/ except the entry point, and the
#: accelerators package (the vendor table: a module per vendor row).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("vocabulary", "accelerators"),
    ("shapes",),
    ("figures",),
    ("node",),
    ("spack",),
    ("reframe",),
    ("results",),
    ("history",),
    ("cluster",),
    ("pages",),
    ("report", "sweep", "health"),
    ("commands", "cli"),
)

#: The applications, side by side on one layer: none imports another.  What two of them
#: share lives below them (results, history, cluster, pages), never in one of them.
APPLICATIONS = ("report", "sweep", "health")


def layer_of(module: str, package: Path = PACKAGE) -> int:
    """The layer index of a dotted module name under ocibench."""
    parts = module.split(".")
    if parts[0] != "ocibench":
        raise ValueError(module)
    first = parts[1] if len(parts) > 1 else ""
    for index, names in enumerate(LAYERS):
        if first in names:
            return index
    if first and (package / first).is_dir():
        raise AssertionError(f"ocibench.{first} is a package of no layer: add it to LAYERS "
                             "and to docs/architecture.md")
    return 0  # a module of the vocabulary (ocibench.metrics, ocibench.benchmarks, ...)


def module_name(path: Path, package: Path = PACKAGE) -> str:
    rel = path.relative_to(package.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, package: Path = PACKAGE) -> list[tuple[int, str]]:
    """Every ocibench module a file imports (top level or inside a function)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] == "ocibench":
                where = package.parent / node.module.replace(".", "/")
                found += [(node.lineno, f"{node.module}.{alias.name}")
                          if (where / alias.name).is_dir() or (where / f"{alias.name}.py").exists()
                          else (node.lineno, node.module) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "ocibench"]
    return found


def upward_imports(package: Path = PACKAGE) -> list[str]:
    problems = []
    for path in sorted(package.rglob("*.py")):
        if "scripts" in path.relative_to(package).parts:  # run by `spack python`: no ocibench
            continue
        here = module_name(path, package)
        own = layer_of(here, package)
        for line, target in imports_of(path, package):
            above = layer_of(target, package)
            if above > own:
                problems.append(f"{path.relative_to(package.parent)}:{line}: {here} "
                                f"({LAYERS[own][0]}) imports {target} ({LAYERS[above][0]})")
    return problems


def application_imports(package: Path = PACKAGE) -> list[str]:
    """Every import of one application (:data:`APPLICATIONS`) by another."""
    problems = []
    for path in sorted(package.rglob("*.py")):
        here = module_name(path, package)
        mine = here.split(".")[1] if "." in here else ""
        if mine not in APPLICATIONS:
            continue
        for line, target in imports_of(path, package):
            theirs = target.split(".")[1] if "." in target else ""
            if theirs in APPLICATIONS and theirs != mine:
                problems.append(f"{path.relative_to(package.parent)}:{line}: {here} "
                                f"({mine}) imports {target} ({theirs})")
    return problems


def test_no_module_imports_a_layer_above_its_own() -> None:
    assert upward_imports() == []


def test_an_upward_import_is_found(tmp_path: Path) -> None:
    # A copy of two real modules, one given an import of the node layer: the test above
    # must see it (a layer test that cannot fail would prove nothing).
    tree = tmp_path / "src" / "ocibench"
    (tree / "figures").mkdir(parents=True)
    (tree / "node").mkdir()
    (tree / "figures" / "judge.py").write_text(
        (PACKAGE / "figures" / "judge.py").read_text()
        + "\nfrom ocibench.node import preflight  # noqa\n")
    (tree / "node" / "preflight.py").write_text("")
    (tree / "node" / "__init__.py").write_text("")
    found = upward_imports(tree)
    assert len(found) == 1, found
    assert "ocibench.figures.judge (figures) imports ocibench.node.preflight (node)" in found[0]


def test_every_package_has_a_layer() -> None:
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    named = {name for names in LAYERS for name in names}
    assert packages <= named, f"packages of no layer: {sorted(packages - named)}"


def test_the_applications_import_none_of_each_other() -> None:
    assert APPLICATIONS in LAYERS
    assert application_imports() == []


def test_an_application_importing_another_is_found(tmp_path: Path) -> None:
    # A copy of a real module of the healthcheck given an import of the sweep, as it had
    # before the drain budget moved to the cluster layer: the test above must see it,
    # though the layer test does not (one layer, side by side).
    tree = tmp_path / "src" / "ocibench"
    (tree / "health").mkdir(parents=True)
    (tree / "sweep").mkdir()
    (tree / "health" / "state.py").write_text(
        (PACKAGE / "health" / "state.py").read_text()
        + "\nfrom ocibench.sweep import plan  # noqa\n")
    (tree / "sweep" / "plan.py").write_text("")
    (tree / "sweep" / "__init__.py").write_text("")
    assert upward_imports(tree) == []
    found = application_imports(tree)
    assert len(found) == 1, found
    assert "ocibench.health.state (health) imports ocibench.sweep.plan (sweep)" in found[0]
