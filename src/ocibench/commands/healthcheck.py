"""Check this node between jobs (Slurm's HealthCheckProgram, or --prolog) and drain it if broken.

Cheap passive probes (GPU count and model, Xid errors, row remaps, PCIe links, the links
between the GPUs (NVLink, xGMI), RDMA ports and their flapping, this node's latest
verdicts and drift in the results history), each pass, fail or unknown with its
evidence.  A
failure drains the node with an ``ocibench:`` reason, within ocibench's drain budget
(--drain-budget, $OCIBENCH_DRAIN_BUDGET); an unknown never does; only a
drain this command wrote is resumed, once the node is clean.  Exit status: 0 every
probe passed; 1 a probe failed (the node drained, already drained, or Slurm could not
be told or did not answer within --slurm-time); 3 none failed but one could not be
judged (or nothing was: another run held the node's lock, one line); 4 none failed and
Slurm could not be asked or told; 2 a usage error.
With --prolog: 1 when a probe failed and Slurm holds the node drained (Slurm then
requeues the job), else 0 (the budget spent included: the job runs).  See
docs/healthcheck.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ocibench import accelerators, hostnames, paths, shapes
from ocibench.cluster import budget
from ocibench.health import check, probes, state


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value <= 55:
        raise argparse.ArgumentTypeError(f"{text} s: give more than 0 and at most 55 "
                                         "(Slurm kills the program at 60 s)")
    return value


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shape", help="the shape to compare with (default: this machine's)")
    parser.add_argument("--node", default="",
                        help="this node's Slurm name (default: $SLURMD_NODENAME, else the "
                             "host name)")
    parser.add_argument("--root", type=Path, default=Path("/"), metavar="DIR",
                        help="the filesystem root whose sys/ and dev/kmsg are read "
                             "(default: /)")
    parser.add_argument("--state", type=Path, default=None, metavar="FILE",
                        help="the state file (default: $OCIBENCH_HEALTH_STATE, else "
                             f"{state.SYSTEM_PATH} as root)")
    parser.add_argument("--history", type=Path, default=None, metavar="FILE",
                        help="the results history (default: $OCIBENCH_HISTORY_DB, else "
                             "<cache>/history.sqlite)")
    parser.add_argument("--dry-run", action="store_true",
                        help="say what would be drained or resumed; change nothing in Slurm")
    parser.add_argument("--prolog", action="store_true",
                        help="run as Slurm's Prolog: drain on a failure and exit 1 (the job "
                             "is requeued); never resume")
    parser.add_argument("--deadline", type=_seconds, default=check.DEADLINE_S,
                        metavar="S", help="seconds by which every probe has answered "
                        f"(default {check.DEADLINE_S:g})")
    parser.add_argument("--slurm-time", type=_seconds, default=check.SLURM_WINDOW_S,
                        metavar="S", help="seconds after --deadline by which every Slurm "
                        "call has answered; one that has not is killed, and a drain "
                        "whose re-count of the budget did not answer is undone "
                        f"(default {check.SLURM_WINDOW_S:g})")
    parser.add_argument("--drain-budget", metavar="N|P%", default=None,
                        help="the most nodes of a partition ocibench may hold drained at "
                             f"once, shared with the sweep (default ${budget.ENV}, else "
                             # argparse %-formats help: the default's % doubled
                             f"{budget.DEFAULT.replace('%', '%%')}, at least 1; "
                             "docs/healthcheck.md)")
    parser.add_argument("--timeout", type=_seconds, default=probes.TOOL_TIMEOUT_S,
                        metavar="S", help="seconds one tool may take "
                        f"(default {probes.TOOL_TIMEOUT_S:g})")
    parser.add_argument("--clear-kernel-log", action="store_true",
                        help="acknowledge every record now in the kernel log (an Xid, "
                             "once the GPU is reset): later runs judge only newer ones; "
                             "then run as usual")


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()   # the run's deadline counts from here
    if not args.root.is_dir():
        print(f"ocibench healthcheck: --root {args.root}: not a directory", file=sys.stderr)
        return check.USAGE
    try:
        shape = shapes.load(args.shape or shapes.detect())
        probes.vendor_of(shape)
        drain_budget = budget.configured(args.drain_budget)
    except (shapes.ShapeError, accelerators.VendorError, budget.BudgetError) as err:
        print(f"ocibench healthcheck: {err}", file=sys.stderr)
        return check.USAGE
    node = args.node or check.node_name()
    bad = hostnames.why_not(node)
    if bad:
        where = "--node" if args.node else "this node's name ($SLURMD_NODENAME, else the host name)"
        print(f"ocibench healthcheck: {where}: {bad}", file=sys.stderr)
        return check.USAGE
    options = check.Options(shape=shape, root=args.root, node=node,
                            state_path=args.state, dry_run=args.dry_run,
                            prolog=args.prolog, deadline_s=args.deadline,
                            tool_timeout_s=args.timeout,
                            interval_s=check.slurm_interval(),
                            history_db=args.history or paths.history_db(),
                            budget=drain_budget, clear_kernel_log=args.clear_kernel_log,
                            started=started, slurm_window_s=args.slurm_time)
    outcome = check.check(options)
    print(f"healthcheck of {outcome.state.node} against {shape.name}")
    print("\n".join(outcome.lines))
    return check.exit_code(outcome, args.prolog)
