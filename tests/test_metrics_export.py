"""`ocibench metrics`: the Prometheus text node_exporter's textfile collector reads,
the alert rules and the Grafana dashboard (docs/monitoring.md).

Real parts: a SQLite history written with the store's API, a state file written with
the healthcheck's own writer, and Prometheus' promtool (Debian's ``prometheus``
package) to lint the text (``check metrics``), parse the rules (``check rules``) and run
the alerts on the exporter's own output (``test rules``)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from ocibench import cli
from ocibench.health import export
from ocibench.health import state as health_state
from ocibench.history import store
from ocibench.paths import SITE_DIR

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is absent (Debian's prometheus package: "
                             "scripts/prereqs.sh installs it)")

RULES = SITE_DIR / "prometheus" / "ocibench-rules.yml"
RULE_TESTS = SITE_DIR / "prometheus" / "tests" / "ocibench-rules.test.yml"
DASHBOARD = SITE_DIR / "grafana" / "ocibench.json"

#: A node name no scheduler would take, carrying every character the format escapes.
ODD_NODE = 'gpu "3" \\ x\ny'


def promtool(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([PROMTOOL, *args], input=stdin, capture_output=True, text=True,
                          timeout=60)


def record(node: str, session: int, value: float, verdict: str = "pass", *,
           check: str = "osu_bw", figure: str = "bandwidth", unit: str = "MB/s",
           size: int | None = 4194304, documented: float | None = 24000.0,
           floor: float | None = 21600.0) -> store.Record:
    return store.Record(node=node, check=check, variant="buffers=D-D nodes=2", size=size,
                        figure=figure, value=value, unit=unit, verdict=verdict,
                        time=1_790_000_000.0 + 86400 * session, session=f"sweep-{session}",
                        documented=documented, floor=floor)


#: The history's last sweep (the sweeps are 0 .. LAST, a day apart).
LAST = 19


@pytest.fixture
def history(tmp_path: Path) -> Path:
    """Four nodes, twenty daily sweeps of osu_bw, and one STREAM and one latency
    figure: gpu-1 fails its floor in the last sweep, gpu-3's last run could not be
    judged, gpu-4 slips 10 % below its own past (and the cluster's median) in its last 3
    sweeps, still above the floor; gpu-2 holds."""
    noise = [0.0, 40.0, -30.0, 20.0, -10.0, 30.0, -40.0, 10.0, -20.0, 0.0, 25.0, -15.0]
    records = []
    for session in range(LAST + 1):
        for node in ("gpu-1", "gpu-2", "gpu-3", "gpu-4"):
            value = 24000.0 + noise[(session + len(node) * int(node[-1])) % 12]
            verdict = "pass"
            if node == "gpu-1" and session == LAST:
                value, verdict = 20000.0, "fail"
            if node == "gpu-3" and session == LAST:
                verdict = "unjudged"
            if node == "gpu-4" and session >= LAST - 2:
                value *= 0.90
            records.append(record(node, session, value, verdict))
        records.append(record("gpu-2", session, 1850.0, check="stream", figure="Triad",
                              unit="GB/s", size=None, documented=1900.0, floor=1700.0))
        records.append(record("gpu-2", session, 2.5, check="osu_latency", figure="latency",
                              unit="us", size=8, documented=2.0, floor=3.0))
    path = tmp_path / "history.sqlite"
    with store.History(path) as db:
        db.add(records)
    return path


def write_state(path: Path, node: str = "gpu-1", time: float = 1_790_000_000.0,
                interval: int | None = 300,
                probes: tuple[tuple[str, str], ...] = (("gpu_count", "pass"),
                                                       ("xid", "unknown")),
                drained: str = "") -> Path:
    health_state.write(health_state.HealthState(
        node=node, time=time, duration_s=0.75, interval_s=interval,
        action="drain" if drained else "none", reason=drained, drained_reason=drained,
        probes=tuple(
            health_state.ProbeResult(name, state, f"{name}: evidence", time + i, 0.25)
            for i, (name, state) in enumerate(probes))), path)
    return path


def export_cli(*args: str, capsys) -> tuple[int, str, str]:
    code = cli.main(["metrics", *args])
    out, err = capsys.readouterr()
    return code, out, err


def samples(text: str) -> dict[str, float]:
    """Sample line (name and labels, as written) -> value."""
    found = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, value = line.rsplit(" ", 1)
            found[series] = float(value)
    return found


def assert_alerts(text: str, at_minutes: int, firing: list[dict[str, str]],
                  tmp_path: Path, rules: Path = RULES) -> None:
    """Run the alert rules in promtool on the exporter's own output (each sample held
    constant from time 0) and assert exactly ``firing`` fires at ``at_minutes``:
    promtool's ALERTS series, counted by alert name and node."""
    series = [{"series": s, "values": f"{export.format_value(v)}x{at_minutes + 5}"}
              for s, v in samples(text).items()]
    expected = [{"labels": "{" + ",".join(f'{k}="{export.escape_label(v)}"'
                                          for k, v in labels.items()) + "}", "value": count}
                for labels, count in _counted(firing)]
    test = {"rule_files": [str(rules)], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": series, "promql_expr_test": [
                {"expr": 'count by (alertname, node) (ALERTS{alertstate="firing"})',
                 "eval_time": f"{at_minutes}m", "exp_samples": expected}]}]}
    path = tmp_path / "alerts.test.yml"
    path.write_text(yaml.safe_dump(test))
    done = promtool("test", "rules", str(path))
    assert done.returncode == 0, done.stdout + done.stderr


