"""Check a hand-run benchmark output against the shape's documented figures.

Exit status, one per verdict (:class:`ocibench.metrics.RunVerdict`):

* 0 PASS: at least one documented figure or floor was compared, and every one held;
  also RECORDED: a sane output on a shape that documents nothing for the check
  (``local``), its values recorded and nothing compared;
* 1 FAIL: a compared figure missed, or the run proved broken (a crash, ``#wrong``, a
  truncated output, an impossible value, a wrong NCCL path);
* 2 a usage error (an unknown check or shape, an unreadable file);
* 3 UNJUDGED: the output could not be compared -- no figure documents its variant or
  sizes, its method differs from the figure's, or its format is unknown -- with a line
  that says which and what to do.  Never a pass, and never a fail of the node.
"""

from __future__ import annotations

import argparse
import json
import sys

from ocibench import benchmarks, shapes
from ocibench.benchmarks import ParamError
from ocibench.figures import evaluate as evaluation
from ocibench.figures import judge, outputs
from ocibench.figures.judge import Row
from ocibench.metrics import VERDICTS, RunVerdict
from ocibench.node import preflight

#: The exit status of each verdict (the module's docstring).
EXIT_STATUS = {RunVerdict.PASS: 0, RunVerdict.RECORDED: 0, RunVerdict.FAIL: 1,
               RunVerdict.UNJUDGED: 3}

COLUMNS = ("metric", "key", "measured", "reference", "lower", "upper", "floor", "unit",
           "verdict", "of limit", "source")


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("check", nargs="?", help="the check that produced FILE (see --list)")
    parser.add_argument("file", nargs="?", help="the benchmark's output, or the JSON file "
                        "nccl-tests -J wrote ('-' reads stdin)")
    parser.add_argument("--shape", help="the shape it ran on (default: this machine's)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a check parameter, e.g. --set nodes=2 (repeatable)")
    parser.add_argument("--json", action="store_true", help="print the evaluation as JSON")
    parser.add_argument("--preflight", metavar="FILE",
                        help="`ocibench preflight --json` of the node that ran it: a missed "
                             "figure then names the capability the node lacks")
    parser.add_argument("--list", action="store_true", help="list the checks and parameters")


def run(args: argparse.Namespace) -> int:
    if args.list:
        print(_listing())
        return 0
    try:
        if not args.check or not args.file:
            raise ParamError("give CHECK and FILE (or --list)")
        benchmarks.spec(args.check)
        params = _settings(args.set)
        shape = _shape(args.shape)
        text = _read(args.file)
        lacking = _lacking(args.preflight) if args.preflight else {}
        result = evaluation.evaluate(args.check, text, shape, params, lacking)
    except (ParamError, shapes.ShapeError, outputs.OutputTooLarge) as err:
        print(f"ocibench evaluate: {err}", file=sys.stderr)
        return 2
    first = result.next_step()
    if args.json:
        print(json.dumps({**result.to_dict(), "file": args.file,
                          "next": first.to_dict() if first else None}, indent=2))
    else:
        if first:   # what to do comes first (the action ladder), the figures below
            print(f"next: {first.line()}; {first.rung.fix}; "
                  f"evidence: {'; '.join(first.rung.evidence)}")
        print(_table(result))
    verdict = result.verdict
    if verdict is RunVerdict.FAIL:
        print(f"ocibench evaluate: FAIL: {result.reason}", file=sys.stderr)
    elif verdict is RunVerdict.UNJUDGED:
        print(f"ocibench evaluate: UNJUDGED: {result.reason}", file=sys.stderr)
    return EXIT_STATUS[verdict]


def _settings(settings: list[str]) -> dict[str, str]:
    params: dict[str, str] = {}
    for setting in settings:
        name, sep, value = setting.partition("=")
        if not sep or not name:
            raise ParamError(f"--set {setting!r}: expected NAME=VALUE")
        if name in params:
            raise ParamError(f"--set {name} given twice")
        params[name] = value
    return params


def _shape(name: str | None) -> str:
    """--shape as given; without it, this machine's.  An empty name is a mistake (an
    unset variable in a script), not a request for the detected shape."""
    if name is None:
        return shapes.detect()
    if not name.strip():
        raise ParamError("--shape is empty: give a shape name (ocibench shape --list) "
                         "or leave --shape out for this machine's")
    return name


def _read(file: str) -> str:
    if file == "-":
        return outputs.read_output(sys.stdin.buffer, "standard input")
    try:
        with open(file, "rb") as stream:
            return outputs.read_output(stream, file)
    except OSError as err:
        raise ParamError(f"cannot read {file}: {err.strerror}") from None


def _lacking(file: str) -> judge.Facts:
    """What a preflight report found: the capabilities present and those missing."""
    try:
        return judge.Facts.from_preflight(preflight.read_report(file))
    except ValueError as err:   # jsonfile.JsonFileError: one line naming the file
        raise ParamError(f"--preflight {err}") from None


def _listing() -> str:
    lines = []
    for spec in evaluation.CHECKS.values():
        # The unit its figures are stated in (perftest's Gb/s), not the metric's default.
        lines.append(f"{spec.name}: {spec.summary} [{spec.metric}, {spec.figure_unit}]")
        lines.extend(f"    {param.describe()}" for param in spec.params)
    return "\n".join(lines)


def _table(result: evaluation.Evaluation) -> str:
    params = " ".join(f"{k}={v}" for k, v in result.params.items())
    lines = [f"{result.check} on {result.shape} ({params})"]
    if result.path:
        lines.append(f"path: {result.path}")
    if result.sanity:
        return "\n".join(lines + [f"sanity: {result.sanity}", "FAIL"])
    if result.unjudged and not result.rows:
        return "\n".join(lines + [f"unjudged: {result.unjudged}", "UNJUDGED"])
    cells = [COLUMNS] + [_cells(row) for row in result.rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(COLUMNS))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    lines += [f"note: {note}" for note in result.notes]
    if result.unjudged:
        lines.append(f"unjudged: {result.unjudged}")
    if result.path_fault:
        lines.append(f"path: FAIL: {result.path_fault}")
    counts = {v: sum(r.verdict is v for r in result.rows) for v in VERDICTS}
    lines.append(str(result.verdict).upper() + ": "
                 + ", ".join(f"{n} {v}" for v, n in counts.items() if n))
    return "\n".join(lines)


def _cells(row: Row) -> tuple[str, ...]:
    fraction = "-" if row.limit_fraction is None else f"{row.limit_fraction:.0%} {row.limit}"
    return (row.metric, str(row.key), _num(row.measured), _num(row.reference),
            _num(row.lower), _num(row.upper), _num(row.floor), row.unit, str(row.verdict),
            fraction, row.source or row.floor_source or "-")


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"
