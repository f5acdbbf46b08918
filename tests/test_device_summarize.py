"""scripts/device/summarize.py reads the device pipeline's ReFrame runs through
ocibench.reframe.runreport: the run report of a real ReFrame run whose check prints
seed 000's osu_latency D-D output, laid out as pipeline.sh lays out results/."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ocibench import paths

SEED = Path(__file__).parent / "data" / "seed_outputs" / "000_osu_latency_buffers-D-D_nodes-1.txt"

#: Named and parameterized as checks/osu.py's osu_latency (its display name is what
#: summarize.py maps to a figure); the output is the seed's.
CHECK = '''
import reframe as rfm
from reframe.core.builtins import parameter, sanity_function, variable


@rfm.simple_test
class osu_latency(rfm.RunOnlyRegressionTest):
    buffers = parameter(["D-D"])
    nodes = parameter([1])
    check_name = variable(str, value="osu_latency")
    valid_systems = ["*"]
    valid_prog_environs = ["*"]
    executable = "cat"
    executable_opts = [%(seed)r]

    @sanity_function
    def complete(self):
        return True
'''


def _summarize_module():
    path = paths.REPO_ROOT / "scripts" / "device" / "summarize.py"
    spec = importlib.util.spec_from_file_location("device_summarize", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ours_are_read_from_the_run_report(tmp_path):
    exe = shutil.which("reframe")
    if not exe:
        pytest.skip("reframe is not installed (pip install 'ocibench[test]')")
    (tmp_path / "check.py").write_text(CHECK % {"seed": str(SEED)})
    run = tmp_path / "results" / "reframe-1"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(paths.REPO_ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [exe, "-c", str(tmp_path / "check.py"), "-r", "--prefix", str(tmp_path / "rfm"),
         "-o", str(run / "output"), "--report-file", str(run / "reports" / "run-report-1.json")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = _summarize_module().summarize(tmp_path / "results")
    assert summary["runs"] == {"ours": ["reframe-1"], "hand": []}
    row = next(r for r in summary["rows"] if r["figure"] == "osu_latency D-D")
    assert row["ours"] == [2.46] and row["hand"] == []
    assert summary["notes"] == []


def test_a_report_it_cannot_read_is_a_note(tmp_path):
    reports = tmp_path / "results" / "reframe-1" / "reports"
    reports.mkdir(parents=True)
    (reports / "run-report-1.json").write_text('{"session_info": {"data_version": "3.1"}, '
                                               '"runs": []}')
    summary = _summarize_module().summarize(tmp_path / "results")
    assert len(summary["notes"]) == 1
    assert summary["notes"][0].startswith("reframe-1: ") and \
        "session_info.data_version '3.1'" in summary["notes"][0]
