"""ReFrame's JSON run reports, read in one place.

Every reader of a run report goes through here: the run model (:mod:`ocibench.results.load`),
the sweep (:mod:`ocibench.sweep.rfm`), the results history and
``scripts/device/summarize.py``.  This module says what a report holds and checks the
type of every field those readers use; it judges nothing (the figures layer does).

Format facts (ReFrame's ``reframe/frontend/reporting/__init__.py``, ``DATA_VERSION``
and ``RunReport``; ``reframe/schemas/runreport.json``):

* ``session_info.data_version`` 4.0 is ReFrame 4.7, 4.1 is 4.8, 4.2 is 4.9 and 4.10.
  All three write a test's variables and parameters into the test case itself, and its
  performance as ``perfvalues``: ``{"<partition>:<environ>:<variable>": [value,
  reference, lower, upper, unit, (result, from 4.1)]}``, the value null where the test
  failed before measuring it.  The 3.x reports of ReFrame 4.0 to 4.6 keep variables
  under ``check_vars`` and performance as a ``perfvars`` list, and say "success" where
  4.x says "pass": read as these, every one of their results would be "not passed".
* ``runs`` is one entry per ReFrame pass (``--max-retries`` adds one per retry), each
  with its ``testcases``; a retried case appears in each pass it ran in.
* A test case's ``outputdir`` holds its ``keep_files`` and job outputs once it passed;
  its ``stagedir`` is left in place only when it failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ocibench import benchmarks, hostnames, jsonfile, metrics

#: ``session_info.data_version`` of the run reports this reader knows.
DATA_VERSIONS = ("4.0", "4.1", "4.2")

#: The key of ReFrame's session extras (--session-extras, ReFrame 4.7+, kept in
#: ``session_info``) that names the sweep's history session: the sweep writes it
#: (ocibench.sweep.rfm), and ``ocibench history add`` of a step's run report keeps its
#: figures under the sweep's session, not a second one (ocibench.history.runs).
SESSION_EXTRA = "ocibench_session"

#: The test-case fields read as text (or null), besides ``name``.
_TEXT_FIELDS = ("result", "display_name", "fail_reason", "fail_phase", "system",
                "partition", "environ", "outputdir", "stagedir", "job_completion_time",
                "shape", "skip_reason", "job_stdout", "job_stderr")


class RunReportError(jsonfile.JsonFileError):
    """A run report that cannot be read; the message is one line naming the file and
    the field (as a path into the JSON document: runs[0].testcases[2].name)."""


def is_run_report(data: Any) -> bool:
    """Whether a JSON document has the shape of a ReFrame run report at all."""
    return isinstance(data, dict) and "runs" in data and "session_info" in data


@dataclass(frozen=True)
class Perf:
    """One performance value of a benchmark test case, as the checks name it
    (checks/base.py: ``<metric>_<key>``, the key a message size's digits, a STREAM
    kernel or an nccl-tests column)."""

    target: str
    metric: str
    key: str
    value: float | None   # None: the test failed before measuring it
    unit: str
    where: str            # e.g. runs[0].testcases[1].perfvalues['sys:p:env:latency_8']


@dataclass(frozen=True)
class TestCase:
    """One test case of one pass; ``raw`` is ReFrame's record, whose benchmark fields
    (for a case with ``check_name``) are checked."""

    __test__ = False   # not a pytest class

    path: Path
    where: str
    raw: dict[str, Any]

    def get(self, name: str, default: Any = None) -> Any:
        """A field of the record: ReFrame's own, or one of the check's variables and
        parameters (written into the test case by these formats)."""
        return self.raw.get(name, default)

    @property
    def check(self) -> str | None:
        """The benchmark's name (the check's ``check_name``); None for other cases
        (build fixtures, the preflight)."""
        return self.raw.get("check_name")

    @property
    def name(self) -> str:
        return self.raw.get("display_name") or self.raw["name"]

    @property
    def ident(self) -> tuple[str, ...]:
        """What tells a case apart from the others of a report; the same in each pass."""
        return tuple(str(self.raw.get(k)) for k in ("name", "system", "partition", "environ"))

    @property
    def at(self) -> str:
        """The case where a reader says so: ``<report> [<system>:<partition>+<environ>]``."""
        return (f"{self.path} [{self.raw.get('system')}:{self.raw.get('partition')}"
                f"+{self.raw.get('environ')}]")

    @property
    def result(self) -> str | None:
        """ReFrame's own result: "pass", "fail", "skip" (or "abort")."""
        return self.raw.get("result")

    @property
    def passed(self) -> bool:
        return self.result == "pass"

    @property
    def skipped(self) -> bool:
        return self.result == "skip"

    @property
    def hosts(self) -> list[str]:
        return list(self.raw.get("job_nodelist") or [])

    @property
    def completed(self) -> str | None:
        return self.raw.get("job_completion_time") or None

    def given_params(self) -> dict[str, Any]:
        """The check's parameters this case set (ocibench.benchmarks names them); those
        left at ReFrame's empty default are left out."""
        if self.check not in benchmarks.CHECKS:
            return {}
        return {p.name: self.raw[p.name] for p in benchmarks.spec(self.check).params
                if self.raw.get(p.name) not in (None, "", 0)}

    def perf(self) -> list[Perf]:
        """The case's measured values, in report order; the bare performance functions a
        failed case lists (no ``<metric>_<key>``) are left out."""
        found = []
        for target, entry in (self.raw.get("perfvalues") or {}).items():
            where = f"{self.where}.perfvalues[{target!r}]"
            value, unit = perfvalue(self.path, where, entry)
            metric, _, key = target.rsplit(":", 1)[-1].partition("_")
            if metric in metrics.METRICS and key:
                found.append(Perf(target, metric, key, value, unit, where))
        return found

    def kept(self, name: str | None) -> Path | None:
        """A file the case kept, in its output directory, else its stage directory."""
        for directory in (self.raw.get("outputdir"), self.raw.get("stagedir")):
            found = Path(directory) / name if directory and name else None
            if found and found.is_file():
                return found
        return None

    def job_outputs(self) -> list[Path]:
        """The job's stderr and stdout, from the first directory that kept either."""
        for directory in (self.raw.get("outputdir"), self.raw.get("stagedir")):
            files = [Path(directory) / n for n in (self.raw.get("job_stderr"),
                                                   self.raw.get("job_stdout"))
                     if directory and n and (Path(directory) / n).is_file()]
            if files:
                return files
        return []


