"""Write the acceptance report (HTML, JSON, PNG plots) from ReFrame run reports and evaluations.

Every figure: measured, documented (with its source), their ratio, the fraction of the
physical limit of the link or memory involved, and the verdict; with the provenance of
every result.  See docs/report.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ocibench import paths

#: Where ReFrame's run reports go (ocibench.reframe.site: $OCIBENCH_REPORT_DIR, else
#: <repo>/reports); the acceptance report goes beside them by default.
REPORTS_DIR = Path(os.environ.get("OCIBENCH_REPORT_DIR") or paths.REPO_ROOT / "reports")


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="+", type=Path, metavar="FILE",
                        help="ReFrame JSON run report (--report-file) or "
                             "`ocibench evaluate --json` output")
    parser.add_argument("-o", "--output", type=Path, default=REPORTS_DIR / "acceptance",
                        metavar="DIR", help="directory for report.html, report.json and the "
                        f"plots (default: {REPORTS_DIR / 'acceptance'})")
    parser.add_argument("--provenance", type=Path, metavar="FILE",
                        help="provenance.json for the evaluation inputs (default: the "
                             "provenance.json beside each evaluation file, if any)")


def run(args: argparse.Namespace) -> int:
    try:  # here, not at the top: every ocibench command imports this module
        from ocibench import report
    except ModuleNotFoundError as err:
        if err.name not in ("matplotlib", "jinja2"):
            raise
        print(f"ocibench report: the plots and the page need {err.name}: "
              "pip install 'ocibench[report]'", file=sys.stderr)
        return 2
    try:
        summary = report.build(args.inputs, args.output, args.provenance)
    except (report.InputError, report.OutputError) as err:
        print(f"ocibench report: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"ocibench report: cannot write {err.filename}: {err.strerror}", file=sys.stderr)
        return 2
    figures = ", ".join(f"{n} {v}" for v, n in summary["verdicts"].items())
    runs = ", ".join(f"{n} {s}" for s, n in summary["runs"].items())
    print(f"{args.output / 'report.html'}: {len(summary['shapes'])} shape(s); "
          f"figures: {figures}; runs: {runs}")
    return 0
