"""A live check judges its run once: the performance stage names a missed figure's cause
from the evaluation its sanity stage made (checks/base.py), not from a second judgement.

Counted in ReFrame's own process: a sitecustomize on PYTHONPATH wraps
``ocibench.figures.judge.judge_run`` (what judges a run's values against the shape's
figures) and logs each call.  The run is tests/test_reframe.py's missed-figure run: a
stand-in osu_bw prints a real run's output, judged against a figure the run misses.
"""

from __future__ import annotations

import os

from ocibench import paths
from test_reframe import _run_local, missed_cma_figure

_COUNTING = """
import os
if os.environ.get("JUDGE_LOG"):
    from ocibench.figures import judge
    real = judge.judge_run
    def counted(*args, **kwargs):
        with open(os.environ["JUDGE_LOG"], "a") as log:
            log.write(f"{os.getpid()}\\n")
        return real(*args, **kwargs)
    judge.judge_run = counted
"""


def test_a_live_check_judges_its_run_once(tmp_path, lmod_init, mpirun):
    modules, shapes_dir = missed_cma_figure(tmp_path)
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_COUNTING)
    log = tmp_path / "judged.log"
    python_path = os.pathsep.join(filter(None, [str(hook), str(paths.REPO_ROOT / "src"),
                                                os.environ.get("PYTHONPATH")]))
    result, cases = _run_local(tmp_path, ["osu_bw%buffers=H-H%nodes=1"],
                               OCIBENCH_MODULES_ROOT=str(modules),
                               OCIBENCH_SHAPES_DIR=str(shapes_dir),
                               PYTHONPATH=python_path, JUDGE_LOG=str(log))
    case = cases["osu_bw %buffers=H-H %nodes=1"]
    # the figure was missed and its cause named, as before ...
    assert case["result"] == "fail", case["fail_reason"] or result.stdout[-3000:]
    assert case["fail_reason"].endswith("(UCX's tables name no cma lane)"), case["fail_reason"]
    # ... from one judgement of the run
    calls = log.read_text().split() if log.exists() else []
    assert len(calls) == 1, f"the run was judged {len(calls)} times"
