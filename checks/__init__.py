"""The oci-hpc-bench ReFrame checks (run with site/reframe_config.py; see docs/checks.md).

One module per benchmark family - osu, nccl_tests, imb, stream, perftest, nvbandwidth,
babelstream, transferbench - over the shared base in :mod:`checks.base`.  The modules
import each other relatively, so ReFrame loads them as this package (``reframe -c
checks/``) and Python can import them too (``import checks.osu`` from the repository
root).
"""
