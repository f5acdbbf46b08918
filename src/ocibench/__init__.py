"""oci-hpc-bench: the OCI HPC tutorials' benchmark stack as software."""

__version__ = "0.1.0"
