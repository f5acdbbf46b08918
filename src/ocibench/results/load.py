"""Read and judge runs: ReFrame JSON run reports (through
:mod:`ocibench.reframe.runreport`) and ``ocibench evaluate --json`` files, for the
report (all of them), the sweep and the history (a run report's test cases).

A ReFrame test case is a benchmark result when it has the variable ``check_name``;
other test cases (build fixtures, for instance) are left out.  Its measured values are
its performance variables ``<metric>_<key>``; its parameters are the variables that
:mod:`ocibench.benchmarks` names for its check; its provenance is the
``provenance.json`` the check kept (ReFrame copies ``keep_files`` to the output
directory; the stage directory is left in place only when a test fails).

Nothing an input says about a verdict is trusted: every measured value is judged again
by :func:`ocibench.figures.judge.judge` against the current shape files and policy.  Where the
input's own verdict (a row's ``verdict``, an evaluation's ``ok``, ReFrame's ``pass``)
differs from that, the result keeps the re-judged one and says so in ``disagreements``.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path
from typing import Any

from ocibench import accelerators, benchmarks, jsonfile, metrics, shapes
from ocibench.figures import evaluate as evaluation
from ocibench.figures import judge, outputs, references, ucx_proto
from ocibench.metrics import RunVerdict
from ocibench.node import preflight
from ocibench.reframe import runreport
from ocibench.results.model import Result, Row

PROVENANCE_FILE = "provenance.json"
#: What the preflight check keeps (checks/preflight.py): the node's capabilities, which
#: name the cause of a missed figure of the same system and partition.
PREFLIGHT_FILE = "preflight.json"

#: What the report shows of a result's provenance; every key is present, None if unknown.
PROVENANCE_FIELDS = ("shape", "hosts", "date", "specs", "modules",
                     "mpi", "ucx", "nccl", "toolkit", "driver", "image")
#: Before the vendor table, provenance.json named the toolkit by its package ("cuda":
#: "12.9.86"); such a field is read as ``toolkit`` ("cuda 12.9.86").
_TOOLKIT_FIELDS = tuple(a.toolkit_packages[0] for a in accelerators.VENDORS.values())


class InputError(ValueError):
    """An input file the report cannot use; the message is one line."""


def load(paths: list[Path], provenance: Path | None = None) -> list[Result]:
    """Every benchmark result in the inputs, in input order."""
    given = _read_provenance(provenance) if provenance else None
    results: list[Result] = []
    seen: dict[str, Path] = {}   # an input's content -> the first path that held it
    for path in paths:
        raw = _read_bytes(path)
        digest = hashlib.sha256(raw).hexdigest()
        if digest in seen:
            # The same run twice would count every result twice (two passes, two
            # fails): refused, naming both.
            same = "given twice" if _same_file(seen[digest], path) else \
                f"the same content as {seen[digest]}"
            raise InputError(f"{path}: {same}: each run is read once; leave one out")
        seen[digest] = path
        try:
            results += _results(path, _parse_json(raw, path), given)
        except (shapes.ShapeError, benchmarks.ParamError) as err:
            raise InputError(f"{path}: {err}") from err
        except jsonfile.JsonFileError as err:   # a field of the wrong type, named
            raise InputError(str(err)) from None
        except (KeyError, IndexError, TypeError, AttributeError) as err:
            raise InputError(f"{path}: malformed ({type(err).__name__}: {err})") from err
    if not results:
        raise InputError("no benchmark results in the inputs (no test case has check_name)")
    _refuse_repeated_runs(results)
    _attach_ceilings(results)
    return results


def _same_file(first: Path, second: Path) -> bool:
    try:
        return first.samefile(second)
    except OSError:
        return False


def _refuse_repeated_runs(results: list[Result]) -> None:
    """One run in two inputs (a ReFrame report and a copy of it edited, an evaluation
    kept twice): the same check, parameters, hosts and completion time.  Results with
    no completion time recorded are told apart by their origin only."""
    seen: dict[tuple[Any, ...], Result] = {}
    for result in results:
        date = result.provenance.get("date")
        if not date:
            continue
        key = (result.check, result.name, json.dumps(result.params, sort_keys=True, default=str),
               tuple(result.provenance.get("hosts") or ()), str(date))
        if key in seen:
            raise InputError(f"{result.origin}: the same run as {seen[key].origin} "
                             f"({result.name}, completed {date}): each run is read once")
        seen[key] = result


def _attach_ceilings(results: list[Result]) -> None:
    """Give each result the copy ceilings of its node: the nvbandwidth result of the
    same shape whose hosts are the result's, else the shape's last one."""
    measured = [r for r in results if r.check == "nvbandwidth" and r.rows and not r.skipped]
    for result in results:
        if result.check == "nvbandwidth":
            continue
        hosts = set(result.provenance.get("hosts") or ())
        same = [r for r in measured if r.shape == result.shape]
        exact = [r for r in same if hosts and hosts <= set(r.provenance.get("hosts") or ())]
        chosen = (exact or same or [None])[-1]
        if chosen is not None:
            result.ceilings = {str(row.key): row.measured for row in chosen.rows
                               if metrics.is_number(row.measured)}
            result.ceilings_from = chosen.name


def _results(path: Path, data: Any, provenance: dict[str, Any] | None) -> list[Result]:
    if runreport.is_run_report(data):
        return _reframe_results(runreport.checked(path, data))
    if isinstance(data, dict) and "check" in data and "rows" in data:
        check_evaluation(path, data)
        sidecar = path.parent / PROVENANCE_FILE
        found = provenance if provenance is not None else (
            _read_provenance(sidecar) if sidecar.is_file() else None)
        return [_evaluation_result(path, data, found)]
    raise InputError(f"{path}: neither a ReFrame run report nor an "
                     "`ocibench evaluate --json` output")


def _read_bytes(path: Path) -> bytes:
    try:
        return jsonfile.read(path)
    except jsonfile.JsonFileError as err:
        raise InputError(str(err)) from None


def _parse_json(raw: bytes, path: Path) -> Any:
    try:
        return jsonfile.parse(raw, str(path))
    except jsonfile.JsonFileError as err:
        raise InputError(str(err)) from None


def _read_json(path: Path) -> Any:
    """A JSON input, bounded in size and depth (ocibench.jsonfile)."""
    return _parse_json(_read_bytes(path), path)


def _read_provenance(path: Path) -> dict[str, Any]:
    try:
        return check_provenance(path, _read_json(path))
    except jsonfile.JsonFileError as err:
        raise InputError(str(err)) from None


def _known_check(path: Path, check: Any) -> str:
    if not isinstance(check, str) or check not in benchmarks.CHECKS:
        raise InputError(f"{path}: unknown check {check!r}; "
                         f"known: {', '.join(benchmarks.CHECKS)}")
    return check


def _evaluation_result(path: Path, data: dict[str, Any],
                       provenance: dict[str, Any] | None) -> Result:
    check = _known_check(path, data["check"])
    shape = shape_of(data.get("shape") or shapes.LOCAL)
    params = benchmarks.resolve(check, dict(data.get("params") or {}))
    figures = references.matching(shape, check, params)
    # what the evaluation named causes from: the node's preflight, the output's tables
    facts = judge.Facts(
        absent=dict(data.get("absent") or {}),
        present=dict(data.get("present") or {}),
        tables=tuple(ucx_proto.Table.from_dict(t) for t in data.get("ucx_protocols") or ()),
    ).for_run(check, params)
    rows, disagreements = [], []
    for index, raw in enumerate(data["rows"]):   # checked by check_evaluation
        where = f"rows[{index}]"
        metric, unit = _metric_unit(path, where, raw["metric"], raw["unit"])
        row = judge.judge(shape, figures, metric, _key(raw["key"]), float(raw["measured"]), unit,
                          facts)
        rows.append(row)
        stored = raw.get("verdict")
        if stored is not None and str(stored) != str(row.verdict):
            disagreements.append(f"{row.metric} at {row.label}: the input says "
                                 f"{stored!r}, re-judged {str(row.verdict)!r}")
    # The sanity verdict cannot be re-run without the output: an evaluation that failed
    # sanity has no rows and its reason; one that passed has rows to re-judge.
    # The sanity verdict and the NCCL path cannot be re-run without the output: an
    # evaluation that failed sanity has no rows and its reason; one that passed has rows
    # to re-judge.  An input without "unjudged" (from before the three states) has none.
    unjudged = data.get("unjudged") or None
    sanity = data.get("sanity") or (None if data["rows"] or unjudged else data.get("reason"))
    path_fault = data.get("path_fault") or None
    verdict = evaluation.run_verdict(rows, broken=bool(sanity or path_fault),
                                     unjudged=unjudged,
                                     documented=evaluation.documents(shape, check))
    stored = data.get("verdict")
    if stored is not None and str(stored) != str(verdict):
        disagreements.append(f"the input says {stored!r}, re-judged {str(verdict)!r}")
    elif stored is None and "ok" in data and bool(data["ok"]) != (
            verdict in (RunVerdict.PASS, RunVerdict.RECORDED)):
        disagreements.append(f"the input says ok={bool(data['ok'])}, re-judged {verdict}")
    return Result(
        check=check, shape=shape.name, params=params, rows=rows, verdict=verdict,
        reason=(sanity or path_fault or judge.first_failure(rows)
                or (unjudged or "no documented figure was compared"
                    if verdict is RunVerdict.UNJUDGED else None)),
        notes=[str(n) for n in data.get("notes") or []], disagreements=disagreements,
        origin=str(path), name=f"{check}: evaluation of {Path(str(data.get('file') or path)).name}",
        provenance=_provenance(provenance, shape=shape.name),
        path_kind=data.get("path_kind") if path_fault else None,
    )


@cache
def shape_of(name: str) -> shapes.Shape:
    """A shape file, loaded once per report."""
    if not isinstance(name, str):
        raise InputError(f"shape {name!r} is not a shape name")
    return shapes.load(name)


def _metric_unit(path: Path, where: str, metric: str, unit: str) -> tuple[str, str]:
    """A metric and a unit it may be stated in (both already known words)."""
    if metric not in metrics.METRICS:
        raise InputError(f"{path}: {where}.metric: unknown metric {metric!r}; "
                         f"known: {', '.join(metrics.METRICS)}")
    units = metrics.METRICS[metric].units
    if unit not in units:
        raise InputError(f"{path}: {where}.unit: {unit!r} is no unit of {metric} "
                         f"({', '.join(units)})")
    return metric, unit


def _key(raw: Any) -> int | str:
    """A message size as an int, a STREAM kernel or nccl column as its name."""
    text = str(raw)
    return int(text) if text.isascii() and text.isdigit() else text


def _reframe_results(report: runreport.RunReport) -> list[Result]:
    facts: dict[tuple[str, str], judge.Facts] = {}
    for case in report.cases:
        if case.check is None and case.get("name") == "preflight":
            found = _preflight_facts(case)
            if found is not None:
                facts[(str(case.get("system")), str(case.get("partition")))] = found
    return [testcase_result(case, facts.get((str(case.get("system")),
                                             str(case.get("partition")))))
            for case in report.benchmarks()]


def _preflight_facts(case: runreport.TestCase) -> judge.Facts | None:
    """What the preflight check of a run found, present and missing, from the
    preflight.json it kept; None where it kept none."""
    found = case.kept(PREFLIGHT_FILE)
    if found is None:
        return None
    try:
        return judge.Facts.from_preflight(preflight.read_report(found))
    except ValueError as err:
        raise InputError(str(err)) from None


def _testcase_tables(case: runreport.TestCase) -> tuple[ucx_proto.Table, ...]:
    """The UCX protocol tables in a test case's kept output (UCX_PROTO_INFO=y)."""
    texts = []
    for file in case.job_outputs():
        with open(file, "rb") as stream:
            try:
                texts.append(outputs.read_output(stream, str(file)))
            except outputs.OutputTooLarge as err:
                raise InputError(str(err)) from err
    return tuple(ucx_proto.parse("\n".join(texts))) if texts else ()


