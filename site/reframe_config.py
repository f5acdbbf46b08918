"""ReFrame configuration of oci-hpc-bench: every system, partition and environment is
derived from the shape files in site/shapes/ by ocibench.reframe.site (read its
docstring); nothing here is kept by hand per shape.

    reframe -C site/reframe_config.py -c checks/ -l             # the detected shape
    reframe -C site/reframe_config.py -c checks/ -r --system BM_Optimized3_36

The system is the shape that `ocibench shape` detects ($OCIBENCH_SHAPE, else the OCI
instance metadata, else `local`); --system picks another (a shape's name with '.'
replaced by '_').  Importing ocibench.reframe.launchers registers the `mpirun`
launchers the partitions use.
"""

import os
import sys
from pathlib import Path

# This checkout's src/: the project is never pip-installed (README), so a ReFrame
# started outside `spack env activate .` finds ocibench here.  PYTHONPATH too: the
# checks import it in ReFrame's process, and every job runs `python3 -m ocibench...`
# (provenance, the module audit), with the environment ReFrame hands the job.
_SRC = str(Path(__file__).resolve().parents[1] / "src")
if _SRC not in sys.path:
    sys.path.insert(0, _SRC)
if _SRC not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [_SRC, os.environ.get("PYTHONPATH")]))

import ocibench.reframe.launchers  # noqa: E402, F401  (registers the launchers)
from ocibench.reframe.site import build  # noqa: E402

site_configuration = build()
