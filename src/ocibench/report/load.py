"""Read the report's inputs: ReFrame JSON run reports and ``ocibench evaluate --json`` files.

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
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from ocibench import accelerators, benchmarks, jsonfile, metrics, shapes
from ocibench.figures import evaluate as evaluation
from ocibench.figures import judge, outputs, references, ucx_proto
from ocibench.metrics import RunVerdict
from ocibench.node import preflight
from ocibench.report.model import FAMILIES, Result, Row

PROVENANCE_FILE = "provenance.json"
#: What the preflight check keeps (checks/preflight.py): the node's capabilities, which
#: name the cause of a missed figure of the same system and partition.
PREFLIGHT_FILE = "preflight.json"

#: What the report shows of a result's provenance; every key is present, None if unknown.
PROVENANCE_FIELDS = ("shape", "hosts", "date", "specs", "modules",
                     "mpi", "ucx", "nccl", "toolkit", "driver")
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
    if isinstance(data, dict) and "runs" in data and "session_info" in data:
        check_run_report(path, data)
        return _reframe_results(path, data)
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
    return check_provenance(path, _read_json(path))


def _known_check(path: Path, check: Any) -> str:
    if not isinstance(check, str) or check not in FAMILIES:
        raise InputError(f"{path}: unknown check {check!r}; known: {', '.join(FAMILIES)}")
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


def _reframe_results(path: Path, report: dict[str, Any]) -> list[Result]:
    latest: dict[tuple[str, ...], dict[str, Any]] = {}  # a retried case: its last run
    absent: dict[tuple[str, str], judge.Facts] = {}
    for run in report["runs"]:
        for case in run.get("testcases", []):
            if "check_name" in case_variables(case):
                ident = tuple(str(case.get(k)) for k in ("name", "system", "partition", "environ"))
                latest[ident] = case
            elif case.get("name") == "preflight":
                found = _preflight_absent(path, case)
                if found is not None:
                    absent[(str(case.get("system")), str(case.get("partition")))] = found
    return [_testcase_result(path, case, absent.get(
                (str(case.get("system")), str(case.get("partition")))))
            for case in latest.values()]


def _preflight_absent(path: Path, case: dict[str, Any]) -> judge.Facts | None:
    """What the preflight check of a run found, present and missing, from the
    preflight.json it kept; None where it kept none."""
    for directory in (case.get("outputdir"), case.get("stagedir")):
        found = Path(directory) / PREFLIGHT_FILE if directory else None
        if found and found.is_file():
            try:
                return judge.Facts.from_preflight(preflight.read_report(found))
            except ValueError as err:
                raise InputError(str(err)) from None
    return None


def _testcase_tables(case: dict[str, Any]) -> tuple[ucx_proto.Table, ...]:
    """The UCX protocol tables in a test case's kept output (UCX_PROTO_INFO=y)."""
    for directory in (case.get("outputdir"), case.get("stagedir")):
        texts = []
        for name in (case.get("job_stderr"), case.get("job_stdout")):
            file = Path(directory) / name if directory and name else None
            if file and file.is_file():
                with open(file, "rb") as stream:
                    try:
                        texts.append(outputs.read_output(stream, str(file)))
                    except outputs.OutputTooLarge as err:
                        raise InputError(str(err)) from err
        if texts:
            return tuple(ucx_proto.parse("\n".join(texts)))
    return ()


def case_variables(case: dict[str, Any]) -> dict[str, Any]:
    """The check's variables and parameters: the run reports this module reads
    (REFRAME_DATA_VERSIONS) write them into the test case itself."""
    return case


