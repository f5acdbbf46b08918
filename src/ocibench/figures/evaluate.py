"""Judge one benchmark output offline: sanity first, then every measured value with
:func:`ocibench.figures.judge.judge` (plausibility, the documented figure, OCI's floor).

The same parsers (:mod:`ocibench.figures.outputs`), figures (:mod:`ocibench.figures.references`) and
judgement (:mod:`ocibench.figures.judge`) serve the live ReFrame checks and the report, so a
hand-run output and a ReFrame run of the same command get the same verdict.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ocibench import accelerators, benchmarks, ladder, shapes
from ocibench.benchmarks import CHECKS  # noqa: F401  (the registry, re-exported here)
from ocibench.figures import judge, nccl_path, outputs, references, ucx_proto
from ocibench.figures.judge import Row
from ocibench.metrics import RunVerdict, Verdict


def ladder_entry(check: str, rows: Iterable[Row], path_kind: str | None = None,
                 failure: str | None = None) -> ladder.Rung | None:
    """A failed run's entry of the action ladder (ocibench.ladder), as the sweep finds
    it: the NCCL path's fault by name; else the failed figure's (an impossible value
    first, a capability it lacked before the figure itself); else the failure line's
    (a crash, ``#wrong``); None when nothing failed."""
    if path_kind:
        return ladder.entry(ladder.PATH, f"nccl:{path_kind}")
    rows = list(rows)
    failed = [r for r in rows if r.implausible] or [r for r in rows if r.verdict is Verdict.FAIL]
    if failed:
        return ladder.figure_entry(check, bool(failed[0].implausible), failed[0].lacking)
    return ladder.failure_entry(failure) if failure else None


@dataclass(frozen=True)
class Evaluation:
    check: str
    shape: str
    params: dict[str, Any]
    rows: tuple[Row, ...] = ()
    sanity: str | None = None      # the SanityError message when the output is not sane
    notes: tuple[str, ...] = ()    # why figures have no reference, for the reader
    #: What the reasons' causes were named from: the node's preflight and the output's
    #: UCX protocol tables; kept so that the report can judge the rows again.
    facts: judge.Facts = judge.Facts()
    #: Why nothing could be judged although the output may be sane: a format the parser
    #: does not know (naming the line), a method that differs from the figure's (with
    #: the command line that would compare), or sizes and a variant no figure documents.
    unjudged: str | None = None
    #: Whether the shape documents any figure of this check (``local`` documents none:
    #: a sane output there is RECORDED, not UNJUDGED).
    documented: bool = True
    #: The path NCCL's traffic took (:func:`ocibench.figures.nccl_path.Path.describe`), for the
    #: checks whose library logs it; None for the others.
    path: str | None = None
    #: Why that path makes the run broken whatever its numbers (a fallback to a socket
    #: between GPUs of one host, SHM on an NVLink shape, no GPUDirect RDMA between hosts).
    path_fault: str | None = None
    #: That fault's name (:data:`ocibench.figures.nccl_path.FAULTS`: the action ladder's
    #: ``nccl:<name>`` entry).
    path_kind: str | None = None

    @property
    def verdict(self) -> RunVerdict:
        """PASS only when something was compared and held; FAIL when a compared figure
        missed or the run proved broken; UNJUDGED when nothing could be compared on a
        shape that documents the check; RECORDED on a shape that documents none."""
        return run_verdict(self.rows, broken=bool(self.sanity or self.path_fault),
                           unjudged=self.unjudged, documented=self.documented)

    def next_step(self) -> ladder.Decision | None:
        """A failed run's entry of the action ladder (:func:`ladder_entry`); None unless
        it failed."""
        if self.verdict is not RunVerdict.FAIL:
            return None
        rung = ladder_entry(self.check, self.rows, self.path_kind, self.sanity)
        return None if rung is None else ladder.Decision(rung, rung.step, 0)

    @property
    def ok(self) -> bool:
        """Nothing failed and nothing was left unjudged (PASS or RECORDED)."""
        return self.verdict in (RunVerdict.PASS, RunVerdict.RECORDED)

    @property
    def reason(self) -> str | None:
        """The first failure in one line, or why the run is unjudged; None when it
        passed or was recorded.  An impossible value is named before a figure that
        merely missed."""
        if self.sanity:
            return self.sanity
        if self.path_fault:
            return self.path_fault
        impossible = [row for row in self.rows if row.implausible]
        failed = judge.first_failure(impossible or list(self.rows))
        if failed:
            return failed
        if self.verdict is RunVerdict.UNJUDGED:
            return self.unjudged or "; ".join(self.notes) or "no documented figure was compared"
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "shape": self.shape,
            "params": self.params,
            "verdict": str(self.verdict),
            "ok": self.ok,
            "unjudged": self.unjudged,
            "path": self.path,
            "path_fault": self.path_fault,
            "path_kind": self.path_kind,
            "sanity": self.sanity,
            "reason": self.reason,
            "notes": list(self.notes),
            "rows": [row.to_dict() for row in self.rows],
            "absent": dict(self.facts.absent),
            "present": dict(self.facts.present),
            "ucx_protocols": [table.to_dict() for table in self.facts.tables],
        }


