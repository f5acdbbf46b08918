"""The benchmark registry (ocibench.benchmarks) is the one home of a benchmark.

Every list that once named the checks by hand (the parsers' titles, the report's
families, the judge's UCX point-to-point checks, the ceilings' bounds, the checks'
``figure_params``) is derived from it: each test below compares a consumer with the
registry, and one scans the sources for a literal list of check names, so that a second,
hand-written list fails here the day it reappears.  The schema's ``check`` enum is held
equal to the registry by tests/test_shape_schema.py.

And the proof that a benchmark is one entry and one check class: ``osu_bibw``, whose
values count both directions (``directions: 2``): judged against twice the per-direction
limit, never against the link alone.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
from pathlib import Path

import pytest
import yaml

from ocibench import accelerators, benchmarks, paths, shapes
from ocibench.figures import ceilings, judge, outputs
from ocibench.figures.evaluate import evaluate
from ocibench.metrics import RunVerdict, Verdict
from ocibench.results import model

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


FIGURES = paths.REPO_ROOT / "src" / "ocibench" / "figures"


def check_name_comparisons(source: str, names: set[str]) -> list[tuple[int, list[str]]]:
    """(line, names) of each comparison (==, !=, in, not in) with a literal check name,
    alone or in a literal tuple, list or set: a parser that branches on which check it
    reads, where the difference belongs in the check's registry entry."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare) or not all(
                isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops):
            continue
        strings = []
        for operand in (node.left, *node.comparators):
            elements = operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) \
                else [operand]
            strings += [e.value for e in elements if isinstance(e, ast.Constant)
                        and isinstance(e.value, str) and e.value in names]
        if strings:
            found.append((node.lineno, strings))
    return found


def test_the_scan_finds_a_branch_on_a_check_name():
    """The scan below can fail: it finds the branches the registry's fields replaced."""
    names = set(benchmarks.CHECKS)
    for source in ('pick = max if check == "ib_write_bw" else min',
                   'if check != "imb_pingpong": pass',
                   'needed = largest * ranks if check in ("osu_alltoall",) else largest',
                   'x = spec.name not in {"osu_bw", "osu_bibw"}'):
        assert check_name_comparisons(source, names), source
    for source in ('if row.check == "error": pass', 'if family == "nccl-tests": pass',
                   'if spec.metric == "bandwidth": pass'):
        assert not check_name_comparisons(source, names), source


def test_no_parser_or_judge_branches_on_a_check_name():
    """What differs between the checks of one parser (unit, columns, ranks, the best of
    the attempts) is read from the registry entry: adding ib_read_bw is one entry, never
    a branch in figures/."""
    names = set(benchmarks.CHECKS)
    found = [f"{path.relative_to(paths.REPO_ROOT)}:{line}: {strings}"
             for path in sorted(FIGURES.rglob("*.py"))
             for line, strings in sorted(check_name_comparisons(path.read_text(), names))]
    assert not found, ("a branch on a check's name; give the difference a field of "
                       "ocibench.benchmarks.CheckSpec:\n" + "\n".join(found))


# --- each former list, derived ----------------------------------------------------------

def test_every_check_has_its_parser_and_title():
    for name, spec in benchmarks.CHECKS.items():
        assert spec.parser in outputs._PARSERS, name
        if spec.parser in ("omb", "perftest", "imb"):
            assert spec.title, f"{name}: the parser looks for its title"
        # the parsers that read a table by its column names find each metric's there
        if spec.parser == "imb" or (spec.parser == "perftest" and spec.metric != "bandwidth"):
            assert set(spec.columns) == set(spec.metrics), f"{name}: a column per metric"


def test_every_family_is_a_parser_module_and_its_failure_words_a_familys():
    """The parser table is derived from benchmarks.PARSERS (one module a family); the
    failure words, read only in a recognised output, are keyed by those families: a
    mistyped key would leave a family's failures unread."""
    assert tuple(outputs._PARSERS) == benchmarks.PARSERS
    assert set(outputs.FAILED_BY_FAMILY) <= set(benchmarks.PARSERS)


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
    assert ("osu_bibw", "D-D", 1) in ceilings.BOUNDS