def _testcase_result(path: Path, case: dict[str, Any],
                     absent: judge.Facts | None = None) -> Result:
    variables = case_variables(case)
    check = _known_check(path, variables["check_name"])
    name = case.get("display_name") or case["name"]
    provenance = _testcase_provenance(case)
    shape = shape_of(_testcase_shape(variables, provenance))
    perfvalues = case.get("perfvalues") or {}
    given = {p.name: variables[p.name] for p in benchmarks.spec(check).params
             if variables.get(p.name) not in (None, "", 0)}
    try:
        params = benchmarks.resolve(check, given)
    except benchmarks.ParamError as err:
        if perfvalues:
            raise InputError(f"{path}: {name}: {err}") from err
        params = given  # the case stopped before its parameters were complete
    figures = references.matching(shape, check, params)
    node = absent or judge.Facts()
    facts = judge.Facts(absent=node.absent, present=node.present,
                        tables=_testcase_tables(case)).for_run(check, params)
    rows: list[Row] = []
    for target, entry in perfvalues.items():
        # [value, reference, lower, upper, unit, result]; only value and unit are used:
        # the value is judged again, with its figure's source, floor and limit.
        where = f"{name}: perfvalues[{target!r}]"
        value, unit = perfvalue(path, where, entry)
        metric, _, key = target.rsplit(":", 1)[-1].partition("_")
        if metric in metrics.METRICS and key:  # not the bare functions a failed case lists
            metric, unit = _metric_unit(path, where, metric, unit)
            rows.append(judge.judge(shape, figures, metric, _key(key), value, unit, facts))
    skipped = case.get("result") == "skip"
    passed = case.get("result") == "pass"
    # A missed figure: its line as judged here, whose cause also draws on the run's
    # preflight (which the live check cannot see); any other failure: ReFrame's.
    reason = judge.first_failure(rows) or case.get("fail_reason") or None
    # The live check fails a run it could not judge with "could not judge: <why>"
    # (metrics.could_not_judge): that is UNJUDGED here, never the node's failure.
    unjudged = metrics.unjudged_in(case.get("fail_reason"))
    verdict = evaluation.run_verdict(rows, broken=not passed and not unjudged and not skipped,
                                     unjudged=unjudged,
                                     documented=evaluation.documents(shape, check))
    ok = verdict in (RunVerdict.PASS, RunVerdict.RECORDED)
    if unjudged and not judge.first_failure(rows):
        reason = unjudged
    return Result(
        check=check, shape=shape.name, params=params, rows=rows, verdict=verdict,
        # a skip's reason is the check's own record (checks/base.py, skip_reason)
        reason=(variables.get("skip_reason") or None) if skipped else reason,
        skipped=skipped,
        disagreements=[] if ok == passed or skipped else
        [f"ReFrame says {case.get('result')!r}, re-judged: {reason}"],
        origin=f"{path} [{case.get('system')}:{case.get('partition')}+{case.get('environ')}]",
        name=name,
        provenance=_provenance(provenance, shape=shape.name, hosts=case.get("job_nodelist"),
                               date=case.get("job_completion_time")),
    )


def _testcase_provenance(case: dict[str, Any]) -> dict[str, Any] | None:
    for directory in (case.get("outputdir"), case.get("stagedir")):
        if directory and (Path(directory) / PROVENANCE_FILE).is_file():
            return _read_provenance(Path(directory) / PROVENANCE_FILE)
    return None


def _testcase_shape(variables: dict[str, Any], provenance: dict[str, Any] | None) -> str:
    """The check's ``shape`` variable, else the shape of the ReFrame system (its name
    with '.' as '_', as ocibench.reframe.site names them), else the shape detected at
    run time, else local."""
    if variables.get("shape"):
        return str(variables["shape"])
    system = str(variables.get("system", ""))
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
# Every field the report reads is checked for its type here, before anything is judged,
# plotted or written: a wrong one is an InputError naming the file and the field (as a
# path into the JSON document: rows[0].measured), never a traceback from the plots or
# the page.  These checks say nothing about whether a value is right: the values are
# judged again from the shape files.

#: ``session_info.data_version`` of the ReFrame JSON run reports this reader knows
#: (DATA_VERSION in ReFrame's reframe/frontend/reporting): 4.0 is ReFrame 4.7, 4.1 is
#: 4.8, 4.2 is 4.9 and 4.10.  All three write a test's variables into the test case and
#: its performance as ``perfvalues``: {target: [value, reference, lower, upper, unit,
#: (result, from 4.1)]}.  The 3.x reports of ReFrame 4.0 to 4.6 keep variables under
#: check_vars and performance as a perfvars list, and say "success" where 4.x says
#: "pass": read as these, every one of their results would be "not passed".
REFRAME_DATA_VERSIONS = ("4.0", "4.1", "4.2")

