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

import ocibench.reframe.launchers  # noqa: F401  (registers the launchers)
from ocibench.reframe.site import build

site_configuration = build()