def testcase_result(case: runreport.TestCase, absent: judge.Facts | None = None) -> Result:
    """One benchmark test case of a checked run report, every value judged again;
    ``absent``: what the run's preflight found (the names of a missed figure's causes)."""
    path = case.path
    check = _known_check(path, case.check)
    name = case.name
    provenance = _testcase_provenance(case)
    shape = shape_of(_testcase_shape(case, provenance))
    measured = case.perf()
    given = case.given_params()
    try:
        params = benchmarks.resolve(check, given)
    except benchmarks.ParamError as err:
        if case.get("perfvalues"):
            raise InputError(f"{path}: {name}: {err}") from err
        params = given  # the case stopped before its parameters were complete
    figures = references.matching(shape, check, params)
    node = absent or judge.Facts()
    facts = judge.Facts(absent=node.absent, present=node.present,
                        tables=_testcase_tables(case)).for_run(check, params)
    rows: list[Row] = []
    for perf in measured:
        # only the value and unit are used: the value is judged again, with its
        # figure's source, floor and limit.
        metric, unit = _metric_unit(path, f"{name}: perfvalues[{perf.target!r}]",
                                    perf.metric, perf.unit)
        rows.append(judge.judge(shape, figures, metric, _key(perf.key), perf.value, unit,
                                facts))
    skipped, passed = case.skipped, case.passed
    # A missed figure: its line as judged here, whose cause also draws on the run's
    # preflight (which the live check cannot see); any other failure: ReFrame's.
    reason = judge.first_failure(rows) or case.get("fail_reason") or None
    # The live check fails a run it could not judge with "could not judge: <why>"
    # (metrics.could_not_judge): that is UNJUDGED here, never the node's failure.
    unjudged = metrics.unjudged_in(case.get("fail_reason"))
    # A live check's variant that the shape documents no figure for is recorded, as on
    # `local` (checks/base.py, docs/evaluate.md): "documented" is the run's variant, not
    # the check (a 1-node osu_latency where only the 2-node one is documented was
    # unjudged here, and every healthy node of a sweep "failed" with it).
    verdict = evaluation.run_verdict(rows, broken=not passed and not unjudged and not skipped,
                                     unjudged=unjudged, documented=bool(figures))
    ok = verdict in (RunVerdict.PASS, RunVerdict.RECORDED)
    if unjudged and not judge.first_failure(rows):
        reason = unjudged
    return Result(
        check=check, shape=shape.name, params=params, rows=rows, verdict=verdict,
        # a skip's reason is the check's own record (checks/base.py, skip_reason)
        reason=(case.get("skip_reason") or None) if skipped else reason,
        skipped=skipped,
        disagreements=[] if ok == passed or skipped else
        [f"ReFrame says {case.result!r}, re-judged: {reason}"],
        origin=case.at,
        name=name,
        provenance=_provenance(provenance, shape=shape.name, hosts=case.hosts,
                               date=case.completed),
    )