#: Provenance fields that are text, and those that are lists of text (ocibench.node.provenance).
_PROVENANCE_TEXT = ("shape", "hostname", "date", "mpi", "ucx", "nccl", "toolkit", "driver",
                    *_TOOLKIT_FIELDS)
_PROVENANCE_LISTS = ("hosts", "modules")


def check_run_report(path: Path, report: dict[str, Any]) -> None:
    """A ReFrame run report of a known format, whose benchmark test cases (those with
    ``check_name``) have every field the report reads of the right type."""
    session = _mapping(path, "session_info", report["session_info"])
    version = session.get("data_version")
    if version not in REFRAME_DATA_VERSIONS:
        raise InputError(
            f"{path}: session_info.data_version {version!r}: a ReFrame run report format "
            f"this report cannot read; it reads {', '.join(REFRAME_DATA_VERSIONS)} "
            "(ReFrame 4.7 to 4.10)")
    for r, run in enumerate(_sequence(path, "runs", report["runs"])):
        where = f"runs[{r}]"
        run = _mapping(path, where, run)
        for c, case in enumerate(_sequence(path, f"{where}.testcases", run.get("testcases", []))):
            case = _mapping(path, f"{where}.testcases[{c}]", case)
            if "check_name" in case_variables(case):
                _check_testcase(path, f"{where}.testcases[{c}]", case)


def _check_testcase(path: Path, where: str, case: dict[str, Any]) -> None:
    _known_check(path, case["check_name"])
    _text(path, f"{where}.name", case.get("name"))
    for name in ("result", "display_name", "fail_reason", "system", "partition", "environ",
                 "outputdir", "stagedir", "job_completion_time", "shape", "skip_reason",
                 "job_stdout", "job_stderr"):
        _optional_text(path, f"{where}.{name}", case.get(name))
    _text_list(path, f"{where}.job_nodelist", case.get("job_nodelist"))
    perfvalues = case.get("perfvalues")
    perfvalues = _mapping(path, f"{where}.perfvalues", {} if perfvalues is None else perfvalues)
    for target, entry in perfvalues.items():
        perfvalue(path, f"{where}.perfvalues[{target!r}]", entry)


def perfvalue(path: Path, where: str, entry: Any) -> tuple[float | None, str]:
    """(value, unit) of a ReFrame performance value; the value is None where the test
    failed before measuring it (ReFrame writes null)."""
    entry = _sequence(path, where, entry)
    if len(entry) < 5:
        raise InputError(f"{path}: {where}: {entry!r} is not "
                         "[value, reference, lower, upper, unit, ...]")
    value = None if entry[0] is None else _number(path, f"{where}[0]", entry[0])
    return value, _choice(path, f"{where}[4]", entry[4], metrics.UNITS)


def check_evaluation(path: Path, data: dict[str, Any]) -> None:
    """An ``ocibench evaluate --json`` output with every field of the right type."""
    _known_check(path, data["check"])
    _optional_text(path, "shape", data.get("shape"))
    params = data.get("params")
    params = _mapping(path, "params", {} if params is None else params)
    for name, value in params.items():
        if value is not None and not isinstance(value, (str, bool)):
            _number(path, f"params.{name}", value)
    if data.get("ok") is not None and not isinstance(data["ok"], bool):
        raise InputError(f"{path}: ok: {data['ok']!r} is not true or false")
    _optional_text(path, "reason", data.get("reason"))
    _optional_text(path, "sanity", data.get("sanity"))
    _text_list(path, "notes", data.get("notes"))
    _optional_text(path, "file", data.get("file"))
    for index, row in enumerate(_sequence(path, "rows", data["rows"])):
        evaluation_row(path, f"rows[{index}]", row)
    for field in ("absent", "present"):
        for name, detail in _mapping(path, field, data.get(field) or {}).items():
            _text(path, f"{field}.{name}", detail)
    for index, table in enumerate(_sequence(path, "ucx_protocols",
                                            data.get("ucx_protocols") or [])):
        ucx_table(path, f"ucx_protocols[{index}]", table)


