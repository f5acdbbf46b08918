#!/usr/bin/env python3
"""Both sets of GPU figures of a device pipeline run side by side (docs/device-runs.md).

    summarize.py RESULTS_DIR        # results/ of scripts/device/pipeline.sh

RESULTS_DIR holds reframe-N/ (ours: ``reframe -c checks/ -r -t gpu`` through the module
tree; its JSON run report names each test case and its output directory) and hand-N/
(the seeds' command lines against the hand-built OMB and nccl-tests, one file per run).
Every output is judged by ocibench.figures.outputs.parse, the parser of the checks and of
``ocibench evaluate``, so both sets are read the same way.

Prints a table (median over rounds, ours / hand-built, fraction of the link's limit)
and writes RESULTS_DIR/summary.json.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path

from ocibench.figures import outputs
from ocibench.reframe import runreport

#: Link limits, GB/s each way: NVLink 4 (18 links x 25 GB/s) between the H200s, PCIe
#: Gen5 x16 (32 GT/s x 16 lanes, 128b/130b: 63 GB/s, where ~64 is often quoted) between
#: host memory and a GPU.
LINKS = {"nvlink4": ("NVLink 4", 450.0), "pcie5": ("PCIe Gen5 x16", 63.0)}
GIB = 2**30

#: figure -> (check, run params, unit of the figure, better, link)
FIGURES = {
    "osu_latency D-D": ("osu_latency", {"buffers": "D-D", "nodes": 1}, "us", "lower", None),
    "osu_bw D-D": ("osu_bw", {"buffers": "D-D", "nodes": 1}, "GB/s", "higher", "nvlink4"),
    "osu_latency H-D same-numa": (
        "osu_latency", {"buffers": "H-D", "nodes": 1, "placement": "same-numa"},
        "us", "lower", None),
    "osu_latency D-H same-numa": (
        "osu_latency", {"buffers": "D-H", "nodes": 1, "placement": "same-numa"},
        "us", "lower", None),
    "osu_bw H-D same-numa": (
        "osu_bw", {"buffers": "H-D", "nodes": 1, "placement": "same-numa"},
        "GB/s", "higher", "pcie5"),
    "osu_bw D-H same-numa": (
        "osu_bw", {"buffers": "D-H", "nodes": 1, "placement": "same-numa"},
        "GB/s", "higher", "pcie5"),
    "osu_xccl_allreduce 1 GiB": (
        "osu_xccl_allreduce", {"nodes": 1, "gpus_per_node": 2}, "us", "lower", None),
    "osu_xccl_allreduce 1 GiB busbw": (None, {}, "GB/s", "higher", "nvlink4"),
    "nccl all_reduce_perf 10 GiB busbw (out-of-place)": (
        "nccl_all_reduce_perf", {"nodes": 1, "gpus_per_node": 2}, "GB/s", "higher", "nvlink4"),
    "nccl all_reduce_perf 10 GiB busbw (in-place)": (None, {}, "GB/s", "higher", "nvlink4"),
}

#: hand-N/<file>.out -> figure
HAND_FILES = {
    "osu_latency_D-D": "osu_latency D-D",
    "osu_bw_D-D": "osu_bw D-D",
    "osu_latency_H-D_same-numa": "osu_latency H-D same-numa",
    "osu_latency_D-H_same-numa": "osu_latency D-H same-numa",
    "osu_bw_H-D_same-numa": "osu_bw H-D same-numa",
    "osu_bw_D-H_same-numa": "osu_bw D-H same-numa",
    "osu_xccl_allreduce": "osu_xccl_allreduce 1 GiB",
    "nccl_all_reduce_perf": "nccl all_reduce_perf 10 GiB busbw (out-of-place)",
}


def figures_of(figure: str, text: str) -> dict[str, float]:
    """The figure(s) one output gives, in the figure's unit; raises SanityError."""
    check, params, *_ = FIGURES[figure]
    m = outputs.parse(check, text, params)
    if check == "nccl_all_reduce_perf":
        return {"nccl all_reduce_perf 10 GiB busbw (out-of-place)": m.values["out_of_place"],
                "nccl all_reduce_perf 10 GiB busbw (in-place)": m.values["in_place"]}
    value = next(iter(m.values.values()))
    if check == "osu_xccl_allreduce":
        n = params["gpus_per_node"] * params["nodes"]
        busbw = GIB / (value * 1e-6) / 1e9 * 2 * (n - 1) / n
        return {figure: value, "osu_xccl_allreduce 1 GiB busbw": busbw}
    if m.metric == "bandwidth":
        value /= 1000.0  # OMB MB/s (10^6 B/s) -> GB/s
    return {figure: value}


def reframe_figure(display_name: str) -> str | None:
    """The figure of a ReFrame test case, from its display name and parameters."""
    name, *rest = display_name.split()
    params = dict(p.lstrip("%").split("=", 1) for p in rest if p.startswith("%"))
    if params.get("nodes", "1") != "1":
        return None
    if name in ("osu_latency", "osu_bw"):
        return f"{name} {params['buffers']}" if params.get("buffers") == "D-D" else None
    if name in ("osu_latency_host_device", "osu_bw_host_device"):
        return f"{name.rsplit('_host_device')[0]} {params['buffers']} {params['placement']}"
    if name == "osu_xccl_allreduce":
        return "osu_xccl_allreduce 1 GiB"
    if name == "nccl_all_reduce_perf":
        return "nccl all_reduce_perf 10 GiB busbw (out-of-place)"
    return None