@pytest.mark.parametrize("name", list(benchmarks.CHECKS))
def test_the_judge_reads_ucx_memories_exactly_for_the_registrys_checks(name):
    facts = judge.Facts().for_run(name, {"buffers": "D-H", "nodes": 1})
    assert bool(facts.memories) is benchmarks.CHECKS[name].ucx_buffers
    if benchmarks.CHECKS[name].ucx_buffers:
        # D is any vendor's device memory (ucx_proto.MEMORY), H the host's
        devices = tuple(a.ucx_memory for a in accelerators.VENDORS.values())
        assert facts.memories == (*devices, "host")


def test_no_check_class_writes_its_own_figure_params():
    """checks/base.py derives figure_params from the registry's variant parameters."""
    found = []
    for path in sorted((paths.REPO_ROOT / "checks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name == "figure_params":
                found.append(f"{path.name}:{node.lineno}")
    assert [where.split(":")[0] for where in found] == ["base.py"], found


def test_every_registry_entry_has_a_check_class_and_every_class_an_entry():
    """A benchmark is one entry and one class: neither without the other."""
    classes = set()
    for path in sorted((paths.REPO_ROOT / "checks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                    and any(isinstance(t, ast.Name) and t.id == "check_name"
                            for t in node.targets)):
                classes.add(node.value.value)
    assert classes == set(benchmarks.CHECKS)


def test_a_bad_registry_entry_is_named_at_import():
    spec = benchmarks.CHECKS["osu_bw"]
    with pytest.raises(ValueError, match="osu_x: directions is 1 or 2, not 4"):
        benchmarks.CheckSpec("osu_x", spec.summary, spec.metric, spec.params,
                             family=spec.family, parser="omb", directions=4)
    with pytest.raises(ValueError, match="osu_x: no module"):
        benchmarks.CheckSpec("osu_x", spec.summary, spec.metric, spec.params,
                             family=spec.family, parser="omb")
    # a family with no parser module: named where the parsers are imported
    with pytest.raises(ValueError, match=r"parser 'omg' .*has no module "
                                         r"ocibench\.figures\.outputs\.omg$"):
        outputs._family_module("omg")


# --- osu_bibw: both directions at once --------------------------------------------------

BIBW = """# OSU MPI-CUDA Bi-Directional Bandwidth Test v7.5
# Datatype: MPI_CHAR.
# Size      Bandwidth (MB/s)
268435456            {value:.2f}
"""
D_D = {"buffers": "D-D", "nodes": 1}


@pytest.fixture(scope="module")
def gpu_with_bibw() -> shapes.Shape:
    """BM.GPU4.8 (NVLink 3: 300 GB/s per direction) with a test figure for osu_bibw D-D
    limited by nvlink_gbs, as a shape would document one (no seed does)."""
    gpu = shapes.load("BM.GPU4.8")
    data = copy.deepcopy(gpu.data)
    data["figures"].append({
        "id": "osu_bibw_d_d_test", "check": "osu_bibw", "params": dict(D_D),
        "metric": "bandwidth", "unit": "MB/s", "source": {"doc": "a test figure"},
        "values": {268435456: 560000.0}, "limit": "nvlink_gbs"})
    return shapes.Shape(gpu.name, data, gpu.path)


def test_a_healthy_bidirectional_run_near_twice_the_link_passes(gpu_with_bibw):
    """570 GB/s both ways on a 300 GB/s-per-direction NVLink: 95 % of what both
    directions carry, and 190 % of one: judged against the link alone, it would fail."""
    result = evaluate("osu_bibw", BIBW.format(value=570000.0), gpu_with_bibw, D_D)
    row = result.rows[0]
    assert result.verdict is RunVerdict.PASS, result.reason
    assert row.implausible is None and (row.limit, row.limit_gbs) == ("2 x nvlink_gbs", 600)
    assert row.limit_fraction == pytest.approx(0.95)


def test_a_bidirectional_run_above_twice_the_link_is_impossible(gpu_with_bibw):
    result = evaluate("osu_bibw", BIBW.format(value=660000.0), gpu_with_bibw, D_D)
    row = result.rows[0]
    assert result.verdict is RunVerdict.FAIL and row.verdict is Verdict.FAIL
    assert "above the physical limit 600 GB/s of nvlink_gbs in both directions " \
           "(2 x 300)" in row.implausible


def test_the_same_value_as_one_direction_is_impossible(gpu_with_bibw):
    """The trap the registry's ``directions`` closes: 570 GB/s in one direction."""
    data = copy.deepcopy(gpu_with_bibw.data)
    figure = next(f for f in data["figures"] if f["id"] == "osu_bw_d_d")
    figure["values"] = {268435456: 560000.0}
    shape = shapes.Shape(gpu_with_bibw.name, data, gpu_with_bibw.path)
    text = BIBW.format(value=570000.0).replace("Bi-Directional Bandwidth", "Bandwidth")
    result = evaluate("osu_bw", text, shape, D_D)
    assert "above the physical limit 300 GB/s of nvlink_gbs" in (result.reason or "")


def test_the_live_checks_reference_caps_at_twice_the_link(gpu_with_bibw):
    reference = judge.reframe_reference(gpu_with_bibw, "osu_bibw", D_D, ["s:p"])["s:p"]
    value, _, upper, unit = reference["bandwidth_268435456"]
    assert (value, unit) == (560000.0, "MB/s")
    assert value * (1 + upper) == pytest.approx(600_000 * judge.LIMIT_MARGIN)


def test_a_bidirectional_value_is_a_fraction_of_twice_the_copy_ceiling():
    """nvbandwidth measures one direction: 2 x 250 GB/s bounds osu_bibw's D-D."""
    node = {"device_to_device_read": 250_000.0, "device_to_device_write": 200_000.0}
    found = ceilings.of("osu_bibw", D_D, 450_000.0, "MB/s", node)
    assert [(c.key, round(c.fraction, 3)) for c in found] == [
        ("device_to_device_read", 0.9), ("device_to_device_write", 1.125)]
    assert found[0].text() == "90.0 % of 2 x GPU->GPU read 250.0 GB/s"
    one_way = ceilings.of("osu_bw", D_D, 225_000.0, "MB/s", node)
    assert round(one_way[0].fraction, 3) == 0.9


def test_local_records_an_osu_bibw_run():
    result = evaluate("osu_bibw", BIBW.format(value=40000.0), "local", D_D)
    assert result.verdict is RunVerdict.RECORDED, result.reason


PT2PT_BW = [e for e in INDEX if e["check"] in ("osu_bw", "osu_bibw") and "figures" in e["expect"]]


@pytest.mark.parametrize("entry", PT2PT_BW, ids=[e["file"] for e in PT2PT_BW])
def test_published_bandwidths_are_never_read_as_the_other_direction_count(entry):
    """A published osu_bibw output read as osu_bw (or the other way) is left unjudged:
    the bidirectional figure would otherwise pass as twice a one-way rate."""
    other = "osu_bw" if entry["check"] == "osu_bibw" else "osu_bibw"
    text = (CORPUS / entry["file"]).read_bytes().decode()
    result = evaluate(other, text, "local", entry.get("params") or {})
    assert result.verdict is RunVerdict.UNJUDGED, (entry["file"], result.verdict)
    assert f"not {other} output" in result.reason


def test_osu_bibw_has_published_outputs():
    assert len([e for e in INDEX if e["check"] == "osu_bibw"]) >= 5


# --- ib_read_bw and ib_read_lat: one entry each, no parser branch ----------------------

def _perftest_entry(template: str, name: str, title: str) -> benchmarks.CheckSpec:
    """A new perftest check as its registry entry: ib_write_*'s entry with the test's
    own name, title and executable; nothing else in the code knows it."""
    spec = benchmarks.CHECKS[template]
    return dataclasses.replace(spec, name=name, title=title,
                               command=(name, *spec.command[1:]))


@pytest.mark.parametrize("template, name, title, params, value, unit", [
    # BW peak 1506.02 MB/sec (perftest's MB: 2^20 bytes) at 65536 bytes, in Gb/s
    ("ib_write_bw", "ib_read_bw", "RDMA_Read BW Test", {"size": 65536, "qps": 1},
     1506.02 * 2**20 * 8 / 1e9, "Gb/s"),
    # t_avg of the 8-byte row
    ("ib_write_lat", "ib_read_lat", "RDMA_Read Latency Test",
     {"size": 8, "iterations": 1000}, 4.16, "us"),
])
def test_a_new_perftest_check_is_one_registry_entry(monkeypatch, template, name, title,
                                                    params, value, unit):
    """ib_read_bw and ib_read_lat read with no parser change: the unit, the column and
    the best of the attempts come from the entry (seen failing while the parser asked
    whether the check was ib_write_bw: ib_read_bw was read as a latency, "no t_avg")."""
    monkeypatch.setitem(benchmarks.CHECKS, name, _perftest_entry(template, name, title))
    text = (CORPUS / "perftest" / f"daizhiyuan-{name}-a-{'MBs-' if 'bw' in name else ''}"
            "client.txt").read_text()
    measured = outputs.parse(name, text, params)
    assert measured.unit == unit
    assert measured.values == {params["size"]: pytest.approx(value)}


# --- ReFrame's environments and the parser families: derived, never written again ---------

#: Where environments are built and selected, and parsers picked.
ENVIRONMENT_SOURCES = [paths.REPO_ROOT / "src" / "ocibench" / "reframe",
                       paths.REPO_ROOT / "src" / "ocibench" / "figures", paths.REPO_ROOT / "checks",
                       paths.REPO_ROOT / "site"]


def hand_lists(source: str, environments: set[str], families: set[str]) -> list[tuple[int, str]]:
    """(line, what) of each place that writes ReFrame's environments or the parser
    families by hand, where the registry's entries give them:

    * an environment selected by its features ("+omb", "+imb +openmpi");
    * ``valid_prog_environs`` or an ``Environment(...)`` given a literal name;
    * a comparison (==, !=, in) with an environment's or a family's name (a special case);
    * a literal tuple, list or set of two or more family names (the list of families),
      or a dict keyed by two or more (a table of families: each family's own words
      belong in its module, figures/outputs/<family>.py).
    """
    features = {word for name in environments for word in name.split("-")} | environments
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and node.value.startswith("+") \
                and all(w.lstrip("+") in features for w in node.value.split()):
            found.append((node.lineno, f"environment feature {node.value!r}"))
        elif isinstance(node, ast.Assign) and any(
                isinstance(t, (ast.Name, ast.Attribute))
                and getattr(t, "id", getattr(t, "attr", "")) == "valid_prog_environs"
                for t in node.targets) and isinstance(node.value, (ast.List, ast.Tuple)) \
                and any(isinstance(e, (ast.Constant, ast.JoinedStr)) for e in node.value.elts):
            found.append((node.lineno, "valid_prog_environs written literally"))
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Environment" \
                and any(isinstance(a, ast.Constant) for a in node.args):
            found.append((node.lineno, "an Environment built from a literal name"))
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            named = [e.value for e in node.elts if isinstance(e, ast.Constant)
                     and isinstance(e.value, str) and e.value in families]
            if len(named) >= 2:
                found.append((node.lineno, f"a list of parser families {named}"))
        elif isinstance(node, ast.Dict):
            named = [k.value for k in node.keys if isinstance(k, ast.Constant)
                     and isinstance(k.value, str) and k.value in families]
            if len(named) >= 2:
                found.append((node.lineno, f"a table of parser families {named}"))
    found += [(line, f"a comparison with {strings}") for line, strings in
              check_name_comparisons(source, environments | families)]
    return found


def test_the_scan_finds_a_hand_written_environment_or_family_list():
    """The scan below can fail: it finds what the derivations replaced."""
    envs, families = {"omb", "nccl-tests", "imb-openmpi", "perftest"}, {"omb", "nccl-tests"}
    for source in ('valid_prog_environs = ["+omb"]', 'valid_prog_environs = ["omb"]',
                   'self.valid_prog_environs = [f"+imb +{self.mpi}"]',
                   'E = (Environment("omb", ("omb", "openmpi"), module="omb"),)',
                   'if env.name == "nccl-tests" and vendor: pass',
                   'if family == "nccl-tests" and text: pass',
                   'PARSERS = ("omb", "nccl-tests")',
                   'FAILED_BY_FAMILY = {"omb": ("^Failed",), "nccl-tests": ("failure",)}'):
        assert hand_lists(source, envs, families), source
    for source in ('valid_prog_environs = prog_environs(self.check_name)',
                   'x = "+gpu -multinode"', 'FAILED = {"omb": ("^Failed",)}',
                   'tags = {"ocibench", "gpu"}'):
        assert not hand_lists(source, envs, families), source


def test_no_environment_or_parser_family_is_written_outside_the_registry():
    """ReFrame's environments come from the entries' ``module``/``mpis`` and the vendor
    rows, the parser families from the entries' ``parser``: neither is listed again."""
    from ocibench.reframe import site

    environments = {env.name for env in site.ENVIRONMENTS}
    found = [f"{path.relative_to(paths.REPO_ROOT)}:{line}: {what}"
             for root in ENVIRONMENT_SOURCES for path in sorted(root.rglob("*.py"))
             for line, what in hand_lists(path.read_text(), environments,
                                          set(benchmarks.PARSERS))]
    assert not found, "written by hand; derive it from ocibench.benchmarks:\n" + "\n".join(found)
