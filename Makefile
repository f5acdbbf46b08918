# oci-hpc-bench: see README.md.  Every target is a thin wrapper over a script.
SHELL := /bin/bash
.DEFAULT_GOAL := help

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

setup:  ## pinned Spack, builtin packages, Python tools and Lmod into the per-user cache
	bash scripts/setup.sh

install: setup  ## spack install for this shape, then its Lmod module tree
	bash scripts/install.sh

test:  ## lint, then the test suite (what CI runs)
	bash scripts/test.sh

lint:  ## ruff and shellcheck only (make test runs them first)
	bash scripts/lint.sh

bundle:  ## everything an air-gapped node needs for `make install OCIBENCH_BUNDLE=<dir>` (docs/spack-env.md)
	bash scripts/bundle.sh

.PHONY: help setup install test lint bundle

test-cluster:  ## multi-node checks through a Slurm cluster of network namespaces on this machine (root; docs/cluster.md)
	bash scripts/cluster/test.sh

.PHONY: test-cluster
