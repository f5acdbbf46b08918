"""Sweep a Slurm cluster: every node judged, bad ones named with a reason and an action.

Every single-node check on every node, the 2-node checks over a ring of pairs, the
4-node collectives on groups of 4, all through ReFrame on Slurm; per node pass, fail,
outlier, unreachable or unjudged, with an action (drain, rerun, fix-software); --drain
drains within a cap and ocibench's drain budget.  See docs/sweep.md.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import time
from pathlib import Path

from ocibench import paths

#: The sweep's ReFrame files go beside ReFrame's run reports (ocibench.reframe.site).
REPORTS_DIR = Path(os.environ.get("OCIBENCH_REPORT_DIR") or paths.REPO_ROOT / "reports")
#: The record of the drains the sweep made (ocibench.sweep.state): --undrain's proof.
STATE_FILE = REPORTS_DIR / "sweep" / "drained.json"


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction between 0 and 1")
    return value


def _positive(kind):
    def convert(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = 0
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{text!r} is not a positive number")
        return value
    return convert


def _setvar(text: str) -> str:
    """ReFrame's -S VAR=VALUE (VAR, or CHECK.VAR for one check)."""
    if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)?=.+", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not VAR=VALUE or CHECK.VAR=VALUE")
    return text


def register(parser: argparse.ArgumentParser) -> None:
    from ocibench.cluster import budget, slurm
    from ocibench.sweep import actions, verdicts

    parser.add_argument("--partition", metavar="P", help="the Slurm partition to sweep")
    parser.add_argument("--nodes", metavar="HOSTLIST",
                        help="Slurm hostlist of the nodes to sweep (default: every node of "
                             "the partition)")
    parser.add_argument("-n", "--name", dest="names", action="append", default=[],
                        metavar="REGEX", help="only the checks ReFrame's -n selects")
    parser.add_argument("-x", "--exclude", dest="excludes", action="append", default=[],
                        metavar="REGEX", help="leave out the checks ReFrame's -x excludes")
    parser.add_argument("-S", "--setvar", dest="setvars", action="append", default=[],
                        type=_setvar, metavar="[CHECK.]VAR=VALUE",
                        help="set a check variable in every ReFrame run of the sweep, as "
                             "ReFrame's -S (e.g. osu_latency.iterations=1000: a quicker "
                             "sweep, the same message sizes judged)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the plan (groups, pairs, jobs, waves); run nothing")
    parser.add_argument("--drain", action="store_true",
                        help="drain the nodes whose action is drain or fix-software")
    parser.add_argument("--undrain", action="store_true",
                        help="re-test the nodes ocibench drained and resume those that pass")
    parser.add_argument("--max-drain-fraction", type=_fraction,
                        default=actions.MAX_DRAIN_FRACTION, metavar="F",
                        help="drain at most this fraction of the nodes (default "
                             f"{actions.MAX_DRAIN_FRACTION})")
    parser.add_argument("--force", action="store_true",
                        help="drain even above the cap (never above the drain budget)")
    parser.add_argument("--drain-budget", metavar="N|P%", default=None,
                        help="the most nodes of a partition ocibench may hold drained at "
                             "once, the healthcheck's drains included (default "
                             # argparse %-formats help: the default's % doubled
                             f"${budget.ENV}, else {budget.DEFAULT.replace('%', '%%')}, "
                             "at least 1; "
                             "docs/sweep.md)")
    parser.add_argument("--state", type=Path, metavar="FILE",
                        help="the record of the drains sweeps made, which --undrain trusts "
                             f"(default {STATE_FILE})")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the results as JSON")
    parser.add_argument("--html", type=Path, metavar="FILE",
                        help="write the node x check matrix as one offline HTML page")
    parser.add_argument("--history", type=Path, metavar="FILE",
                        help="the history every node's figures are added to (default "
                             "$OCIBENCH_HISTORY_DB, else <cache>/history.sqlite)")
    parser.add_argument("--no-history", action="store_true",
                        help="add nothing to the history")
    parser.add_argument("--outlier-k", type=_positive(float), default=verdicts.OUTLIER_K,
                        metavar="K", help="robust deviations from the median that make an "
                        f"outlier (default {verdicts.OUTLIER_K})")
    parser.add_argument("--start-timeout", type=_positive(int), default=slurm.START_TIMEOUT_S,
                        metavar="S", help="seconds a job may wait to start before its nodes "
                        f"are unreachable (default {slurm.START_TIMEOUT_S})")
    parser.add_argument("--prefix", type=Path, metavar="DIR",
                        help="ReFrame's stage, output and reports (default "
                             f"{REPORTS_DIR / 'sweep' / '<time>'})")


