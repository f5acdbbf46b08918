"""Generate each shape's Spack configuration scope from its shape file.

Without --shape: every known shape, plus detected.yaml (the scope spack.yaml uses
when OCIBENCH_SHAPE is unset) pointing at the shape this machine is.  With --site FILE:
only this machine's site scope, from --require, --external and --not-buildable
(ocibench.spack.site_scope).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ocibench import paths, shapes
from ocibench.node import machine
from ocibench.spack import scopes as spack_config
from ocibench.spack import site_scope

PRINTABLE = {
    "modulepath": "the directory to `module use` for the shape (its tree's Core level)",
    "module-root": "the root of the shape's Lmod tree",
    "spack-root": "the pinned Spack",
    "generated-dir": "where the generated scopes go",
}


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shape", metavar="SHAPE",
                        help="only this shape (default: every known shape and detected.yaml)")
    parser.add_argument("--out", metavar="DIR", type=Path, default=spack_config.GENERATED_DIR,
                        help="output directory, or '-' to print the scope "
                             "(default: site/spack/generated)")
    parser.add_argument("--detect", action="store_true",
                        help="re-run Spack's compiler/external detection for machine-"
                             "described shapes (local) instead of using its cached result")
    site = parser.add_argument_group(
        "site scope", "write this machine's site scope (site/local/site.yaml) instead")
    site.add_argument("--site", metavar="FILE", type=Path,
                      help="write the site scope to FILE from the options below")
    site.add_argument("--require", action="append", default=[], metavar="PKG=SPEC",
                      help="packages:PKG:require gets SPEC (repeatable)")
    site.add_argument("--external", action="append", default=[], metavar="SPEC=PREFIX",
                      help="an external of SPEC's package at PREFIX, which is then not "
                           "buildable (repeatable)")
    site.add_argument("--not-buildable", action="append", default=[], metavar="PKG",
                      help="packages:PKG:buildable: false (repeatable)")
    parser.add_argument("--print", dest="show", choices=sorted(PRINTABLE), metavar="WHAT",
                        help="print one path instead of generating: "
                             + "; ".join(f"{k}: {v}" for k, v in PRINTABLE.items()))


def run(args: argparse.Namespace) -> int:
    given = args.require or args.external or args.not_buildable
    if args.site or given:
        return _site(args)
    if args.show:
        shape = args.shape or shapes.detect()
        shapes.shape_path(shape)  # unknown shape: ShapeError listing the known ones
        print({
            "modulepath": lambda: spack_config.modulepath(shape),
            "module-root": lambda: paths.module_root(shape),
            "spack-root": paths.spack_root,
            "generated-dir": lambda: spack_config.GENERATED_DIR,
        }[args.show]())
        return 0
    if str(args.out) == "-":
        shape = shapes.load(args.shape or shapes.detect())
        found = (machine.detect_machine(spack_config.GENERATED_DIR, refresh=args.detect)
                 if spack_config.is_machine_described(shape) else None)
        scope = spack_config.derive(shape, found, machine.detect_tools())
        sys.stdout.write(spack_config.render(shape.name, scope))
        return 0
    if args.shape:
        shapes.shape_path(args.shape)
        written = spack_config.write([args.shape], args.out, detect=args.detect)
    else:
        written = spack_config.write(None, args.out, detect=args.detect, detected=shapes.detect())
    for path in written:
        print(path)
    return 0


def _site(args: argparse.Namespace) -> int:
    """Write the site scope; one line and exit 2 on bad input, nothing written."""
    try:
        if not args.site:
            raise site_scope.SiteScopeError("--require, --external and --not-buildable "
                                            "go with --site FILE")
        data = site_scope.scope(args.require, args.external, args.not_buildable)
        site_scope.write(args.site, data)
    except site_scope.SiteScopeError as err:
        print(f"ocibench spack-config: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"ocibench spack-config: {args.site}: cannot write: {err.strerror or err}",
              file=sys.stderr)
        return 2
    print(args.site)
    return 0
