#!/usr/bin/env python3
"""The drift rule's benchmark (issue 23, item 3; the method and the results: docs/drift.md).

For each figure whose run-to-run spread this project recorded (docs/gpu-results.md's
rounds), 1,000 synthetic nodes of one cluster, each a series of 52 sweeps of that figure
with that spread, run through the rule the sweep runs (``ocibench.history.drift.flags``):

* **false flags**: the share of noise-only series flagged at any sweep of the 52;
* **detection**: 1,000 more series, healthy for :data:`HEALTHY` sweeps and then worse by a
  sustained drop of max(5 %, 4 x the figure's MAD): the share flagged at the first, second
  or third sweep after the drop;
* **smallest drop**: the smallest sustained drop flagged within 3 sweeps in 95 % of the
  series (bisection, the same noise for every drop tried).

The cluster median the rule compares with is the median, over the 1,000 noise-only nodes,
of their values in the same recent sweeps, and the figure's MAD is pooled over the node
and 15 of them (``drift.figure_mad``, as ``drift.drifting`` takes it).  Noise is normal,
value = figure x (1 + sigma x N(0, 1)), sigma each figure's pooled relative standard
deviation; log-normal, figure x exp(sigma x N(0, 1)), for the loopback cluster's assumed
spread (a normal one would make latencies negative), and with --rules also for the
measured figures, to show what a skewed noise does.  Seeded: the same numbers every run.

"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from ocibench.history import drift

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


@dataclass(frozen=True)
class Rule:
    k: int = drift.RECENT_K
    pooled: bool = True     # the figure's MAD pooled over POOL nodes, else the node's own
    scaled: bool = True     # MAD x 1.4826 (an estimate of sigma), else the plain MAD
    min_baseline: int = drift.MIN_BASELINE

    @property
    def name(self) -> str:
        return (f"k={self.k}, {'pooled' if self.pooled else 'own'} "
                f"{'scaled' if self.scaled else 'raw'} MAD, baseline >= {self.min_baseline}")

    def options(self) -> dict[str, float]:
        # Unscaled, 3 x MAD is 3 x 0.6745 sigma: the same rule with a smaller factor.
        return {"k": self.k, "min_baseline": self.min_baseline,
                "mad_k": drift.MAD_K if self.scaled else drift.MAD_K / drift.MAD_SCALE}


@dataclass
class Cluster:
    """What the rule reads besides a node's own series, per sweep: the cluster's median
    of the last k sweeps over every node, and the nodes its MAD is pooled with."""

    medians: list[float | None]
    others: list[list[float]]


def cluster_of(noise: Sequence[Sequence[float]], k: int) -> Cluster:
    medians: list[float | None] = []
    for t in range(SWEEPS):
        medians.append(None if t + 1 < k else
                       statistics.median(v for s in noise for v in s[t + 1 - k:t + 1]))
    # The pool: the node itself and POOL - 1 others (as drift.drifting takes them).
    return Cluster(medians, [list(s) for s in noise[:drift.POOL - 1]])


def flagged_at(series: Sequence[float], t: int, cluster: Cluster, figure: Figure,
               rule: Rule) -> bool:
    seen = series[:t + 1]
    mad = None
    if rule.pooled:
        mad = drift.figure_mad([seen] + [o[:t + 1] for o in cluster.others if o is not series],
                               k=rule.k, min_baseline=rule.min_baseline)
        if mad is None:
            return False
    return drift.flags(seen, cluster.medians[t], figure.higher_is_better, mad=mad,
                       **rule.options()) is not None


def false_rate(noise: Sequence[Sequence[float]], cluster: Cluster, figure: Figure,
               rule: Rule) -> float:
    return sum(any(flagged_at(s, t, cluster, figure, rule) for t in range(SWEEPS))
               for s in noise) / len(noise)


def detection(base: Sequence[list[float]], drop: float, cluster: Cluster, figure: Figure,
              rule: Rule) -> float:
    hits = 0
    for series in base:
        dropped = worse(series, HEALTHY, drop, figure.higher_is_better)
        hits += any(flagged_at(dropped, t, cluster, figure, rule)
                    for t in range(HEALTHY, HEALTHY + 3))
    return hits / len(base)


def smallest_drop(base: Sequence[list[float]], cluster: Cluster, figure: Figure,
                  rule: Rule) -> float:
    """The smallest drop flagged within 3 sweeps in 95 % of ``base``, to 0.1 %."""
    low, high = 0.0, 0.05
    while detection(base, high, cluster, figure, rule) < TARGET_DETECTION:
        low, high = high, high * 2
        if high > 50:
            return math.inf
    while high - low > 0.001:
        middle = (low + high) / 2
        if detection(base, middle, cluster, figure, rule) >= TARGET_DETECTION:
            high = middle
        else:
            low = middle
    return high


@dataclass
class Result:
    figure: Figure
    rule: Rule
    target_drop: float
    false: float
    detected: float
    smallest: float | None

    @property
    def met(self) -> bool:
        return self.detected >= TARGET_DETECTION and self.false <= TARGET_FALSE


def run(figure: Figure, count: int, rule: Rule, smallest: bool,
        noise: str | None = None) -> Result:
    # One stream per figure and rule: a figure's numbers do not depend on the others'.
    rng = random.Random(f"{SEED}/{figure.name}/{rule.name}")
    sigma = figure.sigma
    model = noise or figure.noise
    series = [noisy(rng, sigma, SWEEPS, model) for _ in range(count)]
    base = [noisy(rng, sigma, HEALTHY + 3, model) for _ in range(count)]
    cluster = cluster_of(series, rule.k)
    mad = sigma if rule.scaled else sigma / drift.MAD_SCALE   # "the figure's MAD"
    target = max(0.05, 4 * mad)
    return Result(figure, rule, target, false_rate(series, cluster, figure, rule),
                  detection(base, target, cluster, figure, rule),
                  smallest_drop(base, cluster, figure, rule) if smallest else None)


def pct(value: float | None) -> str:
    return "-" if value is None else ("never" if math.isinf(value) else f"{100 * value:.1f} %")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=1000)
    parser.add_argument("--rules", action="store_true", help=(
        "also the other rules tried (k 1-4, own and unscaled MAD, skewed noise)"))
    args = parser.parse_args(argv)
    print("| figure | unit | sigma (scaled MAD) | recorded spread |")
    print("|---|---|---:|---|")
    for figure in FIGURES:
        print(f"| {figure.name} | {figure.unit} | {100 * figure.sigma:.2f} % | {figure.source} |")
    print()
    chosen = Rule()
    rules = [chosen]
    if args.rules:
        rules += [Rule(k) for k in (1, 3) if k != chosen.k]
        rules += [Rule(chosen.k, pooled=False), Rule(chosen.k, scaled=False)]
        rules += [Rule(min_baseline=n) for n in (5, 10)]
    print("| figure | rule | noise | target drop | flagged within 3 sweeps | noise flagged in 52 "
          "sweeps | smallest drop flagged (95 %) | targets |")
    print("|---|---|---|---:|---:|---:|---:|---|")

    def row(figure: Figure, rule: Rule, noise: str | None = None) -> None:
        r = run(figure, args.series, rule, smallest=rule == chosen and noise is None,
                noise=noise)
        print(f"| {figure.name} | {rule.name} | {noise or figure.noise} | {pct(r.target_drop)} "
              f"| {pct(r.detected)} | {pct(r.false)} | {pct(r.smallest)} "
              f"| {'met' if r.met else '**missed**'} |", flush=True)

    for figure in FIGURES:
        row(figure, chosen)
    # The other rules on the measured figures whose target is set by their spread (4 x
    # MAD above 5 %); below it, the 3 % floor decides, whatever the rule's MAD.
    noisy_figures = [f for f in FIGURES if f.assumed is None and 4 * f.sigma > 0.05]
    for rule in rules[1:]:
        for figure in noisy_figures:
            row(figure, rule)
    if args.rules:   # the chosen rule, with the measured figures' noise skewed
        for figure in noisy_figures:
            row(figure, chosen, "lognormal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