def _counted(firing: list[dict[str, str]]) -> list[tuple[dict[str, str], int]]:
    counts: dict[tuple[tuple[str, str], ...], int] = {}
    for labels in firing:
        key = tuple(sorted(labels.items()))
        counts[key] = counts.get(key, 0) + 1
    return [(dict(key), n) for key, n in counts.items()]


# -- the text -----------------------------------------------------------------------

@needs_promtool
def test_history_export_passes_promtool_and_says_each_figure(history, tmp_path, capsys):
    target = tmp_path / "textfile" / "ocibench.prom"
    target.parent.mkdir()
    code, out, err = export_cli("--history", str(history), "--textfile", str(target),
                                capsys=capsys)
    assert (code, out, err) == (0, "", "")
    text = target.read_text()
    lint = promtool("check", "metrics", stdin=text)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    got = samples(text)
    bw = 'node="gpu-1",check="osu_bw",variant="buffers=D-D nodes=2",size="4194304",figure="bandwidth"'
    # MB/s are 1e6 B/s (ocibench.metrics.GBS_PER_UNIT): in base units, bytes per second
    assert got[f"ocibench_figure_value_bytes_per_second{{{bw}}}"] == 20000.0e6
    assert got[f"ocibench_figure_documented_bytes_per_second{{{bw}}}"] == 24000.0e6
    assert got[f"ocibench_figure_floor_bytes_per_second{{{bw}}}"] == 21600.0e6
    assert got[f'ocibench_figure_verdict{{{bw},verdict="fail"}}'] == 1
    assert got[f'ocibench_figure_verdict{{{bw},verdict="pass"}}'] == 0
    assert got[f"ocibench_figure_last_run_timestamp_seconds{{{bw}}}"] == 1_790_000_000 + 86400 * LAST
    triad = 'node="gpu-2",check="stream",variant="buffers=D-D nodes=2",size="",figure="Triad"'
    assert got[f"ocibench_figure_value_bytes_per_second{{{triad}}}"] == 1850e9
    lat = 'node="gpu-2",check="osu_latency",variant="buffers=D-D nodes=2",size="8",figure="latency"'
    assert got[f"ocibench_figure_value_seconds{{{lat}}}"] == pytest.approx(2.5e-6)
    assert got[f"ocibench_figure_floor_seconds{{{lat}}}"] == pytest.approx(3e-6)
    # every verdict a figure can have is a series (a state set): one at 1, the rest 0
    states = {k: v for k, v in got.items() if k.startswith(f"ocibench_figure_verdict{{{bw}")}
    assert len(states) == len(export.FIGURE_VERDICTS) and sum(states.values()) == 1
    # drift: gpu-4 slipped, the others did not
    drifting = {re.search(r'node="([^"]+)"', k)[1]: v for k, v in got.items()
                if k.startswith("ocibench_figure_drifting{") and 'check="osu_bw"' in k}
    assert drifting == {"gpu-1": 0, "gpu-2": 0, "gpu-3": 0, "gpu-4": 1}
    assert not list(tmp_path.glob("textfile/.*")), "the temporary file was left behind"