def run(args: argparse.Namespace) -> int:
    from ocibench.cluster import budget, slurm
    from ocibench.sweep import plan, rfm, signals, state
    from ocibench.sweep import run as sweeping

    if args.drain and args.dry_run:
        return _usage("--drain and --dry-run exclude each other")
    try:
        drain_budget = budget.configured(args.drain_budget)
    except budget.BudgetError as err:
        return _usage(str(err))
    prefix = args.prefix or REPORTS_DIR / "sweep" / time.strftime("%Y%m%d-%H%M%S")
    options = sweeping.Options(
        partition=args.partition, nodes=args.nodes, names=args.names,
        excludes=args.excludes, drain=args.drain, undrain=args.undrain,
        max_drain_fraction=args.max_drain_fraction, force=args.force,
        drain_budget=drain_budget,
        outlier_k=args.outlier_k, start_timeout=args.start_timeout, prefix=prefix,
        setvars=args.setvars, state=args.state or STATE_FILE,
        history=None if args.no_history else (args.history or paths.history_db()))
    result = None
    try:
        with signals.as_ctrl_c():
            try:
                if args.dry_run:
                    names = slurm.expand_hostlist(args.nodes) if args.nodes is not None \
                        else None
                    the_plan, skipped = sweeping.dry_run(options, names)
                    print(plan.describe(the_plan))
                    for name, why in skipped.items():
                        print(f"skipped {name}: {why}")
                    return 0
                result = sweeping.sweep(options, say=lambda line: print(line, file=sys.stderr))
            except (slurm.UsageError, plan.PlanError) as err:
                return _usage(str(err))
            except (slurm.SlurmError, rfm.ReframeError, state.StateError) as err:
                # before the sweep did anything: nothing to write
                print(f"ocibench sweep: {err}", file=sys.stderr)
                return 2
            # From here the files are written and the verdicts printed, whatever ended
            # the sweep; a signal meanwhile waits for them (signals.shielded).
            with signals.shielded():
                return _report(args, result)
    except KeyboardInterrupt as err:
        name = signal.Signals(signals.signum_of(err)).name
        print(f"ocibench sweep: stopped by {name}"
              + (" after writing its files" if result is not None else
                 " before any Slurm action"), file=sys.stderr)
        return 128 + signals.signum_of(err)


def _report(args: argparse.Namespace, result) -> int:
    """The JSON and the page, then one line per node; the exit status (docs/sweep.md)."""
    from ocibench.pages.output import OutputError, write
    from ocibench.sweep import output

    failed = []
    for path, render in ((args.json, output.to_json), (args.html, output.to_html)):
        if path is None:
            continue
        try:
            write(path, render(result))
        except OutputError as err:
            failed.append(str(err))
    if not args.no_history and result.jobs:
        from ocibench.history.current import PublishError
        from ocibench.history.store import HistoryError

        where = args.history or paths.history_db()
        try:
            added, nodes = result.kept if result.kept is not None else result.keep(where)
            print(f"history: {added} figure(s) of {nodes} node(s) added to {where} "
                  f"(session {result.session})", file=sys.stderr)
        except (HistoryError, PublishError) as err:
            failed.append(f"history: {err}")
    for name, node in result.nodes.items():
        action = f" [{node.action}]" if node.action else ""
        print(f"{name}: {node.verdict}{action}: {node.reason}")
    decision = result.drain
    if decision and decision.refused and args.drain:
        print(f"ocibench sweep: {decision.refused}", file=sys.stderr)
    if result.drained:
        print(f"drained: {', '.join(result.drained)}")
    if result.not_drained:
        print(f"not drained: {', '.join(result.not_drained)}")
    for node, why in result.budget_spent.items():
        print(f"{node}: would drain, {why}")
    if result.undrained:
        print(f"returned to service: {', '.join(result.undrained)}")
    for line in result.cluster_events:   # the fleet's own moves: once, no node's drift
        print(f"cluster event: {line}")
    counts = ", ".join(f"{n} {v}" for v, n in result.summary().items())
    print(f"{len(result.nodes)} node(s): {counts}")
    for line in result.errors + failed:
        print(f"ocibench sweep: {line}", file=sys.stderr)
    if result.signum is not None:
        print(f"ocibench sweep: {result.stopped}", file=sys.stderr)
        return 128 + result.signum
    if result.errors or failed:
        return 2
    return result.exit_status()


def _usage(message: str) -> int:
    print(f"ocibench sweep: {message}", file=sys.stderr)
    return 2