def _testcase_provenance(case: runreport.TestCase) -> dict[str, Any] | None:
    found = case.kept(PROVENANCE_FILE)
    return _read_provenance(found) if found else None


def _testcase_shape(case: runreport.TestCase, provenance: dict[str, Any] | None) -> str:
    """The check's ``shape`` variable, else the shape of the ReFrame system (its name
    with '.' as '_', as ocibench.reframe.site names them), else the shape detected at
    run time, else local."""
    if case.get("shape"):
        return str(case.get("shape"))
    system = str(case.get("system", ""))
    known = next((s for s in shapes.known_shapes() if s.replace(".", "_") == system), None)
    return known or (provenance or {}).get("shape") or shapes.LOCAL


def _provenance(raw: dict[str, Any] | None, **known: Any) -> dict[str, Any]:
    """The provenance fields the report shows: those recorded at run time, completed
    with what the run report knows (the job's nodes, its completion time)."""
    raw = raw if isinstance(raw, dict) else {}
    merged = {name: raw.get(name) for name in PROVENANCE_FIELDS}
    if not merged["toolkit"]:
        merged["toolkit"] = next((f"{name} {raw[name]}" for name in _TOOLKIT_FIELDS
                                  if raw.get(name)), None)
    for name, value in known.items():
        if value and not merged.get(name):
            merged[name] = value
    if raw.get("hostname") and not merged["hosts"]:
        merged["hosts"] = [raw["hostname"]]
    merged["recorded"] = bool(raw)
    return merged


