"""The sweep's ReFrame runs: the check cases of the shape, then one run per step.

* :func:`discover` runs ``reframe --dry-run`` over the selected checks: every case the
  shape lists, its node count (the check's ``nodes``, else its ``ocibench.benchmarks``
  default) and the cases ReFrame skips (no Intel MPI, no RDMA device, ...), which the
  sweep then leaves out.
* :func:`run_step` runs one case on every node group of one wave: ``-n /<hash>`` picks
  the case, ``-P sweep_nodes=a+b,c+d`` makes one test case per group, pinned to its
  nodes (checks/base.py ``SweepNodes``), and ReFrame's asynchronous execution policy
  submits them all at once.  ``max_pending_time`` bounds how long a job may wait to
  start: the groups of a wave are disjoint and idle, so a job that waits longer is on
  a node that does not start jobs.

ReFrame's run reports are read by :mod:`ocibench.reframe.runreport`; each benchmark
case's result by the report's reader (:func:`ocibench.results.load.testcase_result`),
which judges every value with :func:`ocibench.figures.judge.judge`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ocibench import benchmarks, jsonfile, metrics, paths
from ocibench.reframe import runreport
from ocibench.sweep import signals
from ocibench.sweep.plan import NODE_SEPARATOR, Case, Group, Wave
from ocibench.sweep.verdicts import JobResult


def never_started(raw: dict[str, Any]) -> str | None:
    """Why a failed test case's job never ran, or None when it ran.  A job cancelled
    while pending (ReFrame's max_pending_time, or blocked on an unavailable node) got
    no nodes: Slurm reports none (``job_nodelist`` empty), and it failed after setup.

    An empty node list alone does not prove it: a job that fails within seconds (a
    module that does not load) can leave Slurm's queue before ReFrame's next poll, and
    ReFrame then never learns its nodes (seen with the squeue scheduler under load).
    Such a job started, so Slurm created its output file in the stage directory (kept
    for failed tests); a job cancelled while pending has none."""
    if raw.get("result") in ("pass", "skip") or raw.get("job_nodelist"):
        return None
    stagedir, stdout = raw.get("stagedir"), raw.get("job_stdout")
    if stagedir and stdout and (Path(stagedir) / stdout).exists():
        return None
    if raw.get("fail_phase") in ("run", "sanity", "performance"):
        reason = " ".join((raw.get("fail_reason") or "").split())
        return f"cancelled while pending ({reason})" if reason else "cancelled while pending"
    return None


class ReframeError(RuntimeError):
    """ReFrame did not run or left no report; one line."""


def reframe_argv() -> list[str]:
    """ReFrame's command: the one beside this interpreter, else on PATH; the site
    configuration ($RFM_CONFIG_FILES, else site/reframe_config.py) and checks/."""
    beside = Path(sys.executable).parent / "reframe"
    exe = str(beside) if beside.is_file() else shutil.which("reframe")
    if not exe:
        raise ReframeError("reframe not found beside python or on PATH "
                           "(pip install -e '.[test]')")
    config = os.environ.get("RFM_CONFIG_FILES") or str(paths.SITE_DIR / "reframe_config.py")
    return [exe, "-C", config, "-c", str(paths.CHECKS_DIR)]


def _job_options(partition: str | None, reservation: str | None) -> list[str]:
    argv = []
    if partition:
        argv.append(f"--job-option=--partition={partition}")
    if reservation:
        argv.append(f"--job-option=--reservation={reservation}")
    return argv


#: ReFrame's summary line when the selection is empty (it then writes no report).
_NOTHING_RAN = "Ran 0/0 test case(s)"


#: Seconds ReFrame has to cancel its Slurm jobs and exit after a stopping signal.
STOP_TIMEOUT_S = 60


def _reframe(argv: list[str], log: Path, report: Path) -> dict[str, Any]:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        try:
            process.wait()
        except KeyboardInterrupt:
            _stop(process)
            raise
    if not report.exists() and _NOTHING_RAN in log.read_text(errors="replace"):
        return {"runs": []}
    try:
        return json.loads(report.read_text())
    except (OSError, ValueError):
        tail = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
        raise ReframeError(f"ReFrame left no run report {report} "
                           f"({tail[-1].strip() if tail else 'no output'}; see {log})") from None


def _stop(process: subprocess.Popen) -> None:
    """Stop ReFrame as it stops on SIGTERM: its runner cancels the jobs it submitted
    (reframe/frontend/executors: SIGTERM is a forced exit) before it exits.  A Ctrl-C
    at the terminal reached ReFrame already (one process group); a SIGTERM or SIGHUP
    sent to the sweep did not, and a ReFrame killed outright would leave its jobs
    running on the nodes.  Waited for with the signals held back (signals.shielded):
    a second signal must not leave ReFrame running."""
    with signals.shielded():
        if process.poll() is None:
            process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def case_nodes(case: dict[str, Any]) -> int:
    """A case's node count: its ``nodes`` variable, else its check's checkspec default."""
    nodes = case.get("nodes")
    if isinstance(nodes, int) and not isinstance(nodes, bool) and nodes >= 1:
        return nodes
    check = case.get("check_name")
    if check in benchmarks.CHECKS:
        try:
            default = benchmarks.spec(check).param("nodes").default
        except benchmarks.ParamError:
            default = None
        if default:
            return int(default)
    return 1


def _setvar_options(setvars: Sequence[str]) -> list[str]:
    return [a for v in setvars for a in ("-S", v)]


def discover(names: Sequence[str], excludes: Sequence[str], prefix: Path,
             partition: str | None, setvars: Sequence[str] = ()
             ) -> tuple[list[Case], dict[str, str]]:
    """The cases to sweep, and those ReFrame skips (name -> reason)."""
    argv = reframe_argv() + ["--dry-run", "--prefix", str(prefix / "discover"),
                             "--report-file", str(prefix / "discover.json")]
    argv += [a for n in names for a in ("-n", n)] + [a for x in excludes for a in ("-x", x)]
    argv += _job_options(partition, None) + _setvar_options(setvars)
    report = _reframe(argv, prefix / "discover.log", prefix / "discover.json")
    cases, skipped = [], {}
    # ReFrame's own dry run, just written: its cases are read, not judged
    for case in runreport.RunReport(prefix / "discover.json", report).cases:
        if case.skipped:
            skipped[case.name] = case.get("skip_reason") or "skipped by ReFrame"
            continue
        cases.append(Case(case.name, f"/{case.get('hashcode')}",
                          str(case.check or case.get("name")), case_nodes(case.raw)))
    if not cases and not skipped:
        raise ReframeError("no check matches the selection (-n/-x); "
                           f"see {prefix / 'discover.log'}")
    return cases, skipped


def run_step(number: int, wave: Wave, case: Case, prefix: Path, start_timeout: int,
             partition: str | None, reservation: str | None,
             setvars: Sequence[str] = (), session: str | None = None) -> list[JobResult]:
    """One case on every group of ``wave``; one JobResult per group.  ``setvars``:
    ReFrame's -S for the run (the sweep's own max_pending_time comes after them);
    ``session``: the sweep's history session, tagged on ReFrame's session (its run
    report's session_info, and ReFrame's results database where enabled)."""
    stem = prefix / f"step-{number:03d}"
    groups = ",".join(NODE_SEPARATOR.join(g) for g in wave.groups)
    argv = reframe_argv() + [
        "-n", case.select, "-P", f"sweep_nodes={groups}", "-r", "--exec-policy=async",
        *_setvar_options(setvars),
        "-S", f"max_pending_time={start_timeout}s", "--prefix", str(stem),
        "--report-file", f"{stem}.json"] + _job_options(partition, reservation)
    if session:
        argv.append(f"--session-extras={runreport.SESSION_EXTRA}={session}")
    report = _reframe(argv, Path(f"{stem}.log"), Path(f"{stem}.json"))
    return results(report, Path(f"{stem}.json"), wave, case)


def results(report: dict[str, Any], path: Path, wave: Wave, case: Case) -> list[JobResult]:
    """The JobResult of every group of ``wave`` from a ReFrame run report; a group the
    report does not mention never started."""
    # Here, not at the top: the reader judges every run (the figures layer), which the
    # plan (--dry-run) does not need.
    from ocibench.results.load import InputError, testcase_result

    try:
        checked = runreport.checked(path, report)
        found: dict[Group, JobResult] = {}
        for test in checked.cases:
            group = tuple(str(test.get("sweep_nodes") or "").split(NODE_SEPARATOR))
            if group not in wave.groups:
                continue
            job = JobResult(case, group, wave.kind)
            if test.skipped:
                job.skipped = test.get("skip_reason") or "skipped by ReFrame"
            elif test.check is not None:
                result = testcase_result(test)   # judges every value (judge.judge)
                job.rows = list(result.rows)
                job.params = dict(result.params)
                # ReFrame's epoch seconds of the job's end (not among the fields the
                # reader checks: read as a number or not at all)
                completed = test.get("job_completion_time_unix")
                job.time = float(completed) if metrics.is_number(completed) else None
                job.image = result.provenance["image"]
                job.driver = result.provenance["driver"]
                job.never_started = never_started(test.raw)
                if not job.never_started and result.verdict is metrics.RunVerdict.UNJUDGED:
                    # never a failure of the node: the cell says could not judge (rerun)
                    why = result.reason or "no documented figure was compared"
                    job.failed = metrics.unjudged_in(why) or metrics.could_not_judge(why)
                elif not job.never_started and not result.ok:
                    job.failed = " ".join((result.reason or "failed").split())
            elif not test.passed:   # preflight: no figures, its reason only
                job.never_started = never_started(test.raw)
                if not job.never_started:
                    job.failed = " ".join((test.get("fail_reason") or "failed").split())
            found[group] = job
    except (jsonfile.JsonFileError, InputError) as err:
        # a report ReFrame wrote that this reader cannot use: the sweep stops on one line
        raise ReframeError(str(err)) from None
    for group in wave.groups:
        found.setdefault(group, JobResult(case, group, wave.kind,
                                          never_started="ReFrame did not run it"))
    return [found[g] for g in wave.groups]