@needs_promtool
def test_healthcheck_export_passes_promtool_with_freshness(tmp_path, capsys):
    state = write_state(tmp_path / "healthcheck.json",
                        probes=(("gpu_count", "fail"), ("xid", "unknown"), ("rdma", "pass")),
                        drained="ocibench: gpu_count (7 GPUs, the shape has 8)")
    code, out, err = export_cli("--healthcheck", str(state), capsys=capsys)
    assert (code, err) == (0, "")
    lint = promtool("check", "metrics", stdin=out)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    got = samples(out)
    node = 'node="gpu-1"'
    assert got[f"ocibench_healthcheck_last_run_timestamp_seconds{{{node}}}"] == 1_790_000_000
    assert got[f"ocibench_healthcheck_duration_seconds{{{node}}}"] == 0.75
    assert got[f"ocibench_healthcheck_interval_seconds{{{node}}}"] == 300
    assert got[f'ocibench_healthcheck_action{{{node},action="drain"}}'] == 1
    assert got[f'ocibench_healthcheck_action{{{node},action="none"}}'] == 0
    assert got[f"ocibench_healthcheck_drained{{{node}}}"] == 1
    assert got[f'ocibench_healthcheck_probe_state{{{node},probe="gpu_count",state="fail"}}'] == 1
    assert got[f'ocibench_healthcheck_probe_state{{{node},probe="xid",state="unknown"}}'] == 1
    assert got[f'ocibench_healthcheck_probe_state{{{node},probe="xid",state="fail"}}'] == 0
    assert got[f'ocibench_healthcheck_probe_last_run_timestamp_seconds{{{node},probe="rdma"}}'] \
        == 1_790_000_002
    assert got[f'ocibench_healthcheck_probe_duration_seconds{{{node},probe="rdma"}}'] == 0.25


@needs_promtool
def test_odd_label_values_are_escaped(tmp_path, capsys):
    # a state file naming such a node is refused (ocibench.hostnames: no healthcheck
    # writes one), with the name escaped; the format's escapes are the exporter's own
    state = write_state(tmp_path / "healthcheck.json", node=ODD_NODE,
                        probes=(("gpu_count", "fail"),))
    code, out, err = export_cli("--healthcheck", str(state), capsys=capsys)
    assert code == 2 and out == "" and len(err.splitlines()) == 1, err
    assert "'gpu \"3\" \\\\ x\\ny' is not a host name" in err, err
    out = export.render(export.health_families(health_state.HealthState(
        node=ODD_NODE, time=1_790_000_000.0, duration_s=0.75, interval_s=300,
        action="none", reason="", probes=(health_state.ProbeResult(
            "gpu_count", "fail", "evidence", 1_790_000_000.0, 0.25),))))
    # the exposition format's three escapes: \\, \" and \n
    assert 'ocibench_healthcheck_duration_seconds{node="gpu \\"3\\" \\\\ x\\ny"} 0.75' in out
    lint = promtool("check", "metrics", stdin=out)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    # and Prometheus reads back the very name: the alert carries it
    assert_alerts(out, 5, [{"alertname": "OcibenchProbeFailing", "node": ODD_NODE}], tmp_path)


@needs_promtool
@pytest.mark.parametrize("name, why", [
    ("ocibench_figure-value_seconds", "invalid metric name"),
    ("ocibench_figure_value_microseconds", 'use base unit "seconds"'),
])
def test_promtool_refuses_a_broken_metric_name(name, why):
    """What the tests above lean on: promtool fails a name that is not one."""
    family = export.Family(name, "a figure")
    family.add(export.labels(node="gpu-1"), 1.0)
    lint = promtool("check", "metrics", stdin=export.render([family]))
    assert lint.returncode != 0
    assert why in lint.stdout + lint.stderr


