"""The vocabulary of judgement, stated once: metrics, units, directions and verdicts.

Every module that names a metric, converts a unit to GB/s or speaks a verdict imports
it from here: the shape files' validation, the output parsers, the judgement
(:mod:`ocibench.figures.judge`), the ReFrame checks, ``ocibench evaluate`` and the report.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass


class Verdict(str, enum.Enum):
    """The verdict on one measured figure.

    A ``str`` enum, so that JSON files and ReFrame variables carry the plain word.
    """

    PASS = "pass"
    FAIL = "fail"
    #: Within the bounds but far better than documented: reported, never failed.  An
    #: impossible value (above the physical limit, zero, NaN) is FAIL, not this.
    SUSPICIOUS = "suspicious"
    #: Nothing is documented for this figure on this shape (e.g. the local shape).
    NO_REFERENCE = "no reference"

    def __str__(self) -> str:
        return self.value


VERDICTS: tuple[Verdict, ...] = tuple(Verdict)


class RunVerdict(str, enum.Enum):
    """The verdict on one run (an output, a live check, a report entry): three states,
    and a fourth word for a shape that documents nothing.

    Never let "could not judge" become a pass or a fail: a run whose values were not
    compared with anything is UNJUDGED, with the reason (the line it could not read, the
    variant or sizes no figure documents, the method that differs from the figure's),
    and UNJUDGED never drains a node.
    """

    #: At least one documented figure or floor was compared, and every compared one held.
    PASS = "pass"
    #: A compared figure missed, or the run proved broken (a crash, ``#wrong``,
    #: out-of-bounds values, a truncated output, an impossible value, a wrong path).
    FAIL = "fail"
    #: The output is sane as far as it could be read, but nothing could be compared: no
    #: figure matches its variant or sizes, its method differs from the figure's, or its
    #: format is one the parser does not know (the reason names the line).
    UNJUDGED = "unjudged"
    #: A sane output on a shape that documents nothing for the check (``local``): its
    #: values are recorded, and nothing was compared.
    RECORDED = "recorded"

    def __str__(self) -> str:
        return self.value


RUN_VERDICTS: tuple[RunVerdict, ...] = tuple(RunVerdict)

#: How a live check words a run it could not judge (checks/base.py, checks/preflight.py):
#: the report and the sweep read a failure with these words as UNJUDGED, never as the
#: node's failure.
COULD_NOT_JUDGE = "could not judge"


def could_not_judge(why: str) -> str:
    """The failure reason of a run that could not be judged: "could not judge: <why>"."""
    return f"{COULD_NOT_JUDGE}: {why}"


def unjudged_in(reason: object) -> str | None:
    """The "could not judge: ..." part of a failure reason (ReFrame puts its own words
    before it), or None when the reason is no such failure."""
    text = reason if isinstance(reason, str) else ""
    start = text.lower().find(COULD_NOT_JUDGE)
    return " ".join(text[start:].split()) if start >= 0 else None


class NodeVerdict(str, enum.Enum):
    """The verdict on one node of a cluster (``ocibench sweep``, docs/sweep.md), listed
    from best to worst: a node's verdict is the worst of its checks'."""

    PASS = "pass"
    #: No check could be judged on the node: none ran there (the plan had no job for it:
    #: too few nodes for the selected checks, every case skipped), a check's run could
    #: not be judged (:attr:`RunVerdict.UNJUDGED`; a live check then fails saying "could
    #: not judge"), or the sweep stopped before judging it.  Never a pass, never drained:
    #: the reason says why, and the action is at most rerun.
    UNJUDGED = "unjudged"
    #: Passes every check of this sweep, but a figure has slipped below the node's own
    #: past and below the cluster's median (``ocibench.history.drift``): rerun, and
    #: drain when the previous sweep flagged it too.
    DRIFTING = "drifting"
    #: Within tolerance of the documented figure (or nothing is documented) but more
    #: than K robust deviations worse than the cluster's median of that figure.
    OUTLIER = "outlier"
    FAIL = "fail"
    #: Down, drained, busy or never started its job: Slurm's reason says why.
    UNREACHABLE = "unreachable"

    def __str__(self) -> str:
        return self.value


NODE_VERDICTS: tuple[NodeVerdict, ...] = tuple(NodeVerdict)


class Action(str, enum.Enum):
    """What an admin does about a node that did not pass, listed from mildest to most
    severe: a node's action is the most severe of its checks'."""

    #: Noise, or an outlier seen once: run the sweep again before acting.
    RERUN = "rerun"
    #: The node's software: a module that does not load, an MPI that is not
    #: CUDA-aware, a capability the build or the kernel modules lack.
    FIX_SOFTWARE = "fix-software"
    #: Hardware or fabric: a link, a GPU, a port, a figure too slow for the shape.
    DRAIN = "drain"

    def __str__(self) -> str:
        return self.value


ACTIONS: tuple[Action, ...] = tuple(Action)


@dataclass(frozen=True)
class Metric:
    name: str
    title: str
    higher_is_better: bool
    #: The units a figure or an output of this metric may be stated in.
    units: tuple[str, ...]


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("latency", "Latency", False, ("us",)),
    # OMB, IMB and STREAM print MB/s (1e6 B/s); perftest with --report_gbits prints Gb/s.
    Metric("bandwidth", "Bandwidth", True, ("MB/s", "Gb/s")),
    # nccl-tests' bus bandwidth, GB/s (1e9 B/s).
    Metric("busbw", "Bus bandwidth", True, ("GB/s",)),
)}

#: GB/s (1e9 B/s, the unit of the shape files' links and memory bandwidth) per unit.
GBS_PER_UNIT: dict[str, float] = {"MB/s": 1e-3, "GB/s": 1.0, "Gb/s": 0.125}

#: Every unit a figure may carry; latency's "us" is microseconds.
UNITS: tuple[str, ...] = ("us", *GBS_PER_UNIT)


class UnknownMetric(ValueError):
    """A metric or unit outside this vocabulary; the message is one line."""


def metric(name: str) -> Metric:
    if name not in METRICS:
        raise UnknownMetric(f"unknown metric {name!r}; known: {', '.join(METRICS)}")
    return METRICS[name]


def default_unit(name: str) -> str:
    """The unit a benchmark of this metric prints unless it says otherwise."""
    return metric(name).units[0]


def to_gbs(value: float, unit: str) -> float | None:
    """``value`` in GB/s, or None for a unit that is no rate (latency)."""
    factor = GBS_PER_UNIT.get(unit)
    return None if factor is None else value * factor


def convert(value: float, unit: str, to: str) -> float:
    """A rate from one unit to another (MB/s to Gb/s, ...); a unit to itself is as is."""
    if unit == to:
        return value
    if unit not in GBS_PER_UNIT or to not in GBS_PER_UNIT:
        raise UnknownMetric(f"cannot convert {unit!r} to {to!r}")
    return value * GBS_PER_UNIT[unit] / GBS_PER_UNIT[to]


def is_number(value: object) -> bool:
    """A finite int or float (bool, NaN, inf and strings are not)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))
