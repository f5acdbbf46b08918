"""Judge one measured value: the single comparison that every verdict comes from.

``ocibench evaluate`` (a hand-run output), the live ReFrame checks (sanity, and the
references they hand ReFrame) and the report (which re-judges every input it reads)
all call :func:`judge`; nothing else compares a value with a figure.

A value is judged in three steps, each stated once here:

1. **Plausibility** (:func:`implausible`).  A value that cannot be a measurement fails
   whatever is documented: not a finite number; a zero rate or a zero latency; a rate
   above the physical limit of the link or memory that bounds it, by more than
   :data:`LIMIT_MARGIN`; any rate above :data:`ABSURD_GBS`, on a shape that knows no
   limit (``local``).
2. **Tolerance** (:mod:`ocibench.figures.policy`): against the documented figure, pass within
   the bound, fail outside it, "suspicious" when far better than documented.
3. **Floor**: OCI's own acceptance floor for the figure, where the shape file gives one
   (``floor:``, with its own source).  A value under the floor fails whatever the
   tolerance says, and the row keeps both verdicts so that the reader sees where they
   disagree.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ocibench import benchmarks, capabilities, metrics, shapes
from ocibench.figures import policy, references, ucx_proto
from ocibench.metrics import Verdict

#: A rate may exceed the nominal rate of the link or memory that bounds it by this much
#: before it is impossible.  The shape files state nominal rates (PCIe Gen4 x16 as 32 GB/s
#: where 128b/130b encoding leaves 31.5), and a benchmark's clock and rounding add a
#: little; 5 % is far below the 2x of a mislabelled run (host memory judged as a link,
#: MiB read as MB, both directions counted as one).
LIMIT_MARGIN = 1.05

#: Above this no single node moves data today, in any benchmark here: the fastest
#: memory is B200's HBM3e at 8 TB/s (https://www.nvidia.com/en-us/data-center/dgx-b200/),
#: NVLink 5 is 1.8 TB/s per GPU.  It bounds values on shapes that name no limit.
ABSURD_GBS = 10_000.0


@dataclass(frozen=True)
class Row:
    """One measured value beside its documented figure, floor and physical limit."""

    metric: str
    key: int | str                  # message size in bytes, or a STREAM kernel / nccl column
    measured: float | None
    unit: str
    verdict: Verdict                # the overall verdict: the worse of the steps above
    reference: float | None = None  # the documented value, in ``unit``
    lower: float | None = None      # the tolerance bounds around it
    upper: float | None = None
    source: str | None = None       # "<seed doc> sec <section>"
    figure: str | None = None       # the figure's id in the shape file
    tolerance: Verdict | None = None  # the verdict against the documented value alone
    floor: float | None = None      # the acceptance floor (its source says whose), in ``unit``
    floor_source: str | None = None
    floor_verdict: Verdict | None = None
    #: The key of the shape's links, or "memory"; for a check whose values count both
    #: directions "2 x nvlink_gbs", and limit_gbs is then twice the link's.
    limit: str | None = None
    limit_gbs: float | None = None
    limit_fraction: float | None = None   # measured / physical limit
    #: Why the value cannot be a measurement, when step 1 failed it.
    implausible: str | None = None
    #: What the documented figure needs of the node (its ``requires``), and why.
    requires: tuple[str, ...] = ()
    requires_why: str | None = None
    #: Of ``requires``, what this node is known to lack: from ``ocibench preflight``
    #: or from the run's UCX protocol tables (see :class:`Facts`); empty where nothing
    #: is known.
    lacking: tuple[str, ...] = ()
    #: What this run's messages of the figure's size took, from UCX's protocol tables:
    #: "1-byte messages from cuda memory went eager copy-in copy-out over sysv/memory".
    taken: str | None = None
    #: Why each of ``lacking`` is known lacking, one clause each.
    evidence: tuple[str, ...] = ()
    #: Whether anything was known to check ``requires`` against (a preflight report,
    #: the run's protocol tables): with nothing known the reason points to preflight.
    checked: bool = False
    #: Of ``requires``, what preflight found present on the node, one clause each.
    present: tuple[str, ...] = ()
    #: Where preflight and the run's protocol tables disagree, one clause each.
    conflicts: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"size {self.key}" if isinstance(self.key, int) else str(self.key)

    @property
    def size(self) -> int | None:
        return self.key if isinstance(self.key, int) else None

    @property
    def ratio(self) -> float | None:
        if self.measured is None or not self.reference:
            return None
        return self.measured / self.reference

    def failure(self) -> str | None:
        """Why this row failed, in one line; None when it did not."""
        if self.verdict is not Verdict.FAIL:
            return None
        head = f"{self.metric} at {self.label}: {_num(self.measured)} {self.unit}"
        if self.implausible:
            return f"{head}: {self.implausible}"
        parts = []
        if self.tolerance is not None:
            documented = f"documented {_num(self.reference)} {self.unit}, {self.source}"
            if self.tolerance is Verdict.FAIL:
                bound = (f"> ceiling {_num(self.upper)}" if self.upper is not None
                         and self.measured > self.upper else f"< floor {_num(self.lower)}")
                parts.append(f"{bound} {self.unit} ({documented})")
            else:
                parts.append(f"within tolerance ({documented})")
        if self.floor_verdict is Verdict.FAIL:
            side = "above" if _higher(self.metric) is False else "below"
            parts.append(f"{side} the acceptance floor {_num(self.floor)} {self.unit} "
                         f"({self.floor_source})")
        elif self.floor_verdict is not None:
            parts.append(f"meets the acceptance floor {_num(self.floor)} {self.unit}")
        text = f"{head} " + "; but ".join(parts) if parts else head
        return text + self.cause()

    def cause(self) -> str:
        """What the missed figure needs and this node or run lacked, as the tail of a
        reason (": the documented 2.46 us needs gdrdrv; this run's 1-byte messages from
        cuda memory went ... (UCX's tables name no gdr_copy lane; gdrdrv absent: ...)").
        Empty for a row that did not fail: a passing figure is never given a cause; and
        empty where what is known shows nothing it requires missing."""
        if self.verdict is not Verdict.FAIL or self.implausible or not self.requires:
            return ""
        needs = ", ".join(self.requires)
        conflict = (f"; the evidence conflicts: {'; '.join(self.conflicts)}"
                    if self.conflicts else "")
        documented = (f"the documented {_num(self.reference)} {self.unit}"
                      if self.reference is not None else "the figure")
        if not self.lacking:
            if self.conflicts:
                return f": {documented} needs {needs}{conflict}"
            if self.present:
                # The node has what the figure needs: blaming it would contradict the
                # evidence.  Say what was found, and that the miss is elsewhere.
                return (f": {documented} needs {needs}, which this node has "
                        f"({'; '.join(self.present)}): the miss has another cause")
            if self.checked:
                return ""
            why = self.requires_why or "see the shape file"
            return (f": the documented figure needs {needs} ({why}); "
                    "`ocibench preflight` says which this node lacks")
        taken = f"; this run's {self.taken}" if self.taken else ""
        return f": {documented} needs {needs}{taken} ({'; '.join(self.evidence)}){conflict}"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for name in ("verdict", "tolerance", "floor_verdict"):
            data[name] = None if data[name] is None else str(data[name])
        # JSON has no NaN or inf: such a value is null, and ``implausible`` says what it was.
        if not metrics.is_number(self.measured):
            data["measured"] = None
        return {**data, "ratio": self.ratio}


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _higher(metric: str) -> bool:
    return metrics.metric(metric).higher_is_better


def limit_gbs(shape: shapes.Shape, limit: str | None) -> float | None:
    """The physical limit a figure's ``limit`` names, in GB/s per direction."""
    if limit == "memory":
        value = (shape.data.get("memory") or {}).get("bandwidth_gbs")
    else:
        value = shape.data["links"].get(limit) if limit else None
    return float(value) if metrics.is_number(value) and value > 0 else None


def physical_limit(shape: shapes.Shape, figure: Mapping[str, Any]) -> tuple[float | None, str]:
    """The physical limit of a figure's values in GB/s, and how to name it.

    A shape's links and memory are rates per direction.  A benchmark that counts both
    directions at once (osu_bibw: ``directions: 2`` in its registry entry) moves up to
    twice that: judged against the link alone, every healthy run of it would be
    "impossible"."""
    limit = figure.get("limit")
    per_direction = limit_gbs(shape, limit)
    spec = benchmarks.CHECKS.get(str(figure.get("check")))
    directions = spec.directions if spec else 1
    spread = _bus_spread(spec, figure) if per_direction is not None else None
    if spread is not None:
        factor, ranks, nodes = spread
        return (per_direction * factor,
                f"{per_direction * factor:g} GB/s: {limit} {per_direction:g} x "
                f"2(n-1)/n x N/(2(N-1)) for {ranks} ranks on {nodes} nodes")
    if per_direction is None or directions == 1:
        return per_direction, f"{per_direction:g} GB/s of {limit}" if per_direction else ""
    return (per_direction * directions,
            f"{per_direction * directions:g} GB/s of {limit} in both directions "
            f"({directions} x {per_direction:g})")


def _bus_spread(spec: benchmarks.CheckSpec | None,
                figure: Mapping[str, Any]) -> tuple[float, int, int] | None:
    """How far above a node's network rate an all-reduce's bus bandwidth can go across
    nodes: (factor, ranks, nodes), or None within one node or for another metric.

    nccl-tests prints busbw = algbw x 2(n-1)/n for n ranks (a ring's traffic a link).
    Across N nodes each node must send at least 2(N-1)/N of the data over its network
    (a reduce-scatter then an all-gather between nodes), so algbw is at most
    N/(2(N-1)) of the node's rate and busbw at most 2(n-1)/n x N/(2(N-1)) of it: a
    tree or NVLS all-reduce goes above the node's ports (OCI's own 2 x 8 A100 run
    prints 222.88 GB/s over 200 GB/s of ports), which a ring cannot."""
    if spec is None or spec.metric != "busbw":
        return None
    try:
        params = benchmarks.resolve(spec.name, figure.get("params") or {})
    except benchmarks.ParamError:
        return None
    nodes = int(params.get("nodes", 1))
    ranks = nodes * int(params.get("gpus_per_node", 1))
    if nodes < 2 or ranks < 2:
        return None
    return 2 * (ranks - 1) / ranks * nodes / (2 * (nodes - 1)), ranks, nodes


def limit_label(figure: Mapping[str, Any]) -> str | None:
    """How a row names its figure's limit: "nvlink_gbs", or "2 x nvlink_gbs" for a
    check whose values count both directions."""
    limit = figure.get("limit")
    spec = benchmarks.CHECKS.get(str(figure.get("check")))
    if limit is None or spec is None or spec.directions == 1:
        return limit
    return f"{spec.directions} x {limit}"


def implausible(metric: str, key: int | str, measured: float | None, unit: str,
                limit: str | None = None, physical_gbs: float | None = None,
                limit_text: str | None = None) -> str | None:
    """Why ``measured`` cannot be a real measurement, or None when it can be."""
    if not metrics.is_number(measured):
        return f"{measured!r} is not a finite number"
    if measured < 0:
        return "a negative value is impossible"
    if measured == 0:
        # IMB times a call that moves no data at size 0 and prints two decimals: 0.00
        # there is a fast call, not a broken run.
        if metric == "latency" and key == 0:
            return None
        return f"a zero {metric} is impossible (the run measured nothing)"
    gbs = metrics.to_gbs(measured, unit)
    if gbs is None:
        return None
    if physical_gbs is not None and gbs > physical_gbs * LIMIT_MARGIN:
        named = limit_text or f"{physical_gbs:g} GB/s of {limit}"
        return (f"{gbs:.2f} GB/s is above the physical limit {named} "
                f"(x{LIMIT_MARGIN} margin): impossible, the run measured "
                "something else")
    if gbs > ABSURD_GBS:
        return f"{gbs:.2f} GB/s is above what any node moves ({ABSURD_GBS:g} GB/s)"
    return None


@dataclass(frozen=True)
class Facts:
    """What is known of the node and the run a value came from, beyond the value: what
    a missed figure's cause is named from (:meth:`Row.cause`).

    ``absent``: capability -> what ``ocibench preflight`` found ("absent: no
    /dev/gdrdrv (kernel module not loaded)"), for each it found absent or not as the
    shape says; ``present``: the same for each it found present.  A capability in
    neither is unknown to preflight (or preflight did not run).
    ``tables``: the run's UCX protocol tables (``UCX_PROTO_INFO=y``,
    :mod:`ocibench.figures.ucx_proto`).  ``memories`` and ``nodes``: the run's buffers as
    UCX's memory types (host, cuda) and its node count, which say which rows of the
    tables the figure's messages took (:meth:`for_run`)."""

    absent: Mapping[str, str] = field(default_factory=dict)
    tables: tuple[ucx_proto.Table, ...] = ()
    present: Mapping[str, str] = field(default_factory=dict)
    memories: tuple[str, ...] = ()
    nodes: int | None = None

    @classmethod
    def of(cls, lacking: Collection[str] | Mapping[str, str] | Facts | None) -> Facts:
        """Facts from what a caller has: Facts, capability -> detail, or names."""
        if isinstance(lacking, Facts):
            return lacking
        if isinstance(lacking, Mapping):
            return cls(absent=dict(lacking))
        return cls(absent={name: "absent" for name in lacking or ()})

    @classmethod
    def from_preflight(cls, report: Mapping[str, Any]) -> Facts:
        """What a ``preflight --json`` report found, present and absent."""
        return cls(absent=capabilities.reported_absent(dict(report)),
                   present=capabilities.reported_present(dict(report)))

    def for_run(self, check: str, params: Mapping[str, Any]) -> Facts:
        """These facts with the run's buffers and nodes: the buffers of the checks
        whose registry entry says they are UCX memories ("D-H": cuda, host)."""
        buffers = str(params.get("buffers") or "")
        spec = benchmarks.CHECKS.get(check)
        memories = tuple(m for b in buffers.split("-") for m in ucx_proto.MEMORY.get(b, ())
                         ) if spec and spec.ucx_buffers else ()
        nodes = params.get("nodes")
        return replace(self, memories=memories,
                       nodes=nodes if isinstance(nodes, int) else None)

    def explain(self, requires: Collection[Any], size: int | None) -> Explained:
        """What is known of a figure's ``requires`` (names, or ``{any_of: [...]}``
        groups) at message size ``size``, preflight and the protocol tables weighed
        together:

        * the tables show the messages took the capability's lane: not lacking,
          whatever preflight says; if preflight found it absent, that is a conflict,
          stated as one (the report may be of another node or another time);
        * the tables show no such lane: lacking, and if preflight found the
          capability present, the reason says the node has it and UCX did not use it;
          but tables that name no gdr_copy lane at all (``ucx_proto.UNPRINTED``) do not
          outweigh a preflight that found gdrdrv: not lacking;
        * no tables: preflight's absent is lacking, its present is not;
        * a group is lacking only when every one of its capabilities is."""
        routes = (ucx_proto.taken(self.tables, size, self.memories, self.nodes)
                  if size is not None and self.memories else [])
        lacking: list[str] = []
        evidence: list[str] = []
        present: list[str] = []
        conflicts: list[str] = []
        for requirement in capabilities.requirements(requires):
            missing, why = [], []
            for name in requirement.names:
                shown = ucx_proto.lacks(name, routes, list(self.tables))
                used = bool(routes) and name in ucx_proto.TRANSPORTS and not shown
                if name in self.absent and used:
                    conflicts.append(
                        f"UCX's tables show these messages took {ucx_proto.transport_of(name)}, "
                        f"yet preflight found {name} {self.absent[name]} (was the preflight "
                        "report taken on this node, at this time?)")
                    continue
                if shown and name in self.present and name in ucx_proto.UNPRINTED \
                        and not ucx_proto.names(name, self.tables):
                    # the tables cannot show this lane here: preflight's word stands
                    present.append(f"{name} {self.present[name]}")
                elif shown and name in self.present:
                    missing.append(name)
                    why.append(f"{shown}, though preflight found {name} "
                               f"{self.present[name]}: UCX did not use it")
                elif shown or name in self.absent:
                    missing.append(name)
                    why += [shown] if shown else []
                    why += [f"{name} {self.absent[name]}"] if name in self.absent else []
                elif name in self.present:
                    present.append(f"{name} {self.present[name]}")
            if missing and len(missing) == len(requirement.names):
                lacking += missing
                evidence += why
        taken = ucx_proto.describe(size, routes) if routes else None
        return Explained(tuple(lacking), taken, tuple(evidence),
                         bool(self.absent or self.present or routes),
                         tuple(present), tuple(conflicts))


@dataclass(frozen=True)
class Explained:
    """:meth:`Facts.explain`'s answer, as :class:`Row` keeps it."""

    lacking: tuple[str, ...]
    taken: str | None
    evidence: tuple[str, ...]
    checked: bool
    present: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()


def judge(shape: shapes.Shape, figures: list[references.Figure], metric: str,
          key: int | str, measured: float | None, unit: str | None = None,
          lacking: Collection[str] | Mapping[str, str] | Facts | None = None) -> Row:
    """The verdict on one value of a run whose matching figures are ``figures``.

    ``lacking``: what is known of the node and the run (:class:`Facts`; or the names
    of the capabilities ``ocibench preflight`` found missing, with what it found); a
    failed figure that requires one of them, or whose messages the run's protocol
    tables show without it, says so."""
    unit = unit or metrics.default_unit(metric)
    found = references.lookup(figures, metric, key)
    if found is None:
        why = implausible(metric, key, measured, unit)
        verdict = Verdict.FAIL if why else Verdict.NO_REFERENCE
        return Row(metric, key, measured, unit, verdict, implausible=why)
    figure, reference, floor = found
    # A figure's values are in its own unit; a benchmark may print another (MB/s, Gb/s).
    value = measured
    if metrics.is_number(measured) and unit != figure["unit"]:
        value = metrics.convert(measured, unit, figure["unit"])
    unit = figure["unit"]
    physical, named = physical_limit(shape, figure)
    why = implausible(metric, key, value, unit, figure.get("limit"), physical, named)
    tolerance = None if reference is None else (
        Verdict.FAIL if why else policy.verdict(metric, reference, value))
    floor_verdict = None
    if floor is not None:
        below = why or (value < floor if _higher(metric) else value > floor)
        floor_verdict = Verdict.FAIL if below else Verdict.PASS
    lower, upper = policy.bounds(metric, reference) if reference is not None else (None, None)
    gbs = metrics.to_gbs(value, unit) if metrics.is_number(value) else None
    raw_requires = figure.get("requires") or ()
    requires = tuple(r.text for r in capabilities.requirements(raw_requires))
    known = Facts.of(lacking).explain(raw_requires, key if isinstance(key, int) else None)
    return Row(
        metric, key, value, unit,
        verdict=_overall(why, tolerance, floor_verdict),
        reference=reference, lower=lower, upper=upper,
        source=references.source_text(figure.get("source")) if reference is not None else None,
        figure=figure["id"], tolerance=tolerance,
        floor=floor, floor_source=(figure.get("floor") or {}).get("source"),
        floor_verdict=floor_verdict,
        limit=limit_label(figure), limit_gbs=physical,
        limit_fraction=gbs / physical if gbs is not None and physical else None,
        implausible=why,
        requires=requires,
        requires_why=" ".join(str(figure.get("why") or "").split()) or None,
        lacking=known.lacking, taken=known.taken, evidence=known.evidence,
        checked=known.checked, present=known.present, conflicts=known.conflicts,
    )


def _overall(why: str | None, tolerance: Verdict | None, floor: Verdict | None) -> Verdict:
    if why or Verdict.FAIL in (tolerance, floor):
        return Verdict.FAIL
    if tolerance is Verdict.SUSPICIOUS:
        return Verdict.SUSPICIOUS
    return Verdict.PASS


def judge_run(shape: shapes.Shape, check: str, params: Mapping[str, Any],
              series: Mapping[str, Mapping[int | str, float | None]],
              units: Mapping[str, str] | None = None,
              lacking: Collection[str] | Mapping[str, str] | Facts | None = None,
              figures: list[references.Figure] | None = None) -> list[Row]:
    """Every value of one run (metric -> key -> value), judged; ``lacking`` as for
    :func:`judge`, completed with the run's buffers and nodes.  ``figures``: the
    shape's figures of this variant, where the caller found them already
    (:func:`ocibench.figures.references.matching`), so they are looked for once."""
    if figures is None:
        figures = references.matching(shape, check, params)
    units = units or {}
    facts = Facts.of(lacking).for_run(check, params)
    return [judge(shape, figures, metric, key, value, units.get(metric), facts)
            for metric, values in series.items() for key, value in values.items()]


def first_failure(rows: list[Row]) -> str | None:
    return next((row.failure() for row in rows if row.verdict is Verdict.FAIL), None)


def reframe_reference(shape: shapes.Shape, check: str, params: Mapping[str, Any],
                      targets: list[str]) -> dict[str, dict[str, tuple]]:
    """ReFrame's ``reference``: {target: {perf_var: (ref, lower, upper, unit)}}.

    The same bounds as :func:`judge`: the tolerance, raised to OCI's floor where one is
    stricter, and capped by the physical limit (with :data:`LIMIT_MARGIN`), so that an
    impossible value fails live as it fails offline.  Each target is an explicit
    ``system:partition``: a '*' target would apply the figures to systems that are
    not this shape.  "suspicious" has no ReFrame counterpart: the report shows it.
    """
    for target in targets:
        if not target or "*" in target:
            raise ValueError(f"ReFrame target {target!r}: name a system:partition, not a wildcard")
    variables: dict[str, tuple] = {}
    for figure in references.matching(shape, check, params):
        physical, _ = physical_limit(shape, figure)
        floors = (figure.get("floor") or {}).get("values") or {}
        for key in references.figure_keys(figure):
            reference = (figure.get("values") or {}).get(key)
            floor = floors.get(key)
            anchor = reference if reference is not None else floor
            lower, upper = (policy.bounds(figure["metric"], reference)
                            if reference is not None else (None, None))
            if floor is not None:
                if _higher(figure["metric"]):
                    lower = floor if lower is None else max(lower, floor)
                else:
                    upper = floor if upper is None else min(upper, floor)
            if physical is not None and _higher(figure["metric"]):
                factor = metrics.GBS_PER_UNIT.get(figure["unit"])
                if factor:
                    cap = physical * LIMIT_MARGIN / factor
                    upper = cap if upper is None else min(upper, cap)
            variables[references.perf_var(figure["metric"], key)] = (
                anchor, _relative(lower, anchor), _relative(upper, anchor), figure["unit"])
    if not variables:
        return {}
    return {target: dict(variables) for target in targets}


def _relative(bound: float | None, reference: float) -> float | None:
    # Rounded so that 0.9 - 1 reads -0.1, not -0.09999999999999998.
    return None if bound is None else round(bound / reference - 1, 6)

