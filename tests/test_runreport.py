"""ocibench.reframe.runreport, the one reader of ReFrame's run reports, on the report of
a real ReFrame run: a benchmark case that fails once and passes on its retry, a case
that is no benchmark, and a case ReFrame skips."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ocibench import paths
from ocibench.reframe import runreport

#: Shaped like the project's checks (checks/base.py): check_name and the benchmark's
#: parameters as variables, performance variables <metric>_<key>, a kept file.
CHECKS = '''
import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_after, sanity_function, variable

MARKER = %(marker)r


@rfm.simple_test
class flaky_bw(rfm.RunOnlyRegressionTest):
    """osu_bw that fails its first run and passes its retry."""
    check_name = variable(str, value="osu_bw")
    buffers = variable(str, value="H-H")
    nodes = variable(int, value=2)
    sizes = variable(str, value="")
    valid_systems = ["*"]
    valid_prog_environs = ["*"]
    executable = "sh"
    executable_opts = ["-c", f"'if [ -e {MARKER} ]; then echo 8 1234.5; "
                             f"else touch {MARKER}; fi; echo kept > kept.txt'"]
    keep_files = ["kept.txt"]

    @run_after("init")
    def measure(self):
        self.perf_variables = {"bandwidth_8": sn.make_performance_function(
            sn.extractsingle(r"^8 (\\S+)$", self.stdout, 1, float), "MB/s")}

    @sanity_function
    def complete(self):
        return sn.assert_found(r"^8 ", self.stdout)


@rfm.simple_test
class helper(rfm.RunOnlyRegressionTest):
    """No benchmark: no check_name."""
    valid_systems = ["*"]
    valid_prog_environs = ["*"]
    executable = "true"

    @sanity_function
    def complete(self):
        return True


@rfm.simple_test
class skipped_lat(rfm.RunOnlyRegressionTest):
    check_name = variable(str, value="osu_latency")
    skip_reason = variable(str, value="no GPU here")
    valid_systems = ["*"]
    valid_prog_environs = ["*"]
    executable = "true"

    @run_after("setup")
    def skip_it(self):
        self.skip(self.skip_reason)

    @sanity_function
    def complete(self):
        return True
'''


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    """The run report of a real ReFrame run of CHECKS with one retry."""
    exe = shutil.which("reframe")
    if not exe:
        pytest.skip("reframe is not installed (pip install 'ocibench[test]')")
    work = tmp_path_factory.mktemp("runreport")
    (work / "checks.py").write_text(CHECKS % {"marker": str(work / "marker")})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(paths.REPO_ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    report = work / "run-report.json"
    done = subprocess.run(
        [exe, "-c", str(work / "checks.py"), "-r", "--max-retries=1",
         "--prefix", str(work / "rfm"), "--report-file", str(report)],
        cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return report


def test_a_real_report_read(report):
    read = runreport.read(report)
    raw = json.loads(report.read_text())
    assert len(raw["runs"]) == 2           # the first pass and the retry
    assert len(read.cases) == sum(len(r["testcases"]) for r in raw["runs"])
    benchmarks = {case.check: case for case in read.benchmarks()}
    # the helper has no check_name; the flaky case once, as its retry ran
    assert sorted(benchmarks) == ["osu_bw", "osu_latency"]
    bw = benchmarks["osu_bw"]
    assert bw.passed and not bw.skipped and bw.where == "runs[1].testcases[0]"
    assert [(p.metric, p.key, p.value, p.unit) for p in bw.perf()] == \
        [("bandwidth", "8", 1234.5, "MB/s")]
    assert bw.given_params() == {"buffers": "H-H", "nodes": 2}   # sizes left empty
    assert bw.kept("kept.txt").read_text() == "kept\n"
    assert bw.kept("absent.txt") is None
    assert [p.name for p in bw.job_outputs()] == ["rfm_job.err", "rfm_job.out"]
    assert bw.completed and bw.hosts
    assert bw.at.startswith(f"{report} [generic:default+")
    lat = benchmarks["osu_latency"]
    assert lat.skipped and lat.get("skip_reason") == "no GPU here" and lat.perf() == []


def test_the_first_pass_of_a_retried_case_is_the_failed_one(report):
    first = [c for c in runreport.read(report).cases
             if c.check == "osu_bw" and c.where.startswith("runs[0]")]
    assert [c.result for c in first] == ["fail"]
    assert [p.value for p in first[0].perf()] in ([], [None])


def _with(report: Path, tmp_path: Path, change) -> Path:
    data = json.loads(report.read_text())
    change(data)
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(data))
    return changed


def _first_bw(data):
    return next(c for c in data["runs"][0]["testcases"] if c.get("check_name") == "osu_bw")


@pytest.mark.parametrize("change, message", [
    (lambda d: d["session_info"].update(data_version="3.1"),
     "session_info.data_version '3.1': a ReFrame run report format this report cannot "
     "read; it reads 4.0, 4.1, 4.2 (ReFrame 4.7 to 4.10)"),
    (lambda d: d.update(runs={}), "runs: an object ({}) where a list is expected"),
    (lambda d: _first_bw(d).update(check_name="hpl"),
     "runs[0].testcases[0].check_name: unknown check 'hpl'; known: "),
    (lambda d: _first_bw(d).update(job_nodelist="node1"),
     "runs[0].testcases[0].job_nodelist: a string (\"node1\") where a list is expected"),
    (lambda d: _first_bw(d).update(perfvalues={"p:e:bandwidth_8": [1, 0, None, None, "MiB"]}),
     "runs[0].testcases[0].perfvalues['p:e:bandwidth_8'][4]: 'MiB' is not one of "),
    (lambda d: _first_bw(d).update(perfvalues={"p:e:bandwidth_8": [1, 0]}),
     "runs[0].testcases[0].perfvalues['p:e:bandwidth_8']: [1, 0] is not [value, "),
])
def test_a_report_it_cannot_read_is_one_line_naming_the_field(report, tmp_path, change,
                                                              message):
    changed = _with(report, tmp_path, change)
    with pytest.raises(runreport.RunReportError) as caught:
        runreport.read(changed)
    assert str(caught.value).startswith(f"{changed}: {message}")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("content, message", [
    ("{", "not JSON"),
    ('{"check": "osu_bw", "rows": []}', "not a ReFrame run report"),
])
def test_what_is_no_run_report_is_refused(tmp_path, content, message):
    path = tmp_path / "input.json"
    path.write_text(content)
    with pytest.raises(runreport.RunReportError, match=message):
        runreport.read(path)
