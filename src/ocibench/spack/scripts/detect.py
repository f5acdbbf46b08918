"""Print, as JSON, what ``spack compiler find`` / ``spack external find`` find here.

Run as ``spack python detect.py PKG...``.  This calls the same detection code as
those two commands (spack.detection.by_path), but prints the result instead of
writing it into one of Spack's own configuration scopes: ``make setup`` stores it
in the generated, git-ignored scope of the machine-described shapes (local), and
the per-user Spack instance stays untouched (nothing here writes a configuration file,
see the scope below).  Output: {"externals": {package: [external entry]},
"skipped": {package: why}}.
"""

import json
import re
import sys

import spack.config
import spack.detection
import spack.detection.path
import spack.llnl.util.tty
import spack.repo
from spack.detection.common import _pkg_config_dict

# Spack gives each package's detection 60 s and then drops the package with only a
# debug message.  A freshly unpacked Spack needs longer than that for Open MPI (70 s
# measured on 2 cores, 140 s under load: it compiles its package repository's Python,
# and the recipe runs a compiler detection of its own, below), so the first offline
# `make install` planned Open MPI from source.  Detection runs once per `make setup`;
# a slow one costs little, a dropped one costs the install.
spack.detection.path.DETECTION_TIMEOUT = max(spack.detection.path.DETECTION_TIMEOUT, 600)

# Every write below goes to this in-memory scope on top of all others, never to a file:
# the builtin openmpi recipe (releases/v2025.11, determine_variants ->
# get_spack_compiler_spec) calls spack.compilers.config.find_compilers, which detects
# compilers and writes them into the highest-precedence scope (the Spack instance's
# etc/spack or ~/.spack) and returns those not configured before.  On a Spack with no
# compilers configured that list is not empty, and the recipe then fails on it
# (`'Spec' object has no attribute 'cc'`): Open MPI was dropped on the first run and
# found on the second, when the compilers had been written.
memory = spack.config.InternalConfigScope("ocibench-detect", {})
memory.writable = True  # the highest writable scope takes Spack's writes; it has no file
spack.config.CONFIG.push_scope(memory)

# Spack drops a package whose detection timed out or raised with a debug message only:
# kept here, so that `make setup` can say why a package it needs was not found.  (A
# recipe that fails on one prefix is reported by a Python warning from Spack's worker
# process, on stderr: ocibench.node.machine reads that.)
skipped = {}
_spack_debug = spack.llnl.util.tty.debug


def _keep_skips(message, *args, **kwargs):
    found = re.match(r"\[EXTERNAL DETECTION\] Skipping (\S+?): (.*)", str(message), re.S)
    if found:
        lines = [line.strip() for line in found.group(2).strip().splitlines() if line.strip()]
        skipped[found.group(1).split(".")[-1]] = lines[-1] if lines else "skipped"
    _spack_debug(message, *args, **kwargs)


spack.llnl.util.tty.debug = _keep_skips

wanted = sys.argv[1:]
compiler_packages = set(spack.repo.PATH.packages_with_tags("compiler"))
compilers = [p for p in wanted if p in compiler_packages]
found = dict(spack.detection.by_path(compilers)) if compilers else {}
# Configured (in memory), the recipe's find_compilers finds no new compiler.
spack.detection.update_configuration(found, buildable=True)
found.update(spack.detection.by_path([p for p in wanted if p not in compiler_packages]))

out = {}
for name, specs in sorted(found.items()):
    entries = _pkg_config_dict(specs).get("externals") or []
    if entries:
        out[name] = [json.loads(json.dumps(e, default=str)) for e in entries]
skipped = {name: why for name, why in skipped.items() if name not in out}
json.dump({"externals": out, "skipped": skipped}, sys.stdout, indent=1, sort_keys=True)
print()