def run_verdict(rows: Iterable[Row], *, broken: bool, unjudged: str | None,
                documented: bool) -> RunVerdict:
    """The one rule from a run's judged rows to its verdict (evaluate, the report):
    broken or any row failed -> FAIL; else a reason it could not be judged, or no row
    compared with anything -> UNJUDGED (RECORDED on a shape that documents nothing
    for the check); else PASS: something was compared, and everything compared held."""
    rows = list(rows)
    if broken or any(row.verdict is Verdict.FAIL for row in rows):
        return RunVerdict.FAIL
    if unjudged:
        return RunVerdict.UNJUDGED
    if any(row.verdict is not Verdict.NO_REFERENCE for row in rows):
        return RunVerdict.PASS
    return RunVerdict.UNJUDGED if documented else RunVerdict.RECORDED


def documents(shape: shapes.Shape, check: str) -> bool:
    """Whether ``shape`` documents any figure of ``check``."""
    return any(figure["check"] == check for figure in shape.figures)


def evaluate(check: str, text: str, shape: shapes.Shape | str,
             params: Mapping[str, Any],
             lacking: Collection[str] | Mapping[str, str] | judge.Facts = ()) -> Evaluation:
    """Evaluate ``text``, one run's output.  Raises ParamError for an unknown check or
    parameter and ShapeError for an unknown shape; a bad output is a failed Evaluation.
    ``lacking``: capabilities the node is known to lack (``ocibench preflight``: name ->
    what it found), named in the reason of a figure that requires them, as are the
    protocols UCX printed in ``text`` (``UCX_PROTO_INFO=y``)."""
    resolved = benchmarks.resolve(check, params)
    shape = shape if isinstance(shape, shapes.Shape) else shapes.load(shape)
    figures = references.matching(shape, check, resolved)
    notes = _notes(shape, check, resolved, figures)
    known = judge.Facts.of(lacking)
    facts = judge.Facts(absent=dict(known.absent), present=dict(known.present),
                        tables=tuple(ucx_proto.parse(text)))
    documented = documents(shape, check)
    path = path_fault = path_kind = None
    if benchmarks.CHECKS[check].collective == "nccl":
        # The path is judged even where the numbers cannot be: a socket between two
        # GPUs of one host is a broken node whatever was documented for the sizes.
        found = nccl_path.parse(text)
        classified = nccl_path.classify(found, shape.data, resolved)
        path = found.describe()
        path_kind, path_fault = classified if classified else (None, None)
    known_of_run = {"notes": notes, "facts": facts, "documented": documented, "path": path,
                    "path_fault": path_fault, "path_kind": path_kind}
    try:
        measurement = outputs.parse(check, text, resolved)
    except outputs.Unjudged as err:
        return Evaluation(check, shape.name, resolved, unjudged=str(err), **known_of_run)
    except outputs.SanityError as err:
        return Evaluation(check, shape.name, resolved, sanity=str(err), **known_of_run)
    other = _other_vendor(shape, measurement)
    if other:
        return Evaluation(check, shape.name, resolved, unjudged=other, **known_of_run)
    rows = judge.judge_run(shape, check, resolved, measurement.series(), measurement.units(),
                           facts, figures)
    unjudged = None
    if figures and all(row.verdict is Verdict.NO_REFERENCE for row in rows):
        unjudged = _keys_missed(shape, check, figures, rows)
    elif figures:
        unjudged = _named_values_missing(shape, check, figures, measurement)
    method = "; ".join(why for why in (measurement.method, _other_device(shape, measurement))
                       if why)
    if method and (figures or documented and not measurement.values):
        # The values are sane but were measured another way than the figure's (or on
        # another GPU): they are shown, never compared (a healthy -g 2 run must not fail
        # for its method).  Where the method leaves no value of the check's own metric
        # (a one-rank nccl-tests: no busbw), the method is why, whatever variant ran.
        unjudged = "; ".join(why for why in (method, unjudged) if why)
        rows = [judge.judge(shape, [], row.metric, row.key, row.measured, row.unit)
                for row in rows]
    missed = [row for row in rows if row.verdict is Verdict.FAIL]
    if measurement.handicap and missed and all(
            Verdict.FAIL in (row.tolerance, row.floor_verdict) for row in missed):
        # Worse than its figure, measured at a disadvantage the figure was not: the
        # disadvantage may be why, so nothing is judged.  A value that met its figure
        # anyway holds; an impossible one (above a physical limit) stays a FAIL.
        unjudged = "; ".join(why for why in (
            f"{check}: {measurement.handicap}, and missed its figure "
            f"({_missed(missed[0])})", unjudged) if why)
        rows = [judge.judge(shape, [], row.metric, row.key, row.measured, row.unit)
                for row in rows]
    return Evaluation(check, shape.name, resolved, tuple(rows), unjudged=unjudged,
                      **known_of_run)


