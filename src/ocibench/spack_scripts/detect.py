"""Print, as JSON, what ``spack compiler find`` / ``spack external find`` find here.

Run as ``spack python detect.py PKG...``.  This calls the same detection code as
those two commands (spack.detection.by_path), but prints the result instead of
writing it into one of Spack's own configuration scopes: ``make setup`` stores it
in the generated, git-ignored scope of the machine-described shapes (local), and
the per-user Spack instance stays untouched.  Output: {package: [external entry]}.
"""

import json
import sys

import spack.detection
import spack.detection.path
from spack.detection.common import _pkg_config_dict

# Spack gives each package's detection 60 s and then drops the package with only a
# debug message.  A freshly unpacked Spack needs longer than that for Open MPI (70 s
# measured on 2 cores: it compiles its package repository's Python and runs ompi_info
# on every candidate), so the first offline `make install` planned Open MPI from
# source.  Detection runs once per `make setup`; a slow one costs little, a dropped
# one costs the install.
spack.detection.path.DETECTION_TIMEOUT = max(spack.detection.path.DETECTION_TIMEOUT, 600)

found = spack.detection.by_path(sys.argv[1:])
out = {}
for name, specs in sorted(found.items()):
    entries = _pkg_config_dict(specs).get("externals") or []
    if entries:
        out[name] = [json.loads(json.dumps(e, default=str)) for e in entries]
json.dump(out, sys.stdout, indent=1, sort_keys=True)
print()
