"""The benchmark registry (ocibench.benchmarks) is the one home of a benchmark.

Every list that once named the checks by hand (the parsers' titles, the report's
families, the judge's UCX point-to-point checks, the ceilings' bounds, the checks'
``figure_params``) is derived from it: each test below compares a consumer with the
registry, and one scans the sources for a literal list of check names, so that a second,
hand-written list fails here the day it reappears.  The schema's ``check`` enum is held
equal to the registry by tests/test_shape_schema.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from ocibench import benchmarks, paths
from ocibench.figures import ceilings, judge, outputs
from ocibench.report import model

CORPUS = Path(__file__).parent / "data" / "corpus"
INDEX = yaml.safe_load((CORPUS / "index.yaml").read_text())["entries"]
SOURCES = [paths.REPO_ROOT / "src", paths.REPO_ROOT / "checks"]
REGISTRY = paths.REPO_ROOT / "src" / "ocibench" / "benchmarks.py"


# --- no second list ---------------------------------------------------------------------

def check_name_lists(source: str, names: set[str]) -> list[tuple[int, list[str]]]:
    """(line, names) of each literal tuple, list, set or dict (its keys, or the first
    part of its tuple keys) whose strings are all check names, two or more: a
    hand-written list of checks.  A collection that
    also holds other strings (ReFrame's environment names, of which two are also checks'
    names) is not one."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            elements = node.elts
        elif isinstance(node, ast.Dict):   # its keys; of a tuple key, the first part
            elements = [key.elts[0] if isinstance(key, ast.Tuple) and key.elts else key
                        for key in node.keys if key is not None]
        else:
            continue
        strings = [e.value for e in elements
                   if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        if len(strings) >= 2 and all(s in names for s in strings):
            found.append((node.lineno, strings))
    return found


def test_the_scan_finds_a_hand_written_list():
    """The scan below can fail: it finds the lists this registry replaced."""
    names = set(benchmarks.CHECKS)
    for source in ('FAMILIES = {"osu_latency": "OSU", "osu_bw": "OSU"}',
                   'memories = () if check not in ("osu_latency", "osu_bw") else m',
                   'BOUNDS = {("osu_bw", "D-D", 1): ("a",), ("osu_bw", "H-D", 1): ("b",)}',
                   'PT2PT = ["osu_latency", "osu_bw"]'):
        assert check_name_lists(source, names), source
    assert not check_name_lists('ENV = {"omb": 1, "stream": 2, "nvbandwidth": 3}', names)


def test_no_hand_written_list_of_checks_outside_the_registry():
    names = set(benchmarks.CHECKS)
    found = []
    for root in SOURCES:
        for path in sorted(root.rglob("*.py")):
            if path == REGISTRY:
                continue
            for line, strings in check_name_lists(path.read_text(), names):
                found.append(f"{path.relative_to(paths.REPO_ROOT)}:{line}: {strings}")
    assert not found, ("a list of checks written by hand; derive it from "
                       "ocibench.benchmarks.CHECKS:\n" + "\n".join(found))


# --- each former list, derived ----------------------------------------------------------

def test_every_check_has_its_parser_and_title():
    for name, spec in benchmarks.CHECKS.items():
        assert spec.parser in outputs._PARSERS, name
        if spec.parser in ("omb", "perftest", "imb"):
            assert spec.title, f"{name}: the parser looks for its title"


@pytest.mark.parametrize("name", [n for n, s in benchmarks.CHECKS.items() if s.parser == "omb"])
def test_each_omb_title_is_what_its_parser_looks_for(name):
    """An output that prints another OMB check's title is refused as not this one."""
    title = benchmarks.CHECKS[name].title
    for other, spec in benchmarks.CHECKS.items():
        if spec.parser != "omb" or other == name:
            continue
        text = f"{title} v7.5\n# Size  Value\n1  1.0\n"
        with pytest.raises(outputs.Unjudged, match=f"not {other} output"):
            outputs.parse(other, text, {})


def test_report_families_are_the_registrys():
    assert model.FAMILIES == {name: spec.family for name, spec in benchmarks.CHECKS.items()}


def test_ceiling_bounds_are_the_registrys():
    derived = {(name, buffers, nodes): keys for name, spec in benchmarks.CHECKS.items()
               for (buffers, nodes), keys in spec.ceilings.items()}
    assert ceilings.BOUNDS == derived


@pytest.mark.parametrize("name", list(benchmarks.CHECKS))
def test_the_judge_reads_ucx_memories_exactly_for_the_registrys_checks(name):
    facts = judge.Facts().for_run(name, {"buffers": "D-H", "nodes": 1})
    assert bool(facts.memories) is benchmarks.CHECKS[name].ucx_buffers
    if benchmarks.CHECKS[name].ucx_buffers:
        assert facts.memories == ("cuda", "host")


def test_no_check_class_writes_its_own_figure_params():
    """checks/base.py derives figure_params from the registry's variant parameters."""
    found = []
    for path in sorted((paths.REPO_ROOT / "checks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name == "figure_params":
                found.append(f"{path.name}:{node.lineno}")
    assert [where.split(":")[0] for where in found] == ["base.py"], found


def test_a_bad_registry_entry_is_named_at_import():
    spec = benchmarks.CHECKS["osu_bw"]
    with pytest.raises(ValueError, match="osu_x: directions is 1 or 2, not 4"):
        benchmarks.CheckSpec("osu_x", spec.summary, spec.metric, spec.params,
                             family=spec.family, parser="omb", directions=4)
    with pytest.raises(ValueError, match="osu_x: parser 'omg'"):
        benchmarks.CheckSpec("osu_x", spec.summary, spec.metric, spec.params,
                             family=spec.family, parser="omg")
