"""`ocibench report` from real inputs: a ReFrame run report of a real ReFrame run (a tiny
check that prints OSU tables and records provenance as the project's checks do) and
`ocibench evaluate --json` of every output the seed documents show.  The page is then
rendered in headless Chromium and read back as a person would see it."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
from html import unescape as html_unescape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

import seed_outputs
from ocibench import benchmarks, cli, paths
from ocibench.results.model import FAMILIES

#: What the osu-micro-benchmarks module that Spack generates exports.
SPEC = "osu-micro-benchmarks@7.5.1/abcdefghijklmnopqrstuvwxyz012345"
MODULES = "openmpi/5.0.8:osu-micro-benchmarks/7.5.1"

#: A run-only check shaped like checks/osu.py: check_name, shape and the figure
#: parameters as variables, perf variables <metric>_<size>, provenance.json kept.
TINY_CHECK = '''
import sys
import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_after, sanity_function, variable

TABLES = {
    # osu_latency on the local shape: no documented figure.
    "osu_latency": ("local", "1:8", "# OSU MPI Latency Test v7.5",
                    "# Size       Avg Latency(us)", "latency", "us",
                    {1: 1.71, 2: 1.72, 4: 1.74, 8: 1.80}),
    # osu_bw as on BM.Optimized3.36 (seed 002 sec 3-3 documents 12,254.16 MB/s).
    "osu_bw": ("BM.Optimized3.36", "268435456:268435456", "# OSU MPI Bandwidth Test v7.5",
               "# Size      Bandwidth (MB/s)", "bandwidth", "MB/s", {268435456: 12000.0}),
}


@rfm.simple_test
class tiny_osu(rfm.RunOnlyRegressionTest):
    bench = parameter(list(TABLES))
    check_name = variable(str, value="")
    shape = variable(str, value="")
    buffers = variable(str, value="H-H")
    nodes = variable(int, value=2)
    sizes = variable(str, value="")
    valid_systems = ["*"]
    valid_prog_environs = ["*"]
    executable = "printf"
    keep_files = ["provenance.json"]
    env_vars = {"OCIBENCH_SPEC_OSU_MICRO_BENCHMARKS": "%(spec)s",
                "LOADEDMODULES": "%(modules)s"}
    prerun_cmds = [f"{sys.executable} -m ocibench.node.provenance > provenance.json"]

    @run_after("init")
    def configure(self):
        shape, sizes, title, header, metric, unit, values = TABLES[self.bench]
        self.check_name, self.shape, self.sizes = self.bench, shape, sizes
        lines = [title, "# Datatype: MPI_CHAR.", header]
        lines += [f"{size:<10d}{value:>18.2f}" for size, value in values.items()]
        self.executable_opts = ["'%%s\\\\n'"] + [f"'{line}'" for line in lines]
        self.perf_variables = {
            f"{metric}_{size}": sn.make_performance_function(
                sn.extractsingle(rf"^{size}\\s+(\\S+)$", self.stdout, 1, float), unit)
            for size in values
        }

    @sanity_function
    def complete(self):
        return sn.assert_found(r"^# Size", self.stdout)
''' % {"spec": SPEC, "modules": MODULES}  # noqa: UP031 (% keeps the template's braces literal)


def _ocibench(*argv: str) -> tuple[int, str, str]:
    """Run the ocibench command in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main(list(argv))
    return status, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def reframe_report(tmp_path_factory) -> Path:
    """The JSON run report of a real ReFrame run of TINY_CHECK."""
    exe = shutil.which("reframe")
    if not exe:
        pytest.skip("reframe is not installed (pip install 'ocibench[test]')")
    work = tmp_path_factory.mktemp("reframe")
    (work / "tiny_osu.py").write_text(TINY_CHECK)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(paths.REPO_ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    report = work / "run-report.json"
    done = subprocess.run(
        [exe, "-c", str(work / "tiny_osu.py"), "-r", "--prefix", str(work / "rfm"),
         "--report-file", str(report)],
        cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return report


@pytest.fixture(scope="module")
def seed_evaluations(tmp_path_factory) -> dict[str, Path]:
    """`ocibench evaluate --json` of every seed output, by SeedOutput.name."""
    work = tmp_path_factory.mktemp("evaluations")
    found = {}
    for index, entry in enumerate(seed_outputs.INDEX):
        output = work / f"{index:02d}.txt"
        output.write_text(seed_outputs.extract(entry))
        settings = [a for k, v in entry.params.items() for a in ("--set", f"{k}={v}")]
        status, stdout, stderr = _ocibench("evaluate", entry.check, str(output),
                                           "--shape", entry.shape, *settings, "--json")
        assert status == 0, stderr
        (work / f"{index:02d}.json").write_text(stdout)
        found[entry.name] = work / f"{index:02d}.json"
    return found


@pytest.fixture(scope="module")
def report_dir(reframe_report: Path, seed_evaluations: dict[str, Path],
               tmp_path_factory) -> Path:
    """The report of both, the evaluations with the provenance the ReFrame run kept."""
    out = tmp_path_factory.mktemp("report")
    kept = _testcases(reframe_report)[0]["outputdir"] + "/provenance.json"
    status, stdout, stderr = _ocibench("report", str(reframe_report),
                                       *map(str, seed_evaluations.values()),
                                       "-o", str(out), "--provenance", kept)
    assert status == 0, stderr
    assert "report.html" in stdout
    return out


def _testcases(report: Path) -> list[dict[str, Any]]:
    return [case for run in json.loads(report.read_text())["runs"]
            for case in run["testcases"]]


def _results(report_dir: Path) -> list[dict[str, Any]]:
    summary = json.loads((report_dir / "report.json").read_text())
    return [r for shape in summary["shapes"].values() for r in shape["results"]]


def _number(value: float) -> str:
    return f"{value:,.2f}"


def test_every_check_has_a_family():
    assert set(FAMILIES) == set(benchmarks.CHECKS)


def test_reframe_results_carry_measured_documented_limit_and_provenance(report_dir):
    results = {r["name"]: r for r in _results(report_dir) if "tiny_osu" in r["name"]}
    assert set(results) == {"tiny_osu %bench=osu_latency", "tiny_osu %bench=osu_bw"}

    local = results["tiny_osu %bench=osu_latency"]
    assert (local["shape"], local["check"], local["ok"]) == ("local", "osu_latency", True)
    assert local["params"] == {"buffers": "H-H", "nodes": 2, "sizes": "1:8"}
    assert [(r["key"], r["measured"], r["verdict"]) for r in local["rows"]] == [
        (1, 1.71, "no reference"), (2, 1.72, "no reference"),
        (4, 1.74, "no reference"), (8, 1.8, "no reference")]
    assert all(r["reference"] is None and r["limit_fraction"] is None for r in local["rows"])

    [bw] = results["tiny_osu %bench=osu_bw"]["rows"]
    assert results["tiny_osu %bench=osu_bw"]["shape"] == "BM.Optimized3.36"
    assert (bw["measured"], bw["reference"], bw["verdict"]) == (12000.0, 12254.16, "pass")
    assert bw["source"] == "002_a0a00444901fec78.txt sec 3-3"
    assert bw["ratio"] == pytest.approx(12000.0 / 12254.16)
    assert (bw["limit"], bw["limit_gbs"]) == ("rdma_port_gbs", 12.5)
    assert bw["limit_fraction"] == pytest.approx(12.0 / 12.5)

    for result in results.values():
        prov = result["provenance"]
        assert prov["recorded"] is True
        [spec] = prov["specs"]
        assert (spec["spec"], spec["hash"]) == (SPEC, SPEC.rsplit("/", 1)[1])
        assert spec["module"] == "osu-micro-benchmarks/7.5.1"
        assert prov["modules"] == MODULES.split(":")
        assert prov["hosts"] and prov["date"]
        assert {"mpi", "ucx", "nccl", "toolkit", "driver", "shape"} <= set(prov)


def test_seed_evaluations_match_their_documented_figures(report_dir, seed_evaluations):
    results = [r for r in _results(report_dir) if "evaluation of" in r["name"]]
    assert len(results) == len(seed_evaluations)
    for result in results:
        assert result["ok"], result
        assert result["rows"], result["name"]
        for row in result["rows"]:
            assert row["verdict"] == "pass", (result["name"], row)
            assert row["ratio"] == pytest.approx(1.0)
            assert row["source"].startswith(result["rows"][0]["source"][:3])
        assert result["provenance"]["specs"][0]["spec"] == SPEC  # from --provenance
    stream = next(r for r in results if r["check"] == "stream" and r["params"]["nps"] == 1)
    triad = next(row for row in stream["rows"] if row["key"] == "Triad")
    assert (triad["limit"], triad["limit_gbs"]) == ("memory", 921.6)
    assert triad["limit_fraction"] == pytest.approx(715650.4 / 1e3 / 921.6)


def test_html_shows_every_figure_verdict_and_provenance(report_dir):
    page = (report_dir / "report.html").read_text()
    # Self-contained: nothing is loaded from elsewhere (a cited URL may stand as text).
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", page)
    assert "@import" not in page and "url(" not in page
    for result in _results(report_dir):
        assert result["name"] in page
        for row in result["rows"]:
            assert f"{_number(row['measured'])} {row['unit']}" in page
            if row["reference"] is not None:
                assert f"{_number(row['reference'])} {row['unit']}" in page
                assert row["source"] in page
                assert f"{row['ratio']:.3f}" in page
            if row["limit_fraction"] is not None:
                assert f"{100 * row['limit_fraction']:.1f} %" in page
    for word in ("pass", "no reference", "Spack specs", SPEC, "osu-micro-benchmarks/7.5.1",
                 "rdma_port_gbs 12.5 GB/s", "96.0 %", "98.0 %"):
        assert word in page, word
    assert page.count('src="data:image/png;base64,') == len(list(report_dir.glob("*.png")))


def test_one_plot_per_shape_and_family_present(report_dir):
    assert sorted(p.name for p in report_dir.glob("*.png")) == [
        "bm.gpu4.8-nccl-tests.png", "bm.gpu4.8-osu-collectives.png",
        "bm.gpu4.8-osu-point-to-point.png", "bm.optimized3.36-intel-mpi-benchmarks.png",
        "bm.optimized3.36-osu-collectives.png", "bm.optimized3.36-osu-point-to-point.png",
        "bm.standard.e5.192-stream.png", "local-osu-point-to-point.png"]
    summary = json.loads((report_dir / "report.json").read_text())
    assert summary["shapes"]["local"]["plots"] == {
        "OSU point-to-point": "local-osu-point-to-point.png"}


class _Page(HTMLParser):
    """The text a person reads and the plots' decode status, from Chromium's DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.images: list[dict[str, str | None]] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style"):
            self._skip += 1
        if tag == "img":
            self.images.append(dict(attrs))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.text.append(data)


@pytest.mark.chromium
def test_chromium_renders_the_report(report_dir):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.skip("chromium is not installed (Debian: apt-get install chromium)")
    url = (report_dir / "report.html").as_uri()
    base = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--virtual-time-budget=5000"]
    dom = subprocess.run(base + ["--dump-dom", url], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    page = _Page()
    page.feed(dom)
    text = re.sub(r"\s+", " ", "".join(page.text))
    plots = len(list(report_dir.glob("*.png")))
    assert len(page.images) == plots
    assert all(int(img.get("data-natural-width") or 0) > 0 for img in page.images)
    assert f"Plots displayed: {plots} of {plots}." in text
    for shown in ("Shape BM.Optimized3.36", "Shape local", "12,000.00 MB/s",
                  "12,254.16 MB/s", "1.71 us", "715,650.40 MB/s", "232.20 GB/s",
                  "pass", "no reference", "96.0 %", SPEC):
        assert shown in text, shown

    shot = report_dir / "screenshot.png"
    subprocess.run(base + [f"--screenshot={shot}", "--window-size=1400,2000", url],
                   capture_output=True, timeout=120, check=True)
    from matplotlib.image import imread

    pixels = imread(shot)
    assert pixels.shape[:2] == (2000, 1400)
    assert pixels.std() > 0.05  # text and plots, not a blank page


@pytest.mark.parametrize("content, message", [
    ("not json at all", "not JSON"),
    ("[1, 2, 3]", "neither a ReFrame run report nor"),
    ('{"check": "osu_foo", "rows": []}', "unknown check 'osu_foo'"),
    (('{"session_info": {"data_version": "4.2"}, "runs": [{"testcases": '
      '[{"name": "x", "check_name": "hpl"}]}]}'), "unknown check 'hpl'"),
    ('{"session_info": {"data_version": "4.2"}, "runs": []}', "no benchmark results"),
    ('{"check": "osu_bw", "shape": "BM.Nope", "rows": []}', "unknown shape 'BM.Nope'"),
    ('{"check": "osu_bw", "rows": [{"key": 1}]}', "bad.json: rows[0].metric: missing"),
    ('{"session_info": {"data_version": "4.2"}, "runs": [{"testcases": [{"name": "x", '
     '"check_name": "osu_bw", '
     '"nodes": 7, "perfvalues": {"s:p:bandwidth_1": [1.0, 0, null, null, "MB/s", "pass"]}}]}]}',
     "nodes must be one of 1, 2"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, content, message):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    status, _, stderr = _ocibench("report", str(bad), "-o", str(tmp_path / "out"))
    assert status == 2
    assert stderr.count("\n") == 1 and stderr.startswith("ocibench report: ")
    assert message in stderr
    assert not (tmp_path / "out").exists()


def test_bad_input_exit_status_of_the_command(tmp_path):
    missing = tmp_path / "missing.json"
    done = subprocess.run([sys.executable, "-m", "ocibench.cli", "report", str(missing),
                           "-o", str(tmp_path / "out")], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(paths.REPO_ROOT / "src")})
    assert done.returncode == 2
    assert done.stderr == f"ocibench report: {missing}: cannot read: No such file or directory\n"


# --- Malformed inputs, output safety, ReFrame formats, plot labels (issue 11, item 4) ---

#: An osu_bw output as on BM.Optimized3.36 (seed 002 sec 3-3 documents 12,254.16 MB/s).
OSU_BW = """# OSU MPI Bandwidth Test v7.5
# Datatype: MPI_CHAR.
# Size      Bandwidth (MB/s)
268435456              12000.00
"""


def _evaluation(directory: Path, output_name: str = "bw.txt") -> Path:
    """`ocibench evaluate --json` of OSU_BW, written as <output_name>.json."""
    output = directory / output_name
    output.write_text(OSU_BW)
    status, stdout, stderr = _ocibench("evaluate", "osu_bw", str(output), "--shape",
                                       "BM.Optimized3.36", "--set", "nodes=2", "--json")
    assert status == 0, stderr
    found = directory / f"{output_name}.json"
    found.write_text(stdout)
    return found


def _run_report(case: dict[str, Any], version: Any = "4.2") -> str:
    """A ReFrame run report (data_version 4.2, as ReFrame 4.10 writes it) of one case."""
    testcase = {"name": "osu_bw_check", "result": "pass", "check_name": "osu_bw",
                "shape": "BM.Optimized3.36", "buffers": "H-H", "nodes": 2,
                "sizes": "268435456:268435456", "job_nodelist": ["node1", "node2"],
                "perfvalues": {"generic:default:bandwidth_268435456":
                               [12000.0, 0, None, None, "MB/s", "pass"]}, **case}
    return json.dumps({"session_info": {"data_version": version},
                       "runs": [{"testcases": [testcase]}]})


def _files(directory: Path) -> dict[str, bytes]:
    """Every entry of a directory and its content (links as their target's name)."""
    return {p.name: (os.readlink(p).encode() if p.is_symlink() else
                     p.read_bytes() if p.is_file() else b"<dir>")
            for p in sorted(directory.iterdir())}


@pytest.fixture
def existing_report(tmp_path) -> Path:
    """An output directory holding the report of one valid evaluation."""
    out = tmp_path / "out"
    status, _, stderr = _ocibench("report", str(_evaluation(tmp_path)), "-o", str(out))
    assert status == 0, stderr
    assert sorted(_files(out)) == ["bm.optimized3.36-osu-point-to-point.png",
                                   "report.html", "report.json"]
    return out


def _mutated_evaluation(row: dict[str, Any] | None = None, **top: Any):
    def mutate(data: dict[str, Any]) -> None:
        data.update(top)
        if row is not None:
            data["rows"][0].update(row)
    return mutate


@pytest.mark.parametrize("mutate, field, shown", [
    (_mutated_evaluation({"measured": "abc"}), "rows[0].measured", "'abc' is not a finite number"),
    (_mutated_evaluation({"measured": float("nan")}), "rows[0].measured", "nan is not a finite"),
    (_mutated_evaluation({"measured": float("inf")}), "rows[0].measured", "inf is not a finite"),
    (_mutated_evaluation({"measured": True}), "rows[0].measured", "True is not a finite number"),
    (_mutated_evaluation({"reference": float("nan")}), "rows[0].reference", "nan is not"),
    (_mutated_evaluation({"verdict": "great"}), "rows[0].verdict",
     "'great' is not one of pass, fail, suspicious, no reference"),
    (_mutated_evaluation({"unit": "furlongs"}), "rows[0].unit", "'furlongs' is not one of"),
    (_mutated_evaluation({"metric": "speed"}), "rows[0].metric", "'speed' is not one of"),
    (_mutated_evaluation({"key": [1]}), "rows[0].key", "[1] is neither a message size nor"),
    (_mutated_evaluation({"source": 7}), "rows[0].source", "7 is not a string"),
    (_mutated_evaluation(rows=[5]), "rows[0]", "a number (5) where an object is expected"),
    (_mutated_evaluation(rows={}), "rows", "an object ({}) where a list is expected"),
    (_mutated_evaluation(ok="yes"), "ok", "'yes' is not true or false"),
    (_mutated_evaluation(params={"nodes": float("nan")}), "params.nodes", "nan is not"),
    (_mutated_evaluation(notes=[1]), "notes[0]", "1 is not a string"),
])
def test_malformed_evaluation_is_named_and_leaves_the_report_as_it_was(
        tmp_path, existing_report, mutate, field, shown):
    before = _files(existing_report)
    data = json.loads(_evaluation(tmp_path, "other.txt").read_text())
    mutate(data)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))  # NaN and Infinity as Python's json writes them
    good = tmp_path / "bw.txt.json"  # the valid input of existing_report, first
    status, _, stderr = _ocibench("report", str(good), str(bad), "-o", str(existing_report))
    assert status == 2
    assert stderr.startswith(f"ocibench report: {bad}: {field}: {shown}")
    assert stderr.count("\n") == 1 and stderr.endswith("\n")
    assert _files(existing_report) == before


@pytest.mark.parametrize("case, field, shown", [
    ({"perfvalues": {"generic:default:bandwidth_268435456":
                     ["12000", 0, None, None, "MB/s", "pass"]}},
     "runs[0].testcases[0].perfvalues['generic:default:bandwidth_268435456'][0]",
     "'12000' is not a finite number"),
    ({"perfvalues": {"generic:default:bandwidth_268435456":
                     [float("nan"), 0, None, None, "MB/s", "pass"]}},
     "runs[0].testcases[0].perfvalues['generic:default:bandwidth_268435456'][0]",
     "nan is not a finite number"),
    ({"perfvalues": {"generic:default:bandwidth_268435456":
                     [12000.0, 0, None, None, "MB/s/s", "pass"]}},
     "runs[0].testcases[0].perfvalues['generic:default:bandwidth_268435456'][4]",
     "'MB/s/s' is not one of"),
    ({"perfvalues": {"generic:default:bandwidth_268435456": 12000.0}},
     "runs[0].testcases[0].perfvalues['generic:default:bandwidth_268435456']",
     "a number (12000.0) where a list is expected"),
    ({"perfvalues": [1]}, "runs[0].testcases[0].perfvalues",
     "a list ([1]) where an object is expected"),
    ({"job_nodelist": "node1"}, "runs[0].testcases[0].job_nodelist",
     'a string ("node1") where a list is expected'),
    ({"result": 1}, "runs[0].testcases[0].result", "1 is not a string"),
])
def test_malformed_run_report_is_named_and_leaves_the_report_as_it_was(
        tmp_path, existing_report, case, field, shown):
    before = _files(existing_report)
    bad = tmp_path / "run.json"
    bad.write_text(_run_report(case))
    status, _, stderr = _ocibench("report", str(tmp_path / "bw.txt.json"), str(bad),
                                  "-o", str(existing_report))
    assert status == 2
    assert stderr.startswith(f"ocibench report: {bad}: {field}: {shown}")
    assert stderr.count("\n") == 1 and stderr.endswith("\n")
    assert _files(existing_report) == before


def test_a_well_formed_run_report_is_read(tmp_path):
    """The inline run report of the tests above, unmutated, is a valid input."""
    good = tmp_path / "run.json"
    good.write_text(_run_report({}))
    status, _, stderr = _ocibench("report", str(good), "-o", str(tmp_path / "out"))
    assert status == 0, stderr
    [result] = _results(tmp_path / "out")
    assert [(r["measured"], r["verdict"]) for r in result["rows"]] == [(12000.0, "pass")]
    assert result["provenance"]["hosts"] == ["node1", "node2"]


def test_malformed_provenance_is_named(tmp_path):
    evaluation = _evaluation(tmp_path)
    (tmp_path / "provenance.json").write_text('{"modules": "openmpi/5.0.8", "mpi": null}')
    status, _, stderr = _ocibench("report", str(evaluation), "-o", str(tmp_path / "out"))
    assert status == 2
    assert stderr == (f"ocibench report: {tmp_path / 'provenance.json'}: "
                      'modules: a string ("openmpi/5.0.8") where a list is expected\n')
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("version", ["3.1", "3.0", "5.0", 4.2, None])
def test_run_report_of_an_unknown_format_is_refused(tmp_path, version):
    """ReFrame 4.0 to 4.6 write data_version 3.x: read as 4.x, their results were all
    "not passed"; a later major version may move fields again."""
    report = tmp_path / "run.json"
    report.write_text(_run_report({}, version))
    status, _, stderr = _ocibench("report", str(report), "-o", str(tmp_path / "out"))
    assert status == 2
    assert stderr == (f"ocibench report: {report}: session_info.data_version {version!r}: "
                      "a ReFrame run report format this report cannot read; it reads "
                      "4.0, 4.1, 4.2 (ReFrame 4.7 to 4.10)\n")
    assert not (tmp_path / "out").exists()


def test_the_installed_reframe_writes_a_known_format(reframe_report, tmp_path):
    from ocibench.reframe.runreport import DATA_VERSIONS

    version = json.loads(reframe_report.read_text())["session_info"]["data_version"]
    assert version in DATA_VERSIONS
    status, stdout, stderr = _ocibench("report", str(reframe_report),
                                       "-o", str(tmp_path / "out"))
    assert status == 0, stderr
    # one run on a documented shape that passed, one on local (documents nothing)
    assert "runs: 1 pass, 0 fail, 0 unjudged, 1 recorded, 0 skipped" in stdout


def _local_run(directory: Path) -> Path:
    """A run report on the local shape: its plot, local-osu-point-to-point.png, is not
    among existing_report's files."""
    run = directory / "local-run.json"
    run.write_text(_run_report({"shape": "local"}))
    return run


def test_an_error_while_moving_into_place_changes_nothing(tmp_path, existing_report):
    """A report.html that is a directory is found only once the new report is made,
    plot included: none of it may reach the output directory."""
    (existing_report / "report.html").unlink()
    (existing_report / "report.html").mkdir()
    before = _files(existing_report)
    status, _, stderr = _ocibench("report", str(_local_run(tmp_path)), "-o", str(existing_report))
    assert status == 2
    assert stderr == (f"ocibench report: {existing_report / 'report.html'} "
                      "exists and is not a file: not replaced\n")
    assert _files(existing_report) == before  # no new plot, no report.json, no staging left


@pytest.mark.parametrize("name", ["report.html", "report.json", "local-osu-point-to-point.png"])
def test_a_symlinked_output_file_is_refused_and_its_target_untouched(
        tmp_path, existing_report, name):
    outside = tmp_path / "elsewhere"
    outside.write_text("not the report\n")
    link = existing_report / name
    link.unlink(missing_ok=True)
    link.symlink_to(outside)
    before = _files(existing_report)
    status, _, stderr = _ocibench("report", str(_local_run(tmp_path)), "-o", str(existing_report))
    assert status == 2
    assert stderr == (f"ocibench report: {link} is a symbolic link (to {outside}): "
                      "not replaced; remove it or choose another directory\n")
    assert outside.read_text() == "not the report\n"
    assert _files(existing_report) == before


def test_a_symlinked_output_directory_is_refused(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "out").symlink_to(real)
    status, _, stderr = _ocibench("report", str(_local_run(tmp_path)),
                                  "-o", str(tmp_path / "out"))
    assert status == 2
    assert stderr == (f"ocibench report: {tmp_path / 'out'} is a symbolic link "
                      f"(to {real}): give the directory it points to, or another one\n")
    assert list(real.iterdir()) == []


def test_a_new_output_directory_appears_whole(tmp_path):
    """Made beside its final place and renamed, with the permissions mkdir would give."""
    out = tmp_path / "reports" / "acceptance"
    status, _, stderr = _ocibench("report", str(_local_run(tmp_path)), "-o", str(out))
    assert status == 0, stderr
    assert sorted(_files(out)) == ["local-osu-point-to-point.png", "report.html", "report.json"]
    assert sorted(p.name for p in out.parent.iterdir()) == ["acceptance"]  # no staging left
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o777 & ~umask


def test_dollar_signs_in_names_are_drawn_as_text(tmp_path):
    """Two runs of the same parameters are told apart by their names, here the output
    files' names; "$\\nope{$" would be mathtext, which cannot parse it."""
    plain = _evaluation(tmp_path, "bw.txt")
    dollars = _evaluation(tmp_path, "bw$\\nope{$.txt")
    out = tmp_path / "out"
    status, _, stderr = _ocibench("report", str(plain), str(dollars), "-o", str(out))
    assert status == 0, stderr
    assert (out / "bm.optimized3.36-osu-point-to-point.png").stat().st_size > 0
    assert "osu_bw: evaluation of bw$\\nope{$.txt" in (out / "report.html").read_text()


def test_a_usetex_matplotlibrc_does_not_reach_the_plots(tmp_path, monkeypatch):
    """A user's matplotlibrc may hand every text to LaTeX; the plots' labels are text."""
    import matplotlib

    monkeypatch.setitem(matplotlib.rcParams, "text.usetex", True)
    out = tmp_path / "out"
    status, _, stderr = _ocibench("report", str(_evaluation(tmp_path, "bw_50%_#1.txt")),
                                  "-o", str(out))
    assert status == 0, stderr
    assert (out / "bm.optimized3.36-osu-point-to-point.png").stat().st_size > 0


def test_the_page_escapes_every_text_from_the_inputs(tmp_path):
    run = tmp_path / "run.json"
    run.write_text(_run_report({"display_name": "<script>alert(1)</script>", "result": "fail",
                                "fail_reason": 'sanity: "<marquee>" & more'}))
    out = tmp_path / "out"
    status, _, stderr = _ocibench("report", str(run), "-o", str(out))
    assert status == 0, stderr
    page = (out / "report.html").read_text()
    assert "<script>alert" not in page and "<marquee>" not in page
    assert "<h4>&lt;script&gt;alert(1)&lt;/script&gt;</h4>" in page
    assert "did not pass: sanity: &#34;&lt;marquee&gt;&#34; &amp; more." in page
    assert page.count("<script>") == 1  # the page's own check of its plots


# --- named causes: the run's UCX tables and its preflight ------------------------------

UCX_DATA = paths.REPO_ROOT / "tests" / "data" / "ucx_proto"
#: A figure that needs CMA for a host-buffer osu_bw in one node (a test figure: no
#: shape documents one), added to a copy of BM.GPU4.8.
CMA_FIGURE = """
  - id: test_osu_bw_h_h_cma
    check: osu_bw
    params: {buffers: H-H, nodes: 1}
    metric: bandwidth
    unit: MB/s
    source: {doc: tests/test_report.py, section: named causes}
    values: {268435456: 20000.0}
    requires: [cma]
    why: a single-copy host path (test figure)
"""
PREFLIGHT = {"shape": "BM.GPU4.8", "items": [
    {"name": "cma", "status": "absent", "detail": "restricted: Yama ptrace_scope 3",
     "evidence": "read /proc/sys/kernel/yama/ptrace_scope", "required": False},
    {"name": "xpmem", "status": "present", "detail": "/dev/xpmem exists",
     "evidence": "stat /dev/xpmem", "required": True}]}


@pytest.fixture
def cma_shapes(tmp_path, monkeypatch):
    """The shape files, BM.GPU4.8 with CMA_FIGURE, as OCIBENCH_SHAPES_DIR."""
    from ocibench.results import load
    shapes_dir = tmp_path / "shapes"
    shutil.copytree(paths.REPO_ROOT / "site" / "shapes", shapes_dir)
    gpu = shapes_dir / "BM.GPU4.8.yaml"
    gpu.write_text(gpu.read_text() + CMA_FIGURE)
    monkeypatch.setenv("OCIBENCH_SHAPES_DIR", str(shapes_dir))
    load.shape_of.cache_clear()
    yield shapes_dir
    load.shape_of.cache_clear()


SAYS = ("256 MiB messages from host memory went rendezvous fragmented copy-in copy-out over "
        "sysv/memory (UCX's tables name no cma lane; cma absent: restricted: Yama "
        "ptrace_scope 3)")


def test_the_report_names_the_cause_from_an_evaluation(tmp_path, cma_shapes):
    """`ocibench evaluate --json --preflight` of a real output with UCX's tables: the
    report judges it again and names the same cause, on the page too."""
    (tmp_path / "preflight.json").write_text(json.dumps(PREFLIGHT))
    status, stdout, stderr = _ocibench(
        "evaluate", "osu_bw", str(UCX_DATA / "osu_bw.h-h.no-cma.ucx-1.13.txt"),
        "--shape", "BM.GPU4.8", "--set", "buffers=H-H", "--set", "nodes=1", "--json",
        "--preflight", str(tmp_path / "preflight.json"))
    assert status == 1 and SAYS in stderr
    evaluation = tmp_path / "no-cma.json"
    evaluation.write_text(stdout)
    status, _, stderr = _ocibench("report", str(evaluation), "-o", str(tmp_path / "out"))
    assert status == 0, stderr
    [result] = _results(tmp_path / "out")
    assert result["reason"].endswith(SAYS) and not result["disagreements"]
    assert SAYS in html_unescape((tmp_path / "out" / "report.html").read_text())
    # the action ladder's entry of the lacking capability, in evaluate's JSON and first
    # in the failed result on the page
    assert json.loads(stdout)["next"]["fault"] == "OCIBENCH-SW-0032"
    page = html_unescape((tmp_path / "out" / "report.html").read_text())
    first = page.index("Next step: <strong>fix-software</strong>, fault code "
                       "<code>OCIBENCH-SW-0032</code>: UCX took no cma lane")
    assert first < page.index(SAYS)


def test_the_report_names_the_cause_from_a_reframe_run(tmp_path, cma_shapes):
    """A ReFrame run: the case's kept output holds UCX's tables, the run's preflight
    case its preflight.json; the report reads both."""
    bench, checked = tmp_path / "osu_bw", tmp_path / "preflight"
    bench.mkdir()
    checked.mkdir()
    shutil.copy(UCX_DATA / "osu_bw.h-h.no-cma.ucx-1.13.txt", bench / "rfm_job.out")
    (bench / "rfm_job.err").write_text("")
    (checked / "preflight.json").write_text(json.dumps(PREFLIGHT))
    where = {"system": "BM_GPU4_8", "partition": "single"}
    report = {"session_info": {"data_version": "4.2"}, "runs": [{"testcases": [
        {"name": "preflight", "result": "pass", "outputdir": str(checked), **where},
        {"name": "osu_bw %buffers=H-H %nodes=1", "result": "fail", "check_name": "osu_bw",
         "shape": "BM.GPU4.8", "buffers": "H-H", "nodes": 1, **where,
         "outputdir": str(bench), "job_stdout": "rfm_job.out", "job_stderr": "rfm_job.err",
         "fail_reason": "performance error: failed to meet references",
         "perfvalues": {"BM_GPU4_8:single:bandwidth_268435456":
                        [5131.03, 20000.0, -0.1, None, "MB/s", "fail"]}}]}]}
    (tmp_path / "run.json").write_text(json.dumps(report))
    status, _, stderr = _ocibench("report", str(tmp_path / "run.json"), "-o",
                                  str(tmp_path / "out"))
    assert status == 0, stderr
    [result] = _results(tmp_path / "out")
    assert result["reason"].endswith(SAYS), result["reason"]


# --- this node's copy ceilings (checks/nvbandwidth.py) ---------------------------------

def test_gpu_figures_are_shown_beside_this_nodes_ceilings(tmp_path, seed_evaluations):
    """The nvbandwidth check's values bound the GPU bandwidths of the same shape: each
    is shown as a fraction of them, beside the fraction of its physical link."""
    nvb = tmp_path / "nvbandwidth.txt"
    nvb.write_text((paths.REPO_ROOT / "tests" / "data" / "nvbandwidth"
                    / "h200x2.format.txt").read_text())
    status, stdout, stderr = _ocibench("evaluate", "nvbandwidth", str(nvb), "--shape",
                                       "BM.GPU4.8", "--set", "gpus_per_node=2", "--json")
    assert status == 0, stderr
    (tmp_path / "nvbandwidth.json").write_text(stdout)
    d_d = seed_evaluations["000:osu_bw:buffers=D-D,nodes=1"]
    h_d = seed_evaluations["000:osu_bw:buffers=H-D,nodes=1,placement=same-numa"]
    status, _, stderr = _ocibench("report", str(tmp_path / "nvbandwidth.json"), str(d_d),
                                  str(h_d), "-o", str(tmp_path / "out"))
    assert status == 0, stderr
    results = {r["name"]: r for r in _results(tmp_path / "out")}
    dd = next(r for n, r in results.items() if d_d.name in n or "D-D" in str(r["params"]))
    [row] = dd["rows"]
    assert [(c["ceiling"], round(c["fraction"], 3)) for c in row["of_ceiling"]] == [
        ("device_to_device_read", round(279.57325 / 395.02, 3)),
        ("device_to_device_write", round(279.57325 / 395.0, 3))]
    hd = next(r for r in results.values() if r["params"].get("buffers") == "H-D")
    assert [c["ceiling"] for c in hd["rows"][0]["of_ceiling"]] == [
        "pageable_host_to_device", "host_to_device"]
    page = html_unescape((tmp_path / "out" / "report.html").read_text())
    assert "of this node's ceiling" in page
    assert f"{100 * 279.57325 / 395.02:.1f} % of GPU->GPU read 395.0 GB/s" in page
    assert f"{100 * 23.7516 / 8.21:.1f} % of pageable host->GPU 8.2 GB/s" in page
    # a figure that no ceiling bounds (latency) shows none
    assert all(not r["of_ceiling"] for res in results.values()
               if res["check"] != "osu_bw" for r in res["rows"])