def test_a_unit_with_no_base_unit_is_named_not_dropped(capsys):
    families, notes = export.figure_families([record("gpu-1", 0, 3.0, unit="furlongs")])
    assert export.render(families) == ""
    assert notes == ["gpu-1 osu_bw bandwidth: unit 'furlongs' has no Prometheus base unit: "
                     "not exported"]


def test_unreadable_sources_are_one_line_and_leave_the_file(tmp_path, capsys):
    target = tmp_path / "ocibench.prom"
    target.write_text("# the previous export\n")
    bad = tmp_path / "healthcheck.json"
    bad.write_text('{"node": "gpu-1"}')
    for args in (["--history", str(tmp_path / "none.sqlite")], ["--healthcheck", str(bad)],
                 ["--healthcheck", str(tmp_path / "never.json")], []):
        code, out, err = export_cli(*args, "--textfile", str(target), capsys=capsys)
        assert code == 2 and out == "" and len(err.splitlines()) == 1, err
        assert err.startswith("ocibench metrics: ")
    assert target.read_text() == "# the previous export\n"


def test_write_textfile_replaces_and_names_an_unwritable_target(tmp_path):
    target = tmp_path / "ocibench.prom"
    export.write_textfile("a 1\n", target)
    with open(target) as reader:  # node_exporter, in the middle of a scrape
        export.write_textfile("a 2\n", target)
        # renamed over, never rewritten in place: the open reader still reads the
        # whole previous export, and the next open the whole new one
        assert reader.read() == "a 1\n"
    assert target.read_text() == "a 2\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ocibench.prom"]
    with pytest.raises(export.ExportError, match="cannot write .*nodir/x.prom"):
        export.write_textfile("a 1\n", tmp_path / "nodir" / "x.prom")


# -- the alert rules ----------------------------------------------------------------

@needs_promtool
def test_rules_parse_and_their_unit_tests_pass():
    checked = promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = promtool("test", "rules", str(RULE_TESTS))
    assert tested.returncode == 0, tested.stdout + tested.stderr


def alert_names() -> list[str]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule["alert"] for group in groups for rule in group["rules"] if "alert" in rule]


def test_every_alert_has_a_case_that_fires_it():
    tests = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    fired = {case["alertname"] for test in tests for case in test.get("alert_rule_test", [])
             if case.get("exp_alerts")}
    assert set(alert_names()) <= fired