# --- Input format checks -------------------------------------------------------------
# Every field the report reads is checked for its type before anything is judged,
# plotted or written (a ReFrame run report's by ocibench.reframe.runreport, the others'
# here, both with ocibench.jsonfile's field checks): a wrong one is an InputError naming
# the file and the field (as a path into the JSON document: rows[0].measured), never a
# traceback from the plots or the page.  These checks say nothing about whether a
# value is right: the values are judged again from the shape files.

#: Provenance fields that are text, and those that are lists of text (ocibench.node.provenance).
_PROVENANCE_TEXT = ("shape", "hostname", "date", "mpi", "ucx", "nccl", "toolkit", "driver",
                    "image", *_TOOLKIT_FIELDS)
_PROVENANCE_LISTS = ("hosts", "modules")


def check_evaluation(path: Path, data: dict[str, Any]) -> None:
    """An ``ocibench evaluate --json`` output with every field of the right type."""
    _known_check(path, data["check"])
    jsonfile.optional_text(path, "shape", data.get("shape"))
    params = data.get("params")
    params = jsonfile.mapping(path, "params", {} if params is None else params)
    for name, value in params.items():
        if value is not None and not isinstance(value, (str, bool)):
            jsonfile.number(path, f"params.{name}", value)
    if data.get("ok") is not None and not isinstance(data["ok"], bool):
        raise InputError(f"{path}: ok: {data['ok']!r} is not true or false")
    jsonfile.optional_text(path, "reason", data.get("reason"))
    jsonfile.optional_text(path, "sanity", data.get("sanity"))
    jsonfile.text_list(path, "notes", data.get("notes"))
    jsonfile.optional_text(path, "file", data.get("file"))
    for index, row in enumerate(jsonfile.sequence(path, "rows", data["rows"])):
        evaluation_row(path, f"rows[{index}]", row)
    for field in ("absent", "present"):
        for name, detail in jsonfile.mapping(path, field, data.get(field) or {}).items():
            jsonfile.text(path, f"{field}.{name}", detail)
    for index, table in enumerate(jsonfile.sequence(path, "ucx_protocols",
                                            data.get("ucx_protocols") or [])):
        ucx_table(path, f"ucx_protocols[{index}]", table)