def ucx_table(path: Path, where: str, table: Any) -> None:
    """A UCX protocol table as ``ocibench evaluate --json`` keeps it (ucx_proto.Table)."""
    table = _mapping(path, where, table)
    for name in ("process", "endpoint", "selection"):
        _text(path, f"{where}.{name}", table.get(name))
    for index, route in enumerate(_sequence(path, f"{where}.routes", table.get("routes"))):
        at = f"{where}.routes[{index}]"
        route = _mapping(path, at, route)
        _number(path, f"{at}.low", route.get("low"))
        if route.get("high") is not None:
            _number(path, f"{at}.high", route.get("high"))
        _text(path, f"{at}.protocol", route.get("protocol"))
        _text_list(path, f"{at}.lanes", route.get("lanes"))


def evaluation_row(path: Path, where: str, row: Any) -> dict[str, Any]:
    """A row of ``ocibench evaluate --json`` (ocibench.figures.evaluate.Row.to_dict), checked."""
    row = _mapping(path, where, row)
    for name in ("key", "metric", "measured", "unit", "verdict"):
        if name not in row:
            raise InputError(f"{path}: {where}.{name}: missing")
    key = row["key"]
    if not (isinstance(key, str) and key.strip()) and \
            not (isinstance(key, int) and not isinstance(key, bool) and key >= 0):
        raise InputError(f"{path}: {where}.key: {key!r} is neither a message size nor a name")
    _choice(path, f"{where}.metric", row["metric"], metrics.METRICS)
    _number(path, f"{where}.measured", row["measured"])
    _choice(path, f"{where}.unit", row["unit"], metrics.UNITS)
    _choice(path, f"{where}.verdict", row["verdict"], [v.value for v in metrics.VERDICTS])
    for name in ("reference", "lower", "upper", "limit_fraction"):
        if row.get(name) is not None:
            _number(path, f"{where}.{name}", row[name])
    for name in ("source", "figure", "limit"):
        _optional_text(path, f"{where}.{name}", row.get(name))
    return row


def check_provenance(path: Path, data: Any) -> dict[str, Any]:
    """A provenance.json (ocibench.node.provenance) with every field of the right type."""
    data = _mapping(path, "provenance", data)
    for name in _PROVENANCE_TEXT:
        _optional_text(path, name, data.get(name))
    for name in _PROVENANCE_LISTS:
        _text_list(path, name, data.get(name))
    for index, spec in enumerate(_sequence(path, "specs", data.get("specs") or [])):
        spec = _mapping(path, f"specs[{index}]", spec)
        for name in ("spec", "module"):
            _optional_text(path, f"specs[{index}].{name}", spec.get(name))
    return data


def _number(path: Path, where: str, value: Any) -> float:
    """A finite number: NaN, infinities, booleans and strings are input errors."""
    if not metrics.is_number(value):
        raise InputError(f"{path}: {where}: {value!r} is not a finite number")
    return float(value)


def _text(path: Path, where: str, value: Any) -> str:
    if not isinstance(value, str):
        raise InputError(f"{path}: {where}: {value!r} is not a string")
    return value


def _optional_text(path: Path, where: str, value: Any) -> str | None:
    return None if value is None else _text(path, where, value)


def _text_list(path: Path, where: str, value: Any) -> list[str]:
    """A list of strings, or nothing (None)."""
    items = _sequence(path, where, value if value is not None else [])
    return [_text(path, f"{where}[{index}]", item) for index, item in enumerate(items)]


def _choice(path: Path, where: str, value: Any, choices: Iterable[str]) -> str:
    choices = list(choices)
    if not isinstance(value, str) or value not in choices:
        raise InputError(f"{path}: {where}: {value!r} is not one of {', '.join(choices)}")
    return value


def _mapping(path: Path, where: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError(f"{path}: {where}: {_json_type(value)} where an object is expected")
    return value


def _sequence(path: Path, where: str, value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise InputError(f"{path}: {where}: {_json_type(value)} where a list is expected")
    return value


def _json_type(value: Any) -> str:
    """How JSON calls the value's type, with the value where it is short."""
    kind = {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), "a number")
    text = json.dumps(value)
    return f"{kind} ({text})" if kind != "null" and len(text) <= 40 else kind
