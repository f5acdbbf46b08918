"""The figures and the healthcheck as Prometheus metrics, for node_exporter's textfile
collector (docs/monitoring.md).

Two sources, one format:

* the head node renders the history database (ocibench.history.store): per node,
  check and figure, its latest value, the documented figure, the floor, the verdict,
  the run's time, and the drift flags (ocibench.history.drift);
* each node renders its own healthcheck state file (ocibench.health.state): every
  probe's state with its last run and duration, and the run's own last run, duration
  and expected interval: the freshness OCI's node-problem detector for OKE exports.

The text is the Prometheus text exposition format 0.0.4, the one node_exporter's
textfile collector parses (prometheus/node_exporter collector/textfile.go reads it with
prometheus/common expfmt.TextParser); it takes no timestamps, so a run's time is a
``*_timestamp_seconds`` gauge.  Names follow Prometheus' naming conventions
(prometheus.io/docs/practices/naming): base units in the name (seconds,
bytes_per_second, ratio), and an enum as one series per state with the current one
at 1 (prometheus.io/docs/instrumenting/writing_exporters, "Enums"; OpenMetrics calls
it a StateSet, which the 0.0.4 format spells as a gauge).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ocibench import atomic, metrics
from ocibench.health import state as health_state
from ocibench.node import module_audit

PREFIX = "ocibench_"

#: Every verdict a figure's record may carry (history Record.verdict): the figure's
#: own (metrics.Verdict) and the run's (metrics.RunVerdict), each word once.
FIGURE_VERDICTS: tuple[str, ...] = tuple(dict.fromkeys(
    [v.value for v in metrics.RUN_VERDICTS] + [v.value for v in metrics.VERDICTS]))


#: The healthcheck's expected interval where its state does not say (slurm.conf not
#: readable on the node): the HealthCheckInterval docs/healthcheck.md sets (oci-hpc's).
DEFAULT_INTERVAL_S = 300


class ExportError(ValueError):
    """The metrics cannot be written; one line naming the file."""


def base_unit(unit: str) -> tuple[str, float] | None:
    """The Prometheus base unit of a figure's unit and the factor to it; None for a
    unit the vocabulary does not know.  Rates go through metrics.GBS_PER_UNIT (GB/s is
    1e9 B/s there); latency's "us" is microseconds."""
    if unit == "us":
        return "seconds", 1e-6
    per_gbs = metrics.GBS_PER_UNIT.get(unit)
    if per_gbs is None:
        return None
    return "bytes_per_second", per_gbs * 1e9


# -- the text format ---------------------------------------------------------------

def escape_label(value: str) -> str:
    """A label value as the text format quotes it: backslash, double quote and line
    feed escaped (prometheus/common expfmt, text_create.go writeEscapedString)."""
    return value.replace("\\", r"\\").replace('"', r"\"").replace("\n", r"\n")


def escape_help(text: str) -> str:
    """HELP text escapes backslash and line feed only (the same file)."""
    return text.replace("\\", r"\\").replace("\n", r"\n")


def format_value(value: float | int) -> str:
    """Go's ParseFloat reads Python's shortest repr; whole numbers (states, epoch
    seconds) are written without ".0"; the specials have their own words."""
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


def labels(**pairs: str) -> str:
    """Label pairs as the text format writes them between braces, values escaped.
    Rendered once per figure or probe and shared by its families: a head node's file
    holds 1,000 nodes x 50 figures x 11 series."""
    return ",".join(f'{key}="{escape_label(value)}"' for key, value in pairs.items())


def with_label(base: str, key: str, value: str) -> str:
    extra = f'{key}="{escape_label(value)}"'
    return f"{base},{extra}" if base else extra


@dataclass
class Family:
    """One metric family: a gauge, its help, and its samples (label text, value)."""

    name: str
    help: str
    samples: list[tuple[str, float]] = field(default_factory=list)

    def add(self, label_text: str, value: float) -> None:
        self.samples.append((label_text, value))

    def lines(self) -> Iterator[str]:
        if not self.samples:
            return  # a family with no samples is left out, HELP and TYPE included
        yield f"# HELP {self.name} {escape_help(self.help)}"
        yield f"# TYPE {self.name} gauge"
        for text, value in self.samples:
            series = f"{self.name}{{{text}}}" if text else self.name
            yield f"{series} {format_value(value)}"