def ucx_table(path: Path, where: str, table: Any) -> None:
    """A UCX protocol table as ``ocibench evaluate --json`` keeps it (ucx_proto.Table)."""
    table = jsonfile.mapping(path, where, table)
    for name in ("process", "endpoint", "selection"):
        jsonfile.text(path, f"{where}.{name}", table.get(name))
    for index, route in enumerate(jsonfile.sequence(path, f"{where}.routes", table.get("routes"))):
        at = f"{where}.routes[{index}]"
        route = jsonfile.mapping(path, at, route)
        jsonfile.number(path, f"{at}.low", route.get("low"))
        if route.get("high") is not None:
            jsonfile.number(path, f"{at}.high", route.get("high"))
        jsonfile.text(path, f"{at}.protocol", route.get("protocol"))
        jsonfile.text_list(path, f"{at}.lanes", route.get("lanes"))


def evaluation_row(path: Path, where: str, row: Any) -> dict[str, Any]:
    """A row of ``ocibench evaluate --json`` (ocibench.figures.evaluate.Row.to_dict), checked."""
    row = jsonfile.mapping(path, where, row)
    for name in ("key", "metric", "measured", "unit", "verdict"):
        if name not in row:
            raise InputError(f"{path}: {where}.{name}: missing")
    key = row["key"]
    if not (isinstance(key, str) and key.strip()) and \
            not (isinstance(key, int) and not isinstance(key, bool) and key >= 0):
        raise InputError(f"{path}: {where}.key: {key!r} is neither a message size nor a name")
    jsonfile.choice(path, f"{where}.metric", row["metric"], metrics.METRICS)
    jsonfile.number(path, f"{where}.measured", row["measured"])
    jsonfile.choice(path, f"{where}.unit", row["unit"], metrics.UNITS)
    jsonfile.choice(path, f"{where}.verdict", row["verdict"], [v.value for v in metrics.VERDICTS])
    for name in ("reference", "lower", "upper", "limit_fraction"):
        if row.get(name) is not None:
            jsonfile.number(path, f"{where}.{name}", row[name])
    for name in ("source", "figure", "limit"):
        jsonfile.optional_text(path, f"{where}.{name}", row.get(name))
    return row


def check_provenance(path: Path, data: Any) -> dict[str, Any]:
    """A provenance.json (ocibench.node.provenance) with every field of the right type."""
    data = jsonfile.mapping(path, "provenance", data)
    for name in _PROVENANCE_TEXT:
        jsonfile.optional_text(path, name, data.get(name))
    for name in _PROVENANCE_LISTS:
        jsonfile.text_list(path, name, data.get(name))
    for index, spec in enumerate(jsonfile.sequence(path, "specs", data.get("specs") or [])):
        spec = jsonfile.mapping(path, f"specs[{index}]", spec)
        for name in ("spec", "module"):
            jsonfile.optional_text(path, f"specs[{index}].{name}", spec.get(name))
    return data