def local_path(device_path: str, run_dir: Path) -> Path:
    """A path the device wrote under results/<run>/, inside run_dir as unpacked here
    (runs of several device calls may be gathered and renamed: reframe-1 -> reframe-3)."""
    tail = device_path.split("/results/", 1)[-1]
    return run_dir / tail.split("/", 1)[-1]


def read_reframe(run_dir: Path) -> tuple[dict[str, float], list[str]]:
    values: dict[str, float] = {}
    notes: list[str] = []
    reports = sorted((run_dir / "reports").glob("run-report-*.json"))
    if not reports:
        return values, [f"{run_dir.name}: no ReFrame run report"]
    try:
        report = runreport.read(reports[-1])
    except runreport.RunReportError as err:
        return values, [f"{run_dir.name}: {err}"]
    for case in report.benchmarks():   # of a retried case, its last run
        figure = reframe_figure(case.name)
        if case.skipped:
            if figure or "host_device" in case.name:
                notes.append(f"{run_dir.name}: SKIP {case.name}: {case.get('skip_reason')}")
            continue
        if figure is None:
            continue
        if not case.passed:
            notes.append(f"{run_dir.name}: {str(case.result).upper()} {case.name}: "
                         f"{case.get('fail_reason')}")
        out = local_path(case.get("outputdir") or "", run_dir) / "rfm_job.out"
        if not out.is_file():
            notes.append(f"{run_dir.name}: {case.name}: no rfm_job.out")
            continue
        try:
            values.update(figures_of(figure, out.read_text(errors="replace")))
        except (outputs.SanityError, ValueError) as err:
            notes.append(f"{run_dir.name}: {case.name}: {err}")
    return values, notes


def read_hand(run_dir: Path) -> tuple[dict[str, float], list[str]]:
    values: dict[str, float] = {}
    notes: list[str] = []
    for stem, figure in HAND_FILES.items():
        path = run_dir / f"{stem}.out"
        if not path.is_file():
            notes.append(f"{run_dir.name}: no {path.name}")
            continue
        text = path.read_text(errors="replace")
        try:
            values.update(figures_of(figure, text))
        except (outputs.SanityError, ValueError) as err:
            notes.append(f"{run_dir.name}: {stem}: {err}")
        codes = re.findall(r"^rc=(\d+)$", text, re.MULTILINE)
        if codes != ["0"]:
            notes.append(f"{run_dir.name}: {stem}: exit code {codes}")
    return values, notes


def summarize(results: Path) -> dict:
    sets: dict[str, dict[str, list[float]]] = {"ours": {}, "hand": {}}
    notes: list[str] = []
    runs: dict[str, list[str]] = {"ours": [], "hand": []}
    for kind, pattern, read in (("ours", "reframe-*", read_reframe),
                                ("hand", "hand-*", read_hand)):
        for run_dir in sorted(results.glob(pattern)):
            values, n = read(run_dir)
            notes += n
            runs[kind].append(run_dir.name)
            for k, v in values.items():
                sets[kind].setdefault(k, []).append(v)
    rows = []
    for figure, (_check, _params, unit, better, link) in FIGURES.items():
        ours, hand = sets["ours"].get(figure, []), sets["hand"].get(figure, [])
        row = {"figure": figure, "unit": unit, "better": better, "ours": ours, "hand": hand,
               "ours_median": statistics.median(ours) if ours else None,
               "hand_median": statistics.median(hand) if hand else None}
        if row["ours_median"] and row["hand_median"]:
            row["ratio"] = row["ours_median"] / row["hand_median"]
        if link:
            name, limit = LINKS[link]
            row["link"] = f"{name} {limit:g} GB/s"
            for who in ("ours", "hand"):
                if row[f"{who}_median"]:
                    row[f"{who}_fraction"] = row[f"{who}_median"] / limit
        rows.append(row)
    # the node's copy ceilings (nvbandwidth, ocibench.node.pageable_copy: pipeline.sh), which
    # the MPI figures are held against besides the links' limits
    ceiling = results / "copy-ceiling.txt"
    copies = ceiling.read_text().splitlines() if ceiling.is_file() else []
    return {"runs": runs, "rows": rows, "copy_ceiling": copies, "notes": notes}


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if unit == "us" else f"{value:.1f}"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    results = Path(argv[1])
    summary = summarize(results)
    (results / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(f"ours: {', '.join(summary['runs']['ours']) or '-'}; "
          f"hand-built: {', '.join(summary['runs']['hand']) or '-'} (medians)")
    print(f"{'figure':50} {'unit':5} {'ours':>9} {'hand':>9} {'ratio':>6}  "
          f"{'ours/link':>9} {'hand/link':>9}  runs ours | hand")
    for r in summary["rows"]:
        ratio = f"{r['ratio']:.3f}" if r.get("ratio") else "-"
        fo = f"{r['ours_fraction']:.3f}" if r.get("ours_fraction") else "-"
        fh = f"{r['hand_fraction']:.3f}" if r.get("hand_fraction") else "-"
        each = " ".join(fmt(v, r["unit"]) for v in r["ours"]) + " | " + \
            " ".join(fmt(v, r["unit"]) for v in r["hand"])
        print(f"{r['figure']:50} {r['unit']:5} {fmt(r['ours_median'], r['unit']):>9} "
              f"{fmt(r['hand_median'], r['unit']):>9} {ratio:>6}  {fo:>9} {fh:>9}  {each}")
    for line in summary["copy_ceiling"]:
        print("copy ceiling:", line)
    for note in summary["notes"]:
        print("note:", note)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