def render(families: Iterable[Family]) -> str:
    """The exposition text: each family's HELP, TYPE and samples together, once."""
    return "".join(line + "\n" for family in families for line in family.lines())


def state_set(family: Family, base: str, key: str, states: Iterable[str],
              current: str) -> None:
    """One series per state, the current one 1 and the others 0; a current state
    outside ``states`` still gets its series (at 1), never silently none."""
    for name in dict.fromkeys([*states, current]):
        family.add(with_label(base, key, name), 1 if name == current else 0)


# -- the figures, from the history --------------------------------------------------

def figure_labels(record) -> str:
    """The labels naming one figure of one node: size-less figures get size="" (the
    same as no size label to PromQL)."""
    return labels(node=record.node, check=record.check, variant=record.variant,
                  size="" if record.size is None else str(record.size), figure=record.figure)


def figure_families(records: Iterable, drifts: Iterable = ()) -> tuple[list[Family], list[str]]:
    """The figures' families from history Records (each node's latest) and the drift
    flags (history.drift.Drift) on them, and one line per record left out (a unit
    with no base unit)."""
    fam: dict[str, Family] = {}

    def family(name: str, text: str) -> Family:
        return fam.setdefault(name, Family(PREFIX + name, text))

    flagged = {(d.node, d.check, d.variant, d.size, d.figure): d for d in drifts}
    skipped = []
    repeat: dict[str, bool] = {}
    for record in records:
        names = figure_labels(record)
        unit = base_unit(record.unit)
        if unit is None:
            skipped.append(f"{record.node} {record.check} {record.figure}: unit "
                           f"{record.unit!r} has no Prometheus base unit: not exported")
            continue
        suffix, factor = unit
        family(f"figure_value_{suffix}", "The figure's latest measured value, in base "
               "units.").add(names, record.value * factor)
        if record.documented is not None:
            family(f"figure_documented_{suffix}", "The figure the shape documents "
                   "(site/shapes), in base units.").add(names, record.documented * factor)
        if record.floor is not None:
            family(f"figure_floor_{suffix}", "The worst value that still passes (the "
                   "tolerance policy): a floor for a rate, a ceiling for a latency."
                   ).add(names, record.floor * factor)
        state_set(family("figure_verdict", "The latest verdict on the figure: 1 for the "
                         "current verdict, 0 for the others."),
                  names, "verdict", FIGURE_VERDICTS, record.verdict)
        family("figure_last_run_timestamp_seconds", "When the run that measured the "
               "latest value ran, in seconds since the epoch.").add(names, record.time)
        drift = flagged.pop((record.node, record.check, record.variant, record.size,
                             record.figure), None)
        family("figure_drifting", "1 when the node's recent median of the figure has fallen "
               "behind its peers of the same sweeps, beyond where it usually sits among them "
               "(history.drift), else 0."
               ).add(names, 1 if drift else 0)
        if drift is not None:
            family("figure_drift_drop_ratio", "How much worse the recent median is than "
                   "the node's usual place among its peers (lower for a rate, higher for a "
                   "latency), as a fraction of the peers' median.").add(names, drift.drop)
            family("figure_drift_threshold_ratio", "The drop beyond which the figure is "
                   "flagged (history.drift), as a fraction of the peers' median."
                   ).add(names, drift.threshold)
        offender = drift is not None and drift.repeat_offender
        repeat[record.node] = repeat.get(record.node, False) or offender
    for drift in flagged.values():  # a flag on no latest record: say so, never drop it
        skipped.append(f"{drift.node} {drift.check} {drift.figure}: drift flag on a figure "
                       "with no latest record: not exported")
    offenders = family("node_repeat_offender", "1 when the node was flagged drifting, "
                       "drained, returned and flagged again (history.drift), else 0.")
    for node, value in repeat.items():
        offenders.add(labels(node=node), 1 if value else 0)
    return list(fam.values()), skipped


