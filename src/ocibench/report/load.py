"""Read the report's inputs: ReFrame JSON run reports and ``ocibench evaluate --json`` files.

A ReFrame test case is a benchmark result when it has the variable ``check_name``;
other test cases (build fixtures, for instance) are left out.  Its measured values are
its performance variables ``<metric>_<key>``; its parameters are the variables that
:mod:`ocibench.checkspec` names for its check; its provenance is the
``provenance.json`` the check kept (ReFrame copies ``keep_files`` to the output
directory; the stage directory is left in place only when a test fails).

Nothing an input says about a verdict is trusted: every measured value is judged again
by :func:`ocibench.judge.judge` against the current shape files and policy.  Where the
input's own verdict (a row's ``verdict``, an evaluation's ``ok``, ReFrame's ``pass``)
differs from that, the result keeps the re-judged one and says so in ``disagreements``.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from ocibench import checkspec, judge, metrics, references, shapes
from ocibench.report.model import FAMILIES, Result, Row

PROVENANCE_FILE = "provenance.json"

#: What the report shows of a result's provenance; every key is present, None if unknown.
PROVENANCE_FIELDS = ("shape", "hosts", "date", "specs", "modules",
                     "mpi", "ucx", "nccl", "cuda", "driver")


class InputError(ValueError):
    """An input file the report cannot use; the message is one line."""


def load(paths: list[Path], provenance: Path | None = None) -> list[Result]:
    """Every benchmark result in the inputs, in input order."""
    given = _read_json(provenance) if provenance else None
    results: list[Result] = []
    for path in paths:
        try:
            results += _results(path, _read_json(path), given)
        except (shapes.ShapeError, checkspec.ParamError) as err:
            raise InputError(f"{path}: {err}") from err
        except (KeyError, IndexError, TypeError, AttributeError) as err:
            raise InputError(f"{path}: malformed ({type(err).__name__}: {err})") from err
    if not results:
        raise InputError("no benchmark results in the inputs (no test case has check_name)")
    return results


def _results(path: Path, data: Any, provenance: dict[str, Any] | None) -> list[Result]:
    if isinstance(data, dict) and "runs" in data and "session_info" in data:
        return _reframe_results(path, data)
    if isinstance(data, dict) and "check" in data and "rows" in data:
        sidecar = path.parent / PROVENANCE_FILE
        found = provenance if provenance is not None else _optional_json(sidecar)
        return [_evaluation_result(path, data, found)]
    raise InputError(f"{path}: neither a ReFrame run report nor an "
                     "`ocibench evaluate --json` output")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except OSError as err:
        raise InputError(f"{path}: cannot read: {err.strerror}") from err
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: not JSON ({err})".replace("\n", " ")) from err


def _optional_json(path: Path) -> dict[str, Any] | None:
    return _read_json(path) if path.is_file() else None


def _known_check(path: Path, check: Any) -> str:
    if not isinstance(check, str) or check not in FAMILIES:
        raise InputError(f"{path}: unknown check {check!r}; known: {', '.join(FAMILIES)}")
    return check


def _evaluation_result(path: Path, data: dict[str, Any],
                       provenance: dict[str, Any] | None) -> Result:
    check = _known_check(path, data["check"])
    shape = shape_of(data.get("shape") or shapes.LOCAL)
    params = checkspec.resolve(check, dict(data.get("params") or {}))
    figures = references.matching(shape, check, params)
    if not isinstance(data["rows"], list):
        raise InputError(f"{path}: field 'rows' must be a list")
    rows, disagreements = [], []
    for index, raw in enumerate(data["rows"]):
        where = f"rows[{index}]"
        if not isinstance(raw, dict):
            raise InputError(f"{path}: field {where} must be a mapping")
        metric, unit = _metric(path, where, raw.get("metric"), raw.get("unit"))
        row = judge.judge(shape, figures, metric, _key(raw.get("key")),
                          _measured(path, f"{where}.measured", raw.get("measured")), unit)
        rows.append(row)
        stored = raw.get("verdict")
        if stored is not None and str(stored) != str(row.verdict):
            disagreements.append(f"{row.metric} at {row.label}: the input says "
                                 f"{stored!r}, re-judged {str(row.verdict)!r}")
    # The sanity verdict cannot be re-run without the output: an evaluation that failed
    # sanity has no rows and its reason; one that passed has rows to re-judge.
    sanity = data.get("sanity") or (None if data["rows"] else data.get("reason"))
    ok = not sanity and all(row.verdict is not judge.Verdict.FAIL for row in rows)
    if "ok" in data and bool(data["ok"]) != ok:
        disagreements.append(f"the input says ok={bool(data['ok'])}, re-judged ok={ok}")
    return Result(
        check=check, shape=shape.name, params=params, rows=rows, ok=ok,
        reason=sanity or judge.first_failure(rows),
        notes=[str(n) for n in data.get("notes") or []], disagreements=disagreements,
        origin=str(path), name=f"{check}: evaluation of {Path(str(data.get('file') or path)).name}",
        provenance=_provenance(provenance, shape=shape.name),
    )


@lru_cache(maxsize=None)
def shape_of(name: str) -> shapes.Shape:
    """A shape file, loaded once per report."""
    if not isinstance(name, str):
        raise InputError(f"shape {name!r} is not a shape name")
    return shapes.load(name)


def _metric(path: Path, where: str, metric: Any, unit: Any) -> tuple[str, str]:
    if metric not in metrics.METRICS:
        raise InputError(f"{path}: field {where}.metric: unknown metric {metric!r}; "
                         f"known: {', '.join(metrics.METRICS)}")
    units = metrics.METRICS[metric].units
    if unit not in units:
        raise InputError(f"{path}: field {where}.unit: {unit!r} is no unit of {metric} "
                         f"({', '.join(units)})")
    return metric, unit


def _key(raw: Any) -> int | str:
    """A message size as an int, a STREAM kernel or nccl column as its name."""
    text = str(raw)
    return int(text) if text.isascii() and text.isdigit() else text


def _measured(path: Path, where: str, value: Any) -> float | None:
    """A measured value as a float; None where the run recorded none.  NaN and inf are
    kept, so that the judgement fails them; anything else is a malformed input."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{path}: field {where}: {value!r} is not a number")
    return float(value)