def _missed(row: Row) -> str:
    return (f"{row.metric} at {row.key}: {row.measured:g} {row.unit}, "
            f"documented {row.reference:g} {row.unit}" if row.reference is not None
            else f"{row.metric} at {row.key}: {row.measured:g} {row.unit}")


def _other_vendor(shape: shapes.Shape, measurement: outputs.Measurement) -> str | None:
    """Why ``measurement`` cannot be judged on ``shape``: its output names another GPU
    vendor's software than the shape's (an nccl-tests output against an MI300X figure,
    an OMB -d rocm run against an A100's).  Its numbers are another machine's: not
    comparable, whatever they are.  None where they match or either is unknown."""
    vendor = accelerators.of(shape.gpus)
    if measurement.vendor is None or vendor is None or measurement.vendor == vendor.vendor:
        return None
    theirs = accelerators.VENDORS[measurement.vendor]
    return (f"the output names {theirs.vendor}'s GPU software ({theirs.collective}, "
            f"-d {theirs.buffer_flag}); {shape.name}'s GPUs are {vendor.vendor}'s: judge "
            f"it on one of {theirs.vendor}'s shapes")


def _other_device(shape: shapes.Shape, measurement: outputs.Measurement) -> str | None:
    """Why ``measurement`` was measured on another GPU than ``shape``'s, quoting the line
    that names it (BabelStream's "Using HIP device Fiji" against MI300X figures), or
    None where they are the same or either is not known."""
    model = str((shape.gpus or {}).get("model") or "")
    if not measurement.device or not model:
        return None
    if _same_gpu(model, measurement.device):
        return None
    return (f"the output ran on {measurement.device} ({measurement.device_line!r}); "
            f"{shape.name}'s GPUs are {model}: judge it on that GPU's shape")


def _same_gpu(model: str, device: str) -> bool:
    """One GPU by its two names, as the shape file and the tool print them: equal but
    for case and blanks, or one the other's start ("AMD Instinct MI300X" and the "AMD
    Instinct MI300X OAM" some tools print)."""
    a, b = (" ".join(name.lower().split()) for name in (model, device))
    return a == b or a.startswith(b + " ") or b.startswith(a + " ")


def _keys_missed(shape: shapes.Shape, check: str, figures: list[references.Figure],
                 rows: list[Row]) -> str:
    """Why a run whose variant is documented compared nothing: its sizes (or keys)
    hold none that the figures document."""
    documented = sorted({str(key) for figure in figures
                         for key in references.figure_keys(figure)})
    measured = [str(row.key) for row in rows]
    shown = ", ".join(measured[:3]) + (f" .. {measured[-1]}" if len(measured) > 3 else "")
    return (f"no documented figure was compared: {shape.name} documents {check} at "
            f"{', '.join(documented)} for this variant; the run measured {shown or 'nothing'} "
            "(run it over the documented sizes)")


def _named_values_missing(shape: shapes.Shape, check: str, figures: list[references.Figure],
                          measurement: outputs.Measurement) -> str | None:
    """Why a run of a check whose values are keyed by name is not judged whole: the
    figures document a value the output does not print (a BabelStream before 3.0 has no
    Dot line, a TransferBench run without its bidirectional matrix).  What was compared
    is still shown; a value that missed still fails the run."""
    spec = benchmarks.CHECKS[check]
    if not spec.keys:
        return None
    series = measurement.series()
    missing = sorted({str(key) for figure in figures
                      for key in references.figure_keys(figure)
                      if key not in series.get(figure["metric"], {})},
                     key=lambda key: spec.keys.index(key) if key in spec.keys else len(spec.keys))
    if not missing:
        return None
    return (f"the output has no {', '.join(missing)} ({spec.key_name}), which "
            f"{shape.name} documents for this variant: no line for it was printed")


def _notes(shape: shapes.Shape, check: str, params: dict[str, Any],
           figures: list[references.Figure]) -> tuple[str, ...]:
    if figures:
        return ()
    documented = [f for f in shape.figures if f["check"] == check]
    if not documented:
        return (f"{shape.name} documents no {check} figure: values are recorded "
                "without a reference",)
    if benchmarks.CHECKS[check].sizes_in_variant:
        ranges = sorted({_size_range(check, f["params"]) for f in documented})
        if _size_range(check, params) not in ranges:
            return (f"{shape.name} documents {check} only over the sizes "
                    f"{'; '.join(ranges)}; this run's sizes differ",)
    variants = sorted({" ".join(f"{k}={v}" for k, v in f["params"].items())
                       for f in documented})
    return (f"{shape.name} documents {check} only for: {'; '.join(variants)} "
            "(choose one with --set)",)


def _size_range(check: str, params: Mapping[str, Any]) -> str:
    sizes = benchmarks.figure_sizes(check, params)
    return f"{sizes[0]}..{sizes[-1]} ({len(sizes)} sizes)"