@dataclass(frozen=True)
class RunReport:
    """A checked run report: every benchmark case's fields have the types read here."""

    path: Path
    data: dict[str, Any]

    @property
    def cases(self) -> list[TestCase]:
        """Every test case of every pass, in report order."""
        return [TestCase(self.path, f"runs[{r}].testcases[{c}]", case)
                for r, run in enumerate(self.data["runs"])
                for c, case in enumerate(run.get("testcases", []))]

    def benchmarks(self) -> list[TestCase]:
        """The benchmark cases (with ``check_name``); of a retried case, its last run."""
        latest: dict[tuple[str, ...], TestCase] = {}
        for case in self.cases:
            if case.check is not None:
                latest[case.ident] = case
        return list(latest.values())


def read(path: Path) -> RunReport:
    """The run report at ``path``, bounded in size and depth (ocibench.jsonfile) and
    checked; raises RunReportError."""
    try:
        data = jsonfile.load(path)
    except jsonfile.JsonFileError as err:
        raise RunReportError(str(err)) from None
    if not is_run_report(data):
        raise RunReportError(f"{path}: not a ReFrame run report (no runs and session_info)")
    return checked(path, data)


def checked(path: Path, data: dict[str, Any]) -> RunReport:
    """A run report already parsed, of a known format, whose benchmark test cases have
    every field the readers use of the right type; raises RunReportError."""
    try:
        session = jsonfile.mapping(path, "session_info", data["session_info"])
        version = session.get("data_version")
        if version not in DATA_VERSIONS:
            raise RunReportError(
                f"{path}: session_info.data_version {version!r}: a ReFrame run report "
                f"format this report cannot read; it reads {', '.join(DATA_VERSIONS)} "
                "(ReFrame 4.7 to 4.10)")
        for r, run in enumerate(jsonfile.sequence(path, "runs", data["runs"])):
            where = f"runs[{r}]"
            run = jsonfile.mapping(path, where, run)
            cases = jsonfile.sequence(path, f"{where}.testcases", run.get("testcases", []))
            for c, case in enumerate(cases):
                case = jsonfile.mapping(path, f"{where}.testcases[{c}]", case)
                if "check_name" in case:
                    _check_benchmark(path, f"{where}.testcases[{c}]", case)
    except RunReportError:
        raise
    except jsonfile.JsonFileError as err:
        raise RunReportError(str(err)) from None
    return RunReport(path, data)


def _check_benchmark(path: Path, where: str, case: dict[str, Any]) -> None:
    check = case["check_name"]
    if not isinstance(check, str) or check not in benchmarks.CHECKS:
        raise RunReportError(f"{path}: {where}.check_name: unknown check {check!r}; "
                             f"known: {', '.join(benchmarks.CHECKS)}")
    jsonfile.text(path, f"{where}.name", case.get("name"))
    for name in _TEXT_FIELDS:
        jsonfile.optional_text(path, f"{where}.{name}", case.get(name))
    for index, host in enumerate(jsonfile.text_list(path, f"{where}.job_nodelist",
                                                    case.get("job_nodelist"))):
        if not hostnames.is_host(host):
            raise RunReportError(f"{path}: {where}.job_nodelist[{index}]: "
                                 f"{hostnames.why_not(host)}")
    perfvalues = case.get("perfvalues")
    perfvalues = jsonfile.mapping(path, f"{where}.perfvalues",
                                  {} if perfvalues is None else perfvalues)
    for target, entry in perfvalues.items():
        perfvalue(path, f"{where}.perfvalues[{target!r}]", entry)


def perfvalue(path: Path, where: str, entry: Any) -> tuple[float | None, str]:
    """(value, unit) of a ReFrame performance value; the value is None where the test
    failed before measuring it (ReFrame writes null)."""
    entry = jsonfile.sequence(path, where, entry)
    if len(entry) < 5:
        raise RunReportError(f"{path}: {where}: {entry!r} is not "
                             "[value, reference, lower, upper, unit, ...]")
    value = None if entry[0] is None else jsonfile.number(path, f"{where}[0]", entry[0])
    return value, jsonfile.choice(path, f"{where}[4]", entry[4], metrics.UNITS)