def _reframe_results(path: Path, report: dict[str, Any]) -> list[Result]:
    latest: dict[tuple[str, ...], dict[str, Any]] = {}  # a retried case: its last run
    for run in report["runs"]:
        for case in run.get("testcases", []):
            if "check_name" in case_variables(case):
                ident = tuple(str(case.get(k)) for k in ("name", "system", "partition", "environ"))
                latest[ident] = case
    return [_testcase_result(path, case) for case in latest.values()]


def case_variables(case: dict[str, Any]) -> dict[str, Any]:
    """The check's variables and parameters: ReFrame 4.10 writes them into the test
    case itself, other 4.x releases under check_vars and check_params."""
    return {**case, **case.get("check_vars", {}), **case.get("check_params", {})}


def _testcase_result(path: Path, case: dict[str, Any]) -> Result:
    variables = case_variables(case)
    check = _known_check(path, variables["check_name"])
    name = case.get("display_name") or case["name"]
    provenance = _testcase_provenance(case)
    shape = shape_of(_testcase_shape(variables, provenance))
    perfvalues = case.get("perfvalues") or {}
    given = {p.name: variables[p.name] for p in checkspec.spec(check).params
             if variables.get(p.name) not in (None, "", 0)}
    try:
        params = checkspec.resolve(check, given)
    except checkspec.ParamError as err:
        if perfvalues:
            raise InputError(f"{path}: {name}: {err}") from err
        params = given  # the case stopped before its parameters were complete
    figures = references.matching(shape, check, params)
    rows: list[Row] = []
    for target, entry in perfvalues.items():
        # [value, reference, lower, upper, unit, result]; only value and unit are used:
        # the value is judged again, with its figure's source, floor and limit.
        where = f"{name}: perfvalues {target!r}"
        if not isinstance(entry, list) or len(entry) < 5:
            raise InputError(f"{path}: {where}: expected [value, ref, lower, upper, unit, ...]")
        metric, _, key = target.rsplit(":", 1)[-1].partition("_")
        if metric in metrics.METRICS and key:  # not the bare functions a failed case lists
            metric, unit = _metric(path, where, metric, entry[4])
            rows.append(judge.judge(shape, figures, metric, _key(key),
                                    _measured(path, where, entry[0]), unit))
    skipped = case.get("result") == "skip"
    passed = case.get("result") == "pass"
    ok = passed and all(row.verdict is not judge.Verdict.FAIL for row in rows)
    reason = case.get("fail_reason") or (None if ok else judge.first_failure(rows))
    return Result(
        check=check, shape=shape.name, params=params, rows=rows, ok=ok,
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
            return _read_json(Path(directory) / PROVENANCE_FILE)
    return None


def _testcase_shape(variables: dict[str, Any], provenance: dict[str, Any] | None) -> str:
    """The check's ``shape`` variable, else the shape of the ReFrame system (its name
    with '.' as '_', as ocibench.reframe_site names them), else the shape detected at
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
    for name, value in known.items():
        if value and not merged.get(name):
            merged[name] = value
    if raw.get("hostname") and not merged["hosts"]:
        merged["hosts"] = [raw["hostname"]]
    merged["recorded"] = bool(raw)
    return merged
