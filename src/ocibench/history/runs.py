"""ReFrame run reports read into the history: the figures of each judged run, as
Records of the nodes it ran on (``ocibench history add``; the sweep keeps its own
through ocibench.sweep.keep).

Each run is judged by the one run reader (:func:`ocibench.results.load.testcase_result`),
never by a verdict the report stored.  A case's figures are every node's of its job: a
run outside the sweep has no ring of pairs to tell one node from its partner.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from pathlib import Path

from ocibench import benchmarks, hostnames, jsonfile, metrics, shapes
from ocibench.history import rows
from ocibench.history.store import Record
from ocibench.reframe import runreport
from ocibench.reframe.runreport import SESSION_EXTRA
from ocibench.results.load import InputError, testcase_result

#: What makes a run report unreadable, each said in one line naming the file and field.
UNREADABLE = (jsonfile.JsonFileError, InputError, shapes.ShapeError, benchmarks.ParamError)


def read(path: Path) -> tuple[list[Record], list[str]]:
    """The Records of the run report at ``path``, and the names of the cases no node
    can be told for (no job_nodelist, no provenance host).  Raises one of
    :data:`UNREADABLE`."""
    report = runreport.read(path)
    info = report.data["session_info"]
    # A sweep's step: the sweep's session (its --session-extras), whose figures the
    # sweep kept already; else ReFrame's session uuid (4.7+); else the file's content,
    # so that adding the same report twice still adds nothing.
    session = next((str(v) for v in (info.get(SESSION_EXTRA), info.get("uuid"))
                    if isinstance(v, str) and v.strip()),
                   "reframe-" + hashlib.sha256(path.read_bytes()).hexdigest()[:16])
    ended = info.get("time_end_unix")
    records, unplaced = [], []
    for case in report.benchmarks():
        result = testcase_result(case)
        if result.skipped or not result.rows:
            continue
        hosts = case.hosts or list(result.provenance.get("hosts") or [])
        if not hosts:
            unplaced.append(case.name)
            continue
        bad = next((hostnames.why_not(h) for h in hosts if hostnames.why_not(h)), None)
        if bad:   # job_nodelist is checked by the report's reader; provenance here
            raise InputError(f"{path}: {case.where}: the provenance's hosts: {bad}")
        completed = case.get("job_completion_time_unix")
        when = completed if metrics.is_number(completed) else \
            ended if metrics.is_number(ended) else _iso_time(result.provenance.get("date"))
        if when is None:
            raise InputError(f"{path}: {case.where}: no completion time "
                             "(job_completion_time_unix, session_info.time_end_unix)")
        for host in hosts:
            records += rows.records(host, result.check, result.params, result.rows,
                                    time=float(when), session=session,
                                    image=result.provenance.get("image"),
                                    driver=result.provenance.get("driver"))
    return records, unplaced


def _iso_time(text: object) -> float | None:
    try:
        when = datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()