@needs_promtool
@pytest.mark.parametrize("alert", alert_names())
def test_a_rule_that_never_fires_fails_the_rule_tests(alert, tmp_path):
    """Each alert made unable to fire (its expression and-ed with nothing): its unit
    tests must then fail, so a rule that never fires cannot pass."""
    doc = yaml.safe_load(RULES.read_text())
    for group in doc["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == alert:
                rule["expr"] = f"({rule['expr']}) and on() (vector(0) > 1)"
    (tmp_path / "tests").mkdir()
    (tmp_path / RULES.name).write_text(yaml.safe_dump(doc))
    shutil.copy(RULE_TESTS, tmp_path / "tests" / RULE_TESTS.name)
    tested = promtool("test", "rules", str(tmp_path / "tests" / RULE_TESTS.name))
    assert tested.returncode != 0
    assert alert in tested.stdout + tested.stderr


@needs_promtool
def test_alerts_on_the_exported_history(history, tmp_path, capsys):
    """The figure alerts on the exporter's own output: gpu-1's failed figure and
    gpu-4's drift fire; gpu-3's unjudged run and gpu-2 do not."""
    code, out, _ = export_cli("--history", str(history), capsys=capsys)
    assert code == 0
    assert_alerts(out, 5, [{"alertname": "OcibenchFigureFailing", "node": "gpu-1"},
                           {"alertname": "OcibenchFigureDrifting", "node": "gpu-4"}], tmp_path)


@needs_promtool
def test_a_healthcheck_gone_stale_fires(tmp_path, capsys):
    """Freshness: promtool's clock starts at 0, so the states are written near it.  At
    960 s, gpu-1's last run (at 60 s, every 60 s expected) is 15 intervals old: stale;
    gpu-2's (at 900 s) is 1: fresh.  gpu-3 and gpu-4 could not read their interval
    (slurm.conf): the export gives the default 300 s, so gpu-3's run at 0 s is stale
    (960 s > 3 x 300 s) and gpu-4's at 800 s is not; without the default no rule could
    ever judge them."""
    out = ""
    for node, time, interval in (("gpu-1", 60.0, 60), ("gpu-2", 900.0, 60),
                                 ("gpu-3", 0.0, None), ("gpu-4", 800.0, None)):
        state = write_state(tmp_path / f"{node}.json", node=node, time=time,
                            interval=interval, probes=(("gpu_count", "pass"),))
        code, text, _ = export_cli("--healthcheck", str(state), capsys=capsys)
        assert code == 0
        out += text
    assert samples(out)['ocibench_healthcheck_drained{node="gpu-2"}'] == 0
    assert samples(out)['ocibench_healthcheck_interval_seconds{node="gpu-3"}'] == \
        export.DEFAULT_INTERVAL_S
    # the nodes' files, as their node_exporters would serve them (samples() reads the
    # sample lines of them together)
    assert_alerts(out, 16, [{"alertname": "OcibenchHealthcheckStale", "node": "gpu-1"},
                            {"alertname": "OcibenchHealthcheckStale", "node": "gpu-3"}],
                  tmp_path)


@needs_promtool
def test_a_drain_the_budget_refused_is_exported_and_fires(tmp_path, capsys):
    """The healthcheck's "would drain (budget spent)" (ocibench.cluster.budget) is an
    action of the export, and OcibenchDrainBudgetSpent fires on it; a dry run's
    "would drain" does not."""
    out = ""
    for node, action in (("gpu-1", health_state.BUDGET_SPENT), ("gpu-2", "would drain")):
        path = tmp_path / f"{node}.json"
        health_state.write(health_state.HealthState(
            node=node, time=1_790_000_000.0, duration_s=1.9, interval_s=300,
            action=action, reason="ocibench: gpu_count (7x)", probes=(
                health_state.ProbeResult("gpu_count", "fail", "7x", 1_790_000_000.0, 0.1),)),
            path)
        code, text, _ = export_cli("--healthcheck", str(path), capsys=capsys)
        assert code == 0
        out += text
    got = samples(out)
    assert got['ocibench_healthcheck_action{node="gpu-1",action="would drain (budget '
               'spent)"}'] == 1
    assert got['ocibench_healthcheck_action{node="gpu-2",action="would drain (budget '
               'spent)"}'] == 0
    assert_alerts(out, 5, [{"alertname": "OcibenchProbeFailing", "node": "gpu-1"},
                           {"alertname": "OcibenchProbeFailing", "node": "gpu-2"},
                           {"alertname": "OcibenchDrainBudgetSpent", "node": "gpu-1"}],
                  tmp_path)


# -- the dashboard ------------------------------------------------------------------

def exported_names(history: Path) -> set[str]:
    """Every metric name the exporter writes, from a history with drift and a state."""
    families, _ = export.from_history(history)
    state = health_state.HealthState("gpu-1", 0.0, 0.1, 300, "none", "", (
        health_state.ProbeResult("gpu_count", "pass", "", 0.0, 0.1),))
    return {f.name for f in families + export.health_families(state)}


def dashboard_queries() -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target and query variable, Grafana's variables
    given a value and label_values(m, l) read as the PromQL it stands for."""
    board = json.loads(DASHBOARD.read_text())
    found = [(f"panel {p['id']} {t['refId']}", t["expr"])
             for p in board["panels"] for t in p.get("targets", [])]
    for var in board["templating"]["list"]:
        if var["type"] == "query":
            query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            match = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", query, re.S)
            assert match, f"variable {var['name']}: {query!r} is no label_values(metric, label)"
            found.append((f"variable {var['name']}",
                          f"group by ({match[2]}) ({match[1]})"))
    return [(where, re.sub(r"\$\{?(node|check)\}?", "gpu-1", expr)) for where, expr in found]


def test_dashboard_and_rules_name_only_exported_metrics(history):
    names = exported_names(history)
    used = set()
    for text in [expr for _, expr in dashboard_queries()] + [RULES.read_text(),
                                                             RULE_TESTS.read_text()]:
        used |= set(re.findall(r"\bocibench_[a-z_]+", text))
    assert used and used <= names, f"not exported: {sorted(used - names)}"


@needs_promtool
def test_every_dashboard_query_parses(tmp_path):
    """promtool parses each query, as a recording rule of a generated rules file."""
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query_{i}", "expr": expr}
        for i, (_, expr) in enumerate(dashboard_queries())]}]}
    path = tmp_path / "dashboard.rules.yml"
    path.write_text(yaml.safe_dump(rules))
    checked = promtool("check", "rules", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr


@needs_promtool
def test_the_matrices_rank_the_worst_verdict(history, tmp_path, capsys):
    """The node x check matrix on the exported history: fail 3, drifting 2, unjudged 1,
    pass 0, per node and check; the probe matrix: fail 2, unknown 1, pass 0."""
    code, out, _ = export_cli("--history", str(history), capsys=capsys)
    assert code == 0
    state = write_state(tmp_path / "hc.json", probes=(("gpu_count", "fail"),
                                                      ("xid", "unknown"), ("rdma", "pass")))
    code, text, _ = export_cli("--healthcheck", str(state), capsys=capsys)
    out += text
    board = json.loads(DASHBOARD.read_text())
    matrix = {p["title"].split(":")[0]: p["targets"][0]["expr"] for p in board["panels"]
              if p["type"] == "table" and "groupingToMatrix" in
              [t["id"] for t in p.get("transformations", [])]}
    assert set(matrix) == {"Figures", "Healthcheck probes"}
    series = [{"series": s, "values": f"{export.format_value(v)}x5"}
              for s, v in samples(out).items()]
    figures = {("gpu-1", "osu_bw"): 3, ("gpu-2", "osu_bw"): 0, ("gpu-3", "osu_bw"): 1,
               ("gpu-4", "osu_bw"): 2, ("gpu-2", "stream"): 0, ("gpu-2", "osu_latency"): 0}
    probes = {("gpu-1", "gpu_count"): 2, ("gpu-1", "xid"): 1, ("gpu-1", "rdma"): 0}
    test = {"rule_files": [], "tests": [{"interval": "1m", "input_series": series,
            "promql_expr_test": [
                {"expr": matrix["Figures"], "eval_time": "2m", "exp_samples": [
                    {"labels": f'{{node="{n}",check="{c}"}}', "value": v}
                    for (n, c), v in figures.items()]},
                {"expr": matrix["Healthcheck probes"], "eval_time": "2m", "exp_samples": [
                    {"labels": f'{{node="{n}",probe="{p}"}}', "value": v}
                    for (n, p), v in probes.items()]}]}]}
    path = tmp_path / "matrix.test.yml"
    path.write_text(yaml.safe_dump(test))
    tested = promtool("test", "rules", str(path))
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_dashboard_loads_with_unique_panels_and_a_prometheus_source():
    board = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    assert all(p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
               for p in board["panels"])
    assert {v["name"] for v in board["templating"]["list"]} == {"datasource", "node", "check"}


def test_default_sources_are_the_history_and_state_the_others_use(history, tmp_path,
                                                                  monkeypatch, capsys):
    """--history and --healthcheck with no path read $OCIBENCH_HISTORY_DB and
    $OCIBENCH_HEALTH_STATE, where the sweep and the healthcheck write."""
    monkeypatch.setenv("OCIBENCH_HISTORY_DB", str(history))
    monkeypatch.setenv("OCIBENCH_HEALTH_STATE", str(write_state(tmp_path / "hc.json")))
    code, out, err = export_cli("--history", "--healthcheck", capsys=capsys)
    assert (code, err) == (0, "")
    got = samples(out)
    assert got['ocibench_healthcheck_probe_state{node="gpu-1",probe="xid",state="unknown"}'] == 1
    assert any(k.startswith('ocibench_figure_drifting{node="gpu-4"') for k in got)