def from_history(path: Path, now: float | None = None) -> tuple[list[Family], list[str]]:
    """Every node's latest figures and drift flags from the history database."""
    # here, not at the top: every ocibench command (the healthcheck, with its 5 s budget,
    # included) imports this module through `ocibench metrics`; only this export needs these
    from ocibench.history import drift, store

    try:
        with store.History(path, readonly=True) as history:
            # The fleet at once: its newest records read session by session, and its
            # drift in one pass (never node by node: 1,000 nodes x 50 figures, docs/
            # monitoring.md, "Size").
            records = history.newest()
            found = drift.drifting_nodes(history, history.nodes(), now=now)
    except store.HistoryError as err:  # one line naming the file, already
        raise ExportError(str(err)) from None
    return figure_families(records, [d for drifts in found.values() for d in drifts])


# -- the healthcheck, from its state file ------------------------------------------

def health_families(state: health_state.HealthState) -> list[Family]:
    """The healthcheck's freshness and probe states from one node's state file."""
    node = labels(node=state.node)
    last = Family(PREFIX + "healthcheck_last_run_timestamp_seconds", "When the node's "
                  "last healthcheck started, in seconds since the epoch.")
    last.add(node, state.time)
    took = Family(PREFIX + "healthcheck_duration_seconds", "How long the node's last "
                  "healthcheck took.")
    took.add(node, state.duration_s)
    interval = Family(PREFIX + "healthcheck_interval_seconds", "How often the healthcheck "
                      "is expected to run: Slurm's HealthCheckInterval, or "
                      f"{DEFAULT_INTERVAL_S} s where the run could not read it.")
    # always there: without it the staleness alert could never fire on the node
    interval.add(node, state.interval_s or DEFAULT_INTERVAL_S)
    action = Family(PREFIX + "healthcheck_action", "What the last healthcheck did to the "
                    "node in Slurm: 1 for its action, 0 for the others.")
    state_set(action, node, "action", health_state.ACTIONS, state.action)
    drained = Family(PREFIX + "healthcheck_drained", "1 while Slurm holds a drain the "
                     "healthcheck wrote on the node (the state file's drained_reason), else "
                     "0; a person's drain is not counted.")
    drained.add(node, 1 if state.drained_reason else 0)
    probe_state = Family(PREFIX + "healthcheck_probe_state", "Each probe's state in the "
                         "last healthcheck: 1 for its state (pass, fail, unknown), 0 for the "
                         "others; unknown never drains.")
    probe_last = Family(PREFIX + "healthcheck_probe_last_run_timestamp_seconds", "When the "
                        "probe last ran, in seconds since the epoch.")
    probe_took = Family(PREFIX + "healthcheck_probe_duration_seconds", "How long the probe "
                        "took in the last healthcheck.")
    for probe in state.probes:
        names = labels(node=state.node, probe=probe.name)
        state_set(probe_state, names, "state", health_state.STATES, probe.state)
        probe_last.add(names, probe.time)
        probe_took.add(names, probe.duration_s)
    return [last, took, interval, action, drained, probe_state, probe_last, probe_took]


def from_state(path: Path) -> list[Family]:
    """The families of the state file at ``path``; an ExportError when no healthcheck
    has written it yet (a StateError, naming the file, when it is not one)."""
    state = health_state.read(path)
    if state is None:
        raise ExportError(f"{path}: no healthcheck state yet (has `ocibench healthcheck` "
                          "run on this node?)")
    return health_families(state)


# -- the file node_exporter reads ---------------------------------------------------

def write_textfile(text: str, path: Path) -> None:
    """Replace ``path`` atomically: node_exporter reads every *.prom file in its
    directory at each scrape, so the text goes to a hidden name that does not end in
    .prom in the same directory (the same filesystem: rename is atomic there),
    synced, then renamed over the target.  Only in a directory nobody but root (or
    the caller) can change, as the module audit judges one: in another user's (Debian
    makes node_exporter's directory ``prometheus``'s) that user could swap the names
    root writes; refused, in one line."""
    path = Path(path)
    problems = module_audit.audit_directory(path.parent, "the directory of the textfile")
    if problems:
        raise ExportError(problems[0])
    try:
        atomic.replace(path, text, mode=0o644)  # node_exporter runs as its own user
    except OSError as err:
        raise ExportError(f"cannot write {path}: {err.strerror or err}") from None
