#!/usr/bin/env python3
"""The drift rule's benchmark (issues 23 and 30; the method and the results: docs/drift.md).

For each figure whose run-to-run spread this project recorded (docs/gpu-results.md's
rounds), a synthetic fleet of SERIES nodes, each a series of 52 sweeps of that figure
with that spread, through the rule the sweep runs: every value is turned into its
residual against the fleet's median of the same sweep, the figure's MAD is pooled over
the fleet (``drift.residual_mad``), and each node is judged by ``drift.assess`` on its
newest ``drift.HORIZON`` residuals, as ``drift.Fleet`` does.

* **false flags / drains**: the share of noise-only series flagged (rerun), or found
  persisting (drained), at any of the 52 sweeps;
* **detection**: SERIES more series, healthy for :data:`HEALTHY` sweeps and then worse by a
  sustained drop of max(5 %, 4 x the figure's MAD): the share flagged at the first,
  second or third sweep of the drop, and the share drained by then;
* **smallest drop**: the smallest sustained drop flagged within 3 sweeps in 95 % of the
  series (bisection, the same noise for every drop tried);
* **slow decline**: a node worse by a fixed fraction more every sweep from sweep 20: the
  smallest rate flagged by the 52nd sweep in 95 % of the series, and how far it had
  fallen when it was first flagged (median);
* **scenarios** (issue 30): an improvement that ends (10 % better for 12 sweeps, then
  back level with the fleet), a bimodal node (10 % better at 40 % of its sweeps): the
  share flagged and drained after sweep 20; with ``--against REF`` also through the rule
  of that git revision (``git show REF:src/ocibench/history/drift.py``: raw values
  against the node's own baseline and the cluster's median, drained when flagged at two
  sweeps running), on the same noise;
* **a fleet-wide shift** at a driver change, through a real SQLite history
  (``History``, ``drift.drifting_nodes``, ``drift.cluster_events``): 100 nodes x 10
  figures, every value 10 % worse from sweep 21 on driver 560.35.03; the nodes flagged
  and drained at any of sweeps 21-30, and the cluster events (and the REF rule's);
* ``--speed DB``: ``drift.drifting_nodes`` over every node of an existing history (the
  18 M-row one scripts/bench-history.py builds), ROUNDS times, median and spread; with
  ``--against REF``, the REF rule on a few nodes, timed in the same call.

Noise is normal, value = figure x (1 + sigma x N(0, 1)), sigma each figure's pooled
relative standard deviation; log-normal, figure x exp(sigma x N(0, 1)), for the loopback
cluster's assumed spread.  Seeded: the same numbers every run.

    PYTHONPATH=$PWD/src python3 scripts/bench-drift.py                  # 1,000 series
    PYTHONPATH=$PWD/src python3 scripts/bench-drift.py --series 300 --against main
    PYTHONPATH=$PWD/src python3 scripts/bench-drift.py --speed /tmp/h.sqlite --against main
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from ocibench.history import drift
from ocibench.history.store import History, Record

SEED = 20261126
SWEEPS = 52
#: Healthy sweeps before the drop (a node swept weekly for 5 months).
HEALTHY = 20
TARGET_DETECTION = 0.95
TARGET_FALSE = 0.01


@dataclass(frozen=True)
class Figure:
    name: str
    unit: str
    higher_is_better: bool
    #: Sets of rounds measured back to back (one stack on one machine), each its own level.
    rounds: tuple[tuple[float, ...], ...]
    source: str
    #: sigma given as an assumption (no spread recorded), else None
    assumed: float | None = None
    #: "normal", or "lognormal" where a normal spread would make values negative
    noise: str = "normal"

    @property
    def sigma(self) -> float:
        """Relative run-to-run standard deviation: pooled over the sets, each around its
        own mean (a set's level differs by stack and machine; its spread is the noise)."""
        if self.assumed is not None:
            return self.assumed
        squares, dof = 0.0, 0
        for rounds in self.rounds:
            mean = statistics.fmean(rounds)
            squares += sum(((v - mean) / mean) ** 2 for v in rounds)
            dof += len(rounds) - 1
        return math.sqrt(squares / dof)


GPU = "docs/gpu-results.md"
FIGURES: tuple[Figure, ...] = (
    Figure("osu_bw D-D 256 MiB (NVLink)", "GB/s", True, (
        (393.2, 394.1, 393.3), (393.4, 393.1, 393.3),          # run C ours | hand
        (393.9, 394.0, 394.1), (393.9, 393.9, 394.3)),         # runs A/B ours | hand
        f"{GPU}: runs C and A/B, 4 sets of 3 rounds"),
    Figure("nvbandwidth host->GPU copy engine", "GB/s", True, (
        (55.46, 55.43),),                                      # run C | run D, GPU 0
        f"{GPU}: runs C and D, one value each"),
    Figure("nccl-tests all_reduce 10 GiB busbw", "GB/s", True, (
        (346.0, 351.1, 346.6), (350.2, 351.0, 347.4)),         # out of place | in place
        f"{GPU}: runs A/B, ours, 3 rounds out of place and in place"),
    Figure("osu_bw H-D same NUMA 256 MiB", "GB/s", True, (
        (8.8, 9.3, 9.5), (9.2, 9.1, 8.3),                      # run C ours | hand
        (8.88, 9.41, 8.57), (8.66, 9.19, 7.82),                # CMA on | off
        (7.5, 7.4, 8.1), (8.4, 7.4, 8.3)),                     # runs A/B ours | hand
        f"{GPU}: runs C (with CMA on/off) and A/B, 6 sets of 3 rounds"),
    Figure("osu_bw D-H same NUMA 256 MiB", "GB/s", True, (
        (14.4, 14.6, 15.1), (15.0, 15.2),
        (15.27, 14.69, 12.88), (14.89, 13.62, 13.88),
        (12.8, 14.8, 13.9), (12.1, 11.9, 13.8)),
        f"{GPU}: runs C (with CMA on/off) and A/B, 6 sets of 2-3 rounds"),
    Figure("osu_latency D-D 1 B", "us", False, (
        (15.35, 15.84, 16.64), (16.44, 16.80, 15.44),
        (15.64, 16.23, 17.05), (16.54, 15.08, 17.16),
        (17.76, 17.68, 17.98), (16.55, 16.55, 15.66),
        (16.90, 16.21, 16.54, 17.22, 18.38, 18.63, 19.17, 16.97),   # 8 alternating pairs
        (16.29, 16.44, 17.60, 16.62, 18.43, 18.03, 17.70, 18.18)),
        f"{GPU}: runs C (with CMA on/off) and A/B, 6 sets of 3 rounds and 2 of 8"),
    Figure("osu_latency H-D same NUMA 1 B", "us", False, (
        (8.17, 7.81, 8.44), (7.81, 9.27, 8.37),
        (8.06, 9.21, 7.91), (8.99, 8.96, 7.95)),
        f"{GPU}: runs C and A/B, 4 sets of 3 rounds"),
    Figure("loopback cluster osu_latency 2 nodes 1 B", "us", False, (), (
        "docs/cluster.md records only a range across pairs of one sweep (41-900 us), "
        "not a node's run-to-run spread: sigma 0.5 assumed, log-normal"), assumed=0.5,
        noise="lognormal"),
)


def noisy(rng: random.Random, sigma: float, count: int, noise: str) -> list[float]:
    """``count`` values of a figure of 1 with relative spread ``sigma``."""
    if noise == "lognormal":
        return [math.exp(sigma * rng.gauss(0.0, 1.0)) for _ in range(count)]
    return [1.0 + sigma * rng.gauss(0.0, 1.0) for _ in range(count)]


def worse(series: list[float], start: int, drop: float, higher_is_better: bool) -> list[float]:
    """``series`` with every value from ``start`` on worse by ``drop`` (a fraction)."""
    factor = (1 - drop) if higher_is_better else (1 + drop)
    return series[:start] + [v * factor for v in series[start:]]


# --------------------------------------------------------------------------- the fleet

@dataclass
class Fleet:
    """A synthetic fleet of one figure: per sweep, the median of the noise-only nodes'
    values (the peers of every node judged) and the figure's pooled residual MAD."""

    figure: Figure
    noise: list[list[float]]
    medians: list[float]
    mads: list[float | None]
    #: the REF rule's cluster medians, by its k (--against)
    ref_medians: dict[int, list[float]] = field(default_factory=dict)

    def residuals(self, series: Sequence[float]) -> list[float]:
        return [drift.worse_by(v, m, self.figure.higher_is_better)
                for v, m in zip(series, self.medians)]

    def judge(self, residuals: Sequence[float], t: int) -> drift.Assessment | None:
        """The rule at sweep ``t`` (0-based), on the newest HORIZON residuals."""
        mad = self.mads[t]
        if mad is None:
            return None
        return drift.assess(residuals[max(0, t + 1 - drift.HORIZON):t + 1], mad)


def fleet_of(figure: Figure, noise: list[list[float]]) -> Fleet:
    medians = [statistics.median(s[t] for s in noise) for t in range(SWEEPS)]
    fleet = Fleet(figure, noise, medians, [])
    residuals = [fleet.residuals(s) for s in noise]
    fleet.mads = [drift.residual_mad(r[max(0, t + 1 - drift.HORIZON):t + 1] for r in residuals)
                  for t in range(SWEEPS)]
    return fleet


def ever(fleet: Fleet, series: Sequence[float], sweeps: range,
         what: Callable[[drift.Assessment], bool]) -> bool:
    residuals = fleet.residuals(series)
    for t in sweeps:
        found = fleet.judge(residuals, t)
        if found is not None and what(found):
            return True
    return False


def share(fleet: Fleet, many: Sequence[Sequence[float]], sweeps: range,
          what: Callable[[drift.Assessment], bool]) -> float:
    return sum(ever(fleet, s, sweeps, what) for s in many) / len(many)


def flagged(found: drift.Assessment) -> bool:
    return found.beyond


def drained(found: drift.Assessment) -> bool:
    return found.persists


def detection(fleet: Fleet, base: Sequence[list[float]], drop: float,
              what: Callable[[drift.Assessment], bool] = flagged) -> float:
    dropped = [worse(s, HEALTHY, drop, fleet.figure.higher_is_better) for s in base]
    return share(fleet, dropped, range(HEALTHY, HEALTHY + 3), what)


def smallest(test: Callable[[float], float], start: float = 0.05, step: float = 0.001,
             limit: float = 50.0) -> float:
    """The smallest x with test(x) >= 95 %, to ``step`` (bisection)."""
    low, high = 0.0, start
    while test(high) < TARGET_DETECTION:
        low, high = high, high * 2
        if high > limit:
            return math.inf
    while high - low > step:
        middle = (low + high) / 2
        if test(middle) >= TARGET_DETECTION:
            high = middle
        else:
            low = middle
    return high


def declining(series: list[float], rate: float, higher: bool) -> list[float]:
    """``series`` worse by ``rate`` more every sweep from HEALTHY on."""
    return [v if t < HEALTHY else
            v * ((1 - rate * (t - HEALTHY + 1)) if higher else (1 + rate * (t - HEALTHY + 1)))
            for t, v in enumerate(series)]


def decline_detected(fleet: Fleet, base: Sequence[list[float]], rate: float) -> float:
    slid = [declining(s, rate, fleet.figure.higher_is_better) for s in base]
    return share(fleet, slid, range(HEALTHY, SWEEPS), flagged)


def fallen_when_flagged(fleet: Fleet, base: Sequence[list[float]], rate: float) -> float:
    """The median of how far (rate x sweeps) the declining series had fallen when first
    flagged (series never flagged left out)."""
    fallen = []
    for s in base:
        residuals = fleet.residuals(declining(s, rate, fleet.figure.higher_is_better))
        for t in range(HEALTHY, SWEEPS):
            found = fleet.judge(residuals, t)
            if found is not None and found.beyond:
                fallen.append(rate * (t - HEALTHY + 1))
                break
    return statistics.median(fallen) if fallen else math.inf


def improved_then_back(series: list[float], higher: bool) -> list[float]:
    """10 % better for 12 sweeps from HEALTHY, then level with the fleet again."""
    factor = 1.10 if higher else 0.90
    return [v * factor if HEALTHY <= t < HEALTHY + 12 else v for t, v in enumerate(series)]


def bimodal(series: list[float], higher: bool, rng: random.Random) -> list[float]:
    """10 % better at 40 % of its sweeps."""
    factor = 1.10 if higher else 0.90
    return [v * factor if rng.random() < 0.4 else v for v in series]


# --------------------------------------------------------------------------- the REF rule

def load_rule(ref: str) -> ModuleType:
    """The drift module of git revision ``ref`` (it reads the same store)."""
    text = subprocess.run(["git", "show", f"{ref}:src/ocibench/history/drift.py"],
                          check=True, capture_output=True, text=True).stdout
    where = Path(tempfile.mkdtemp()) / "drift_ref.py"
    where.write_text(text)
    spec = importlib.util.spec_from_file_location("drift_ref", where)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def ref_marks(old: ModuleType, fleet: Fleet, series: Sequence[float]) -> tuple[bool, bool]:
    """(flagged, drained) after HEALTHY under the REF rule: raw values against the
    node's own baseline and the cluster's median of the last k sweeps, drained when
    flagged at two sweeps running (its sweep's "flagged at the previous sweep too")."""
    k = old.RECENT_K
    higher = fleet.figure.higher_is_better
    others = fleet.noise[:old.POOL - 1]
    if k not in fleet.ref_medians:   # the cluster's median of each sweep's last k
        fleet.ref_medians[k] = [statistics.median(v for s in fleet.noise
                                                  for v in s[max(0, t + 1 - k):t + 1])
                                for t in range(SWEEPS)]
    marks = []
    for t in range(HEALTHY, SWEEPS):
        seen = list(series[:t + 1])
        mad = old.figure_mad([seen] + [o[:t + 1] for o in others])
        cluster = fleet.ref_medians[k][t]
        marks.append(mad is not None and old.flags(seen, cluster, higher, mad=mad) is not None)
    return any(marks), any(a and b for a, b in zip(marks, marks[1:]))


# --------------------------------------------------------------------------- results

def pct(value: float | None) -> str:
    return "-" if value is None else ("never" if math.isinf(value) else f"{100 * value:.1f} %")


def run_figure(figure: Figure, count: int, old: ModuleType | None) -> list[str]:
    rng = random.Random(f"{SEED}/{figure.name}")
    sigma = figure.sigma
    noise = [noisy(rng, sigma, SWEEPS, figure.noise) for _ in range(count)]
    base = [noisy(rng, sigma, SWEEPS, figure.noise) for _ in range(count)]
    fleet = fleet_of(figure, noise)
    target = max(0.05, 4 * sigma)
    false_flag = share(fleet, noise, range(SWEEPS), flagged)
    false_drain = share(fleet, noise, range(SWEEPS), drained)
    found = detection(fleet, base, target)
    found_drained = detection(fleet, base, target, drained)
    small = smallest(lambda d: detection(fleet, base, d))
    rate = smallest(lambda r: decline_detected(fleet, base, r), start=0.002, step=0.0002,
                    limit=1.0)
    fallen = fallen_when_flagged(fleet, base, rate) if not math.isinf(rate) else math.inf
    met = found >= TARGET_DETECTION and false_flag <= TARGET_FALSE
    rows = [f"| {figure.name} | {figure.noise} | {pct(target)} | {pct(found)} | "
            f"{pct(found_drained)} | {pct(false_flag)} | {pct(false_drain)} | {pct(small)} | "
            f"{100 * rate:.2f} % a sweep ({pct(fallen)}) | {'met' if met else '**missed**'} |"]
    # the scenarios: the share flagged / drained after sweep HEALTHY
    higher = figure.higher_is_better
    rng = random.Random(f"{SEED}/{figure.name}/scenarios")
    scenarios = {"improvement that ends": [improved_then_back(s, higher) for s in base],
                 "bimodal (10 % better at 40 % of sweeps)": [bimodal(s, higher, rng)
                                                             for s in base]}
    for name, many in scenarios.items():
        new = (share(fleet, many, range(HEALTHY, SWEEPS), flagged),
               share(fleet, many, range(HEALTHY, SWEEPS), drained))
        was = "-"
        if old is not None:
            marks = [ref_marks(old, fleet, s) for s in many]
            was = (f"{pct(sum(m[0] for m in marks) / len(marks))} / "
                   f"{pct(sum(m[1] for m in marks) / len(marks))}")
        rows.append(f"| {figure.name} | {name} | {pct(new[0])} / {pct(new[1])} | {was} |")
    return rows


# --------------------------------------------------------------------------- a fleet shift

SHIFT_NODES, SHIFT_FIGURES, SHIFT_SWEEPS, CHANGE = 100, 10, 30, 21


def shift_sweep(sweep: int, rng: random.Random) -> list[Record]:
    """One sweep of 100 nodes x 10 osu_bw sizes, 1 % noise; from sweep 21 every value
    10 % lower, on driver 560.35.03 (550.127.08 before)."""
    after = sweep >= CHANGE
    return [Record(node=f"node{n:03d}", check="osu_bw", variant="buffers=D-D nodes=2",
                   size=2 ** (10 + f), figure="bandwidth", unit="GB/s", verdict="pass",
                   value=390.0 * (0.9 if after else 1.0) * (1 + rng.gauss(0, 0.01)),
                   time=1_700_000_000.0 + 86400 * sweep, session=f"sweep-{sweep:02d}",
                   image="OL8", driver="560.35.03" if after else "550.127.08")
            for n in range(SHIFT_NODES) for f in range(SHIFT_FIGURES)]


def fleet_shift(old: ModuleType | None) -> list[str]:
    """Each sweep added to a real history, then judged by each rule, as the sweep does."""
    rules = [("this rule", drift)] + ([("REF rule", old)] if old is not None else [])
    flagged_at: dict[str, list[set[str]]] = {name: [] for name, _ in rules}
    drained: dict[str, set[str]] = {name: set() for name, _ in rules}
    rng = random.Random(f"{SEED}/fleet-shift")
    with tempfile.TemporaryDirectory() as where:
        with History(Path(where) / "shift.sqlite") as history:
            for sweep in range(1, SHIFT_SWEEPS + 1):
                history.add(shift_sweep(sweep, rng))
                if sweep < CHANGE:
                    continue
                nodes = history.nodes()
                for name, rule in rules:
                    found = rule.drifting_nodes(history, nodes)
                    now = {n for n, d in found.items() if d}
                    if rule is drift:   # persistence: two separate low sweeps
                        drained[name] |= {n for n, d in found.items()
                                          if any(x.persists for x in d)}
                    elif flagged_at[name]:   # REF: flagged at the previous sweep too
                        drained[name] |= now & flagged_at[name][-1]
                    flagged_at[name].append(now)
            events = drift.cluster_events(history)
    rows = [f"| {name} | {len(flagged_at[name][0])} | {len(set().union(*flagged_at[name]))} "
            f"| {len(drained[name])} | {len(events) if rule is drift else '-'} |"
            for name, rule in rules]
    rows += [f"\nfirst of the cluster events: {event.text}" for event in events[:1]]
    return rows


# --------------------------------------------------------------------------- speed

def speed(path: Path, rounds: int, old: ModuleType | None, old_nodes: int) -> None:
    with History(path, readonly=True) as history:
        nodes = history.nodes()
        values = history._db.execute("SELECT count(*) FROM results").fetchone()[0]
    print(f"history: {path}, {len(nodes)} nodes, {values:,} values; {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}")
    walls, cpus, found = [], [], 0
    for _ in range(rounds):
        with History(path, readonly=True) as history:
            started, cpu = time.perf_counter(), time.process_time()
            result = drift.drifting_nodes(history, nodes)
            walls.append(time.perf_counter() - started)
            cpus.append(time.process_time() - cpu)
        found = sum(1 for d in result.values() if d)
    print(f"| drift.drifting_nodes, all {len(nodes)} nodes | {statistics.median(walls):.1f} s "
          f"| {min(walls):.1f} to {max(walls):.1f} s | {statistics.median(cpus):.1f} s | "
          f"{found} nodes drifting |")
    if old is not None:
        with History(path, readonly=True) as history:
            started, cpu = time.perf_counter(), time.process_time()
            old.drifting_nodes(history, nodes[:old_nodes])
            wall, used = time.perf_counter() - started, time.process_time() - cpu
        print(f"| REF rule's drifting_nodes, {old_nodes} nodes | {wall:.1f} s | - | "
              f"{used:.1f} s | about {wall * len(nodes) / old_nodes:.0f} s for "
              f"{len(nodes)} nodes, linearly |")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=1000,
                        help="nodes of each synthetic fleet (and series judged)")
    parser.add_argument("--figures", type=int, default=len(FIGURES),
                        help="only the first N figures")
    parser.add_argument("--against", metavar="REF",
                        help="also the drift rule of this git revision (e.g. main)")
    parser.add_argument("--speed", type=Path, metavar="DB",
                        help="only time drifting_nodes over the history DB")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ref-nodes", type=int, default=10,
                        help="nodes the REF rule is timed on (--speed)")
    args = parser.parse_args(argv)
    old = load_rule(args.against) if args.against else None
    if args.speed:
        speed(args.speed, args.rounds, old, args.ref_nodes)
        return 0
    print("| figure | unit | sigma (scaled MAD) | recorded spread |")
    print("|---|---|---:|---|")
    for figure in FIGURES[:args.figures]:
        print(f"| {figure.name} | {figure.unit} | {100 * figure.sigma:.2f} % | {figure.source} |")
    print(f"\nfleet-wide shift at a driver change ({SHIFT_NODES} nodes x {SHIFT_FIGURES} "
          f"figures, 10 % worse from sweep {CHANGE} of {SHIFT_SWEEPS}):\n")
    print("| rule | nodes flagged at the change's sweep | flagged at any of sweeps 21-30 "
          "| drained | cluster events |")
    print("|---|---:|---:|---:|---:|")
    for row in fleet_shift(old):
        print(row, flush=True)
    print(f"\n{args.series} series per figure:\n")
    print("| figure | noise | target drop | flagged within 3 sweeps | drained within 3 "
          "sweeps | noise flagged in 52 sweeps | noise drained | smallest drop flagged "
          "(95 %) | slowest decline flagged (95 %; fallen when flagged) | targets |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    scenario_rows = []
    for figure in FIGURES[:args.figures]:
        rows = run_figure(figure, args.series, old)
        print(rows[0], flush=True)
        scenario_rows += rows[1:]
    print("\nscenarios: the share of series flagged / drained after sweep 20\n")
    print("| figure | scenario | this rule | REF rule |")
    print("|---|---|---:|---:|")
    for row in scenario_rows:
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
