"""The ReFrame site configuration, derived from the shape files.

``site/reframe_config.py`` is one line: ``site_configuration = build()``.  Everything
here is read from ``site/shapes/<shape>.yaml``; a new site edits a shape file, never
this module.

Systems
    One per shape file (:func:`ocibench.shapes.known_shapes`), ``local`` included.
    ReFrame system names cannot hold dots, so a shape's system is its name with ``.``
    replaced by ``_`` (``BM.GPU4.8`` -> ``BM_GPU4_8``, :func:`system_name`).  ReFrame
    finds the system through ``autodetect_methods``: :func:`detected_system` gives the
    system of the shape :func:`ocibench.shapes.detect` finds, and each system's only
    "host name" is its own name; ``--system`` names another.  Partitions are chosen
    by features, never by host name.  A shape file that does not validate
    leaves out its own system only, with a warning on stderr naming the file and the
    fault (:func:`load_shapes`); the shape files are read from
    :func:`ocibench.shapes.shapes_dir` (``$OCIBENCH_SHAPES_DIR``).

Partitions
    ``local``: one partition ``default`` (local scheduler, one node).  Every other
    shape: ``single`` (one node per job) and ``multi`` (feature ``multinode``).  With
    ``scheduler: slurm`` both submit to Slurm and the multi-node partition writes the
    allocation's hosts to a host file; with ``scheduler: none`` jobs run on the node
    ReFrame runs on, and ``multi`` reaches other nodes through the host file a site
    names (``cluster.hostfile`` or ``$OCIBENCH_HOSTFILE``), as the seeds do.  The
    launcher is :mod:`ocibench.reframe.launchers` (the seeds' ``mpirun`` lines).

Features (partition)
    ``cpu``; ``gpu``, the vendor's feature and its collective library when the
    shape has GPUs (``+nvgpu nccl``, ``+amdgpu rccl``: ocibench.accelerators); ``rdma`` when its
    network has RDMA; ``slurm`` under Slurm; ``multinode`` on ``multi``.

Processor and devices (partition)
    ReFrame's own records of the hardware, from the shape: ``processor`` (CPUs,
    CPUs per core, sockets) and ``devices`` (``[{type: gpu, arch, num_devices}]``, the
    arch as the vendor's row of :mod:`ocibench.accelerators` spells it: ``sm_80``).
    Checks read them from ``current_partition``.

Extras (partition)
    What ReFrame's partition has no field for: ``shape``; the node's layout as the
    placements read it (:attr:`ocibench.shapes.Shape.topology`: ``numa_nodes``
    (``[{id, socket, cores: [first, last]}]``), ``gpus`` (count per node),
    ``gpu_numa`` (NUMA node of GPU *i*)); ``memory_gib``,
    ``nodes`` (nodes a job may span in this partition), ``ucx_net_devices``
    (``{mpi, nccl}``), ``scheduler``, ``rdma_hcas`` (the RDMA devices the perftest checks
    run on: ``network.rdma_nics``; on ``local`` those of /sys/class/infiniband), ``gid_index``
    (their RoCE GID index, perftest's ``-x``: :attr:`ocibench.shapes.Shape.gid_index`),
    ``stream_threads`` (the OMP_NUM_THREADS of the shape's STREAM figures, if any) and
    ``nccl_sizes`` (nodes -> the size options of each documented nccl-tests range:
    :func:`nccl_size_ranges`).

Environments (features; :data:`ENVIRONMENTS`)
    Derived from the registry (:mod:`ocibench.benchmarks`), never listed here: one per
    entry's ``module`` and per MPI it runs with (``mpis``), named after the module
    (``omb``, features +omb +openmpi), with the MPI where there are several
    (``imb-openmpi``, ``imb-intelmpi``: +imb +intel-mpi); a check selects its own with
    :func:`prog_environs`.  The vendor rows (ocibench.accelerators) decide the rest: a
    module that is a vendor's collective tests is the shape's vendor's (rccl-tests on
    AMD); one that is a vendor's copy-ceiling tool is unavailable, with the reason, on
    another vendor's GPUs.  An entry that runs on the RDMA devices (``rdma``: perftest)
    is unavailable where the shape has none or no build of it in its stack.  Each
    audits the shape's Lmod tree (:func:`ocibench.paths.module_root`) and
    ``$MODULEPATH`` (:mod:`ocibench.node.module_audit`), ``module use``-s the tree and
    loads the modules the tutorials load (``module load openmpi omb``; on GPU shapes
    the vendor's toolkit and collective library first, ocibench.accelerators).
    ``extras.mpi_version`` is the shape's ``software.stack.openmpi`` (``any`` when it
    names no version).  An environment that the shape cannot offer (Intel MPI not in
    ``software.stack``) still exists, with ``extras.unavailable`` giving the reason, so
    that its checks are listed and then skipped with that reason.

Optional shape fields read here (all under ``cluster:``; absent on most shapes)::

    cluster:
      nodes: 4               # nodes a multi-node job may use (default: see below)
      partition: gpu         # Slurm partition (sbatch -p); default: Slurm's default
      access: [--account=x]  # more sbatch options
      hostfile: ~/hostlist.txt   # scheduler none: the seeds' host list
      accounting: false      # Slurm without slurmdbd: squeue + scontrol, not sacct
                             # (ocibench.reframe.slurm)
      cancel_reasons: [...]  # pending reasons (squeue %r up to its first comma) on
                             # which ReFrame cancels a job, besides ReqNodeNotAvail

Without ``cluster.nodes``: under Slurm the node count ``sinfo`` reports for the
detected shape, else the largest run the seeds document (4 nodes); without a
scheduler, the number of hosts in the host file (1 if there is none).
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ocibench import accelerators, benchmarks, paths, shapes
from ocibench.reframe.launchers import HOSTFILE_VAR, INTELMPI, OPENMPI
from ocibench.reframe.slurm import SQUEUE

#: Environment variable: where the perflogs go (default: <repo>/perflogs).
PERFLOG_ENV = "OCIBENCH_PERFLOG_DIR"
#: Environment variable: where ReFrame's JSON run reports go (default: <repo>/reports).
REPORT_ENV = "OCIBENCH_REPORT_DIR"

#: Nodes assumed for a Slurm shape that states none and is not the detected one:
#: the largest run in the seeds (osu_allreduce, IMB Allreduce: 4 nodes).
DEFAULT_SLURM_NODES = 4

#: Seconds ``sinfo`` may take at configuration time.
SINFO_TIMEOUT_S = 5

#: ``software.stack`` keys that mean the shape's stack has Intel MPI.
INTEL_MPI_STACK_KEYS = ("intel-oneapi-mpi", "intel-mpi")


@dataclass(frozen=True)
class Environment:
    """One programming environment: the modules a benchmark's checks load."""

    name: str
    #: What checks select it by (``valid_prog_environs = ["+omb"]``).
    features: tuple[str, ...]
    #: The benchmark's module (modules.yaml projections).
    module: str
    #: The MPI it runs with (its module is loaded first), or None.
    mpi: str | None = None
    #: Whether it loads the GPU modules first, on a shape with GPUs.
    gpu: bool = False
    #: Whether it runs on the RDMA devices themselves (rdma_unavailable).
    rdma: bool = False


def environment_name(module: str, mpi: str | None, mpis: tuple[str, ...]) -> str:
    """An environment's name: its module's, with the MPI where the module is built with
    several (``imb-openmpi``, ``imb-intelmpi``)."""
    return f"{module}-{mpi.replace('-', '')}" if mpi and len(mpis) > 1 else module


def _derived_environments() -> tuple[Environment, ...]:
    """One environment per module of the registry and per MPI it runs with, in the
    registry's order: the checks of one module share it, and it loads the GPU modules
    where any of them uses the GPUs."""
    found: dict[str, Environment] = {}
    for spec in benchmarks.CHECKS.values():
        for mpi in spec.mpis or (None,):
            name = environment_name(spec.module, mpi, spec.mpis)
            env = found.get(name) or Environment(
                name, (spec.module, mpi) if mpi else (spec.module,), spec.module, mpi)
            found[name] = replace(env, gpu=env.gpu or spec.gpu, rdma=env.rdma or spec.rdma)
    return tuple(found.values())


#: The environments, derived from the registry (ocibench.benchmarks: each entry's
#: ``module``, ``mpis``, ``gpu``, ``rdma``); never written here.
ENVIRONMENTS: tuple[Environment, ...] = _derived_environments()


def prog_environs(check: str, mpi: str | None = None) -> list[str]:
    """A check's ``valid_prog_environs``: the features of its entry's environment (with
    ``mpi``, the one of that MPI, where the entry offers several)."""
    spec = benchmarks.spec(check)
    chosen = mpi if mpi in spec.mpis else (spec.mpis[0] if spec.mpis else None)
    return [" ".join(f"+{feature}" for feature in
                     ((spec.module, chosen) if chosen and len(spec.mpis) > 1
                      else (spec.module,)))]


#: The size parameters of nccl-tests (ocibench.benchmarks), as a shape's figures give them.
NCCL_SIZE_PARAMS = ("begin", "end", "factor", "step")


def system_name(shape: str) -> str:
    """The ReFrame system of a shape: its name with '.' replaced by '_'."""
    return shape.replace(".", "_")


# --------------------------------------------------------------------------- Lmod

def find_lmod() -> tuple[str | None, Path | None]:
    """Lmod's command and its bash init script, or (None, None) without Lmod."""
    roots = [os.environ.get("LMOD_PKG"), "/usr/share/lmod/lmod", "/opt/apps/lmod/lmod",
             "/usr/local/lmod/lmod"]
    cmd = os.environ.get("LMOD_CMD")
    for root in filter(None, roots):
        init = Path(root) / "init" / "bash"
        exe = Path(root) / "libexec" / "lmod"
        if init.is_file() and exe.is_file():
            return cmd or str(exe), init
    return cmd, None


def module_dirs(shape: str) -> list[Path]:
    """The Core directories of a shape's Lmod tree (Spack's <root>/<arch>/Core)."""
    root = paths.module_root(shape)
    found = [Path(p) for p in sorted(glob.glob(str(root / "Core")))
             + sorted(glob.glob(str(root / "*" / "Core")))]
    return [p for p in found if p.is_dir()]


def tree_modules(root: Path) -> set[str]:
    """The module names a Lmod tree holds: each directory below ``root`` with a
    ``<version>.lua`` in it, at any level of the hierarchy (Spack's
    ``<arch>/Core/openmpi/4.1.4.lua``, ``<arch>/openmpi/4.1.4-<hash>/Core/omb/7.4.lua``)."""
    return {Path(top).name for top, _, files in os.walk(root)
            if any(name.endswith(".lua") for name in files)}


def package_of_module(module: str) -> str:
    """The Spack package whose module users load as ``module`` (modules.yaml's
    projections read backwards: omb is osu-micro-benchmarks)."""
    import yaml  # as paths.module_name: only where a tree is judged

    conf = yaml.safe_load(paths.MODULES_YAML.read_text())
    projections = conf["modules"]["default"]["lmod"].get("projections", {})
    named = {str(p).split("/")[0]: package for package, p in projections.items()
             if package != "all" and "{name}" not in str(p).split("/")[0]}
    return named.get(module, module)


def absent_modules(shape: shapes.Shape, modules: list[str], detected: bool,
                   held: set[str] | None = None) -> str | None:
    """Why a check cannot run because its software is not installed, or None.

    Judged only where this machine sees what the jobs will load: a tree with a
    ``Core`` level (the modules it holds must include each of ``modules``), or, on
    ``local``, whose jobs run here, no tree at all.  A tree this machine cannot see
    (a cluster's tree only on its compute nodes) is left to the job, which fails
    naming it: absent here is not absent there.  The reason names each module, its
    Spack package and the step that installs it.  ``held``: the tree's modules, when
    the caller listed them already (:func:`tree_modules`)."""
    root = paths.module_root(shape.name)
    install = "make install" if detected else f"OCIBENCH_SHAPE={shape.name} make install"
    if not module_dirs(shape.name):
        if not shape.is_local:
            return None
        return (f"not installed: no Lmod module tree for shape {shape.name} at {root} "
                f"(`{install}` builds the stack and its tree)")
    held = tree_modules(root) if held is None else held
    missing = [m for m in modules if m not in held]
    if not missing:
        return None
    named = ", ".join(f"{m} (Spack package {package_of_module(m)})" for m in missing)
    return (f"not installed: no module {named} in the Lmod tree {root} "
            f"(`{install}` builds the {shape.name} stack into it)")


def module_use_cmds(root: Path, dirs: list[Path]) -> list[str]:
    """The job's lines that put a tree on MODULEPATH: its audit first.

    Before Lmod runs any modulefile, the audit (ocibench.node.module_audit) refuses the
    tree and $MODULEPATH unless nobody but root and the job's user can change them;
    the job then stops here, printing "ocibench: unsafe module tree: <path>: ...", the
    check's reason.  Since nobody else can change what was audited, the loads that
    follow read what the audit judged: there is no window to race.
    """
    audit = f"{shlex.quote(sys.executable)} -m ocibench.node.module_audit {shlex.quote(str(root))}"
    return [audit] + [f"module use {shlex.quote(str(d))}" for d in dirs]


# --------------------------------------------------------------------------- cluster

def _hostfile(shape: shapes.Shape, detected: bool) -> Path | None:
    name = os.environ.get(HOSTFILE_VAR) if detected else None
    name = name or (shape.data.get("cluster") or {}).get("hostfile")
    return Path(os.path.expanduser(name)) if name else None


def _hosts_in(path: Path | None) -> int:
    if not path or not path.is_file():
        return 0
    lines = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    return len({line.split()[0] for line in lines if line})


def _sinfo_nodes(partition: str | None) -> int | None:
    if not shutil.which("sinfo"):
        return None
    argv = ["sinfo", "-h", "-N", "-o", "%N"] + (["-p", partition] if partition else [])
    try:
        out = subprocess.run(argv, capture_output=True, text=True,
                             timeout=SINFO_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    names = {line.strip() for line in out.stdout.splitlines() if line.strip()}
    return len(names) if out.returncode == 0 and names else None


def cluster_nodes(shape: shapes.Shape, detected: bool) -> int:
    """Nodes a multi-node job of this shape may use (see the module docstring)."""
    cluster = shape.data.get("cluster") or {}
    if cluster.get("nodes"):
        return int(cluster["nodes"])
    if shape.data["scheduler"] == "slurm":
        counted = _sinfo_nodes(cluster.get("partition")) if detected else None
        return counted or DEFAULT_SLURM_NODES
    return max(1, _hosts_in(_hostfile(shape, detected)))


# --------------------------------------------------------------------------- pieces

def has_intel_mpi(shape: shapes.Shape) -> bool:
    stack = shape.data["software"].get("stack") or {}
    return any(key in stack for key in INTEL_MPI_STACK_KEYS)


def partition_extras(shape: shapes.Shape, nodes: int) -> dict[str, Any]:
    return {
        "shape": shape.name,
        **shape.topology,   # numa_nodes, gpus, gpu_numa (ocibench.placement reads them)
        "memory_gib": float(shape.data["memory"].get("size_gib") or 0),
        "nodes": nodes,
        "ucx_net_devices": dict(shape.ucx_net_devices),
        "scheduler": shape.data["scheduler"],
        "rdma_hcas": rdma_hcas(shape),
        "gid_index": shape.gid_index,
        "stream_threads": _documented_param(shape, "stream", "threads"),
        "nccl_sizes": nccl_size_ranges(shape),
    }


def rdma_hcas(shape: shapes.Shape) -> list[str]:
    """The RDMA devices the perftest checks run on: the shape's cluster-network NICs
    (``network.rdma_nics``, :attr:`ocibench.shapes.Shape.hcas`); on ``local``, every
    device of /sys/class/infiniband."""
    if shape.is_local:
        return sorted(Path(p).name for p in glob.glob("/sys/class/infiniband/*"))
    return shape.hcas


def rdma_unavailable(shape: shapes.Shape, module: str) -> str | None:
    """Why the checks that run ``module`` on the RDMA devices themselves (perftest:
    the registry's ``rdma``) cannot run on this shape, or None when they can."""
    if not rdma_hcas(shape):
        if shape.is_local:
            return "no RDMA devices on this machine (/sys/class/infiniband is empty)"
        return (f"{shape.name} has no RDMA devices: no network.rdma_nics in "
                f"site/shapes/{shape.name}.yaml")
    stack = shape.data["software"].get("stack") or {}
    if module not in stack and package_of_module(module) not in stack:
        return (f"{shape.name} has no {module} in software.stack of "
                f"site/shapes/{shape.name}.yaml (add {package_of_module(module)} to build it)")
    return None


def _documented_param(shape: shapes.Shape, check: str, name: str) -> Any:
    """The value the shape's documented figures of ``check`` give ``name`` (None when
    they give none or disagree)."""
    found = {f["params"][name] for f in shape.figures
             if f["check"] == check and "values" in f and name in f["params"]}
    return found.pop() if len(found) == 1 else None


def nccl_size_ranges(shape: shapes.Shape) -> dict[str, list[dict[str, Any]]]:
    """nodes -> the distinct size options of the shape's nccl-tests figures at that node
    count, in the order of the shape file (``{}``: a figure that names none, the seeds'
    -b 10G -e 10G).  Every figure that is judged (``values`` or a ``floor``) counts: a
    run at other sizes compares nothing with it (BM.GPU.MI300X.8, one node: OCI's floor
    at -b 1G -e 16G -f 2 and AMD's at -b 8 -e 8G -f 2 need a run each)."""
    ranges: dict[str, list[dict[str, Any]]] = {}
    for fig in shape.figures:
        if fig["check"] == "nccl_all_reduce_perf" and ("values" in fig or "floor" in fig):
            given = {k: fig["params"][k] for k in NCCL_SIZE_PARAMS if k in fig["params"]}
            found = ranges.setdefault(str(fig["params"].get("nodes", 1)), [])
            if given not in found:
                found.append(given)
    return ranges


def _features(shape: shapes.Shape) -> list[str]:
    features = ["cpu"]
    vendor = accelerators.of(shape.gpus)
    if vendor:
        features += ["gpu", vendor.reframe_feature, vendor.collective_package]
    if shapes.rdma_network(shape.data):
        features.append("rdma")
    if shape.data["scheduler"] == "slurm":
        features.append("slurm")
    return features


def _processor(shape: shapes.Shape) -> dict[str, Any]:
    per_core = 2 if shape.cpu.get("smt") else 1
    sockets = int(shape.cpu["sockets"]) or 1
    return {
        "num_cpus": shape.cores * per_core,
        "num_cpus_per_core": per_core,
        "num_sockets": sockets,
        "num_cpus_per_socket": shape.cores * per_core // sockets,
    }


def gpu_arch(shape: shapes.Shape) -> tuple[accelerators.Accelerator, str]:
    """The vendor row and the architecture of a shape's GPUs (``gpus.{vendor, arch}``):
    the one place this layer reads them from a shape file."""
    vendor = accelerators.of(shape.gpus)
    assert vendor is not None  # callers ask only of a shape with GPUs
    return vendor, str(shape.gpus["arch"])


def _devices(shape: shapes.Shape) -> list[dict[str, Any]]:
    """ReFrame's ``devices`` of a partition: the node's GPUs, as the vendor spells
    their architecture (``sm_80``)."""
    if not shape.gpu_count:
        return []
    vendor, arch = gpu_arch(shape)
    return [{"type": "gpu", "arch": vendor.device_arch(arch), "num_devices": shape.gpu_count}]


def _prepare_cmds(init: Path | None) -> list[str]:
    """First lines of every job script: make sure `module` is Lmod's."""
    if init is None:
        return []
    return [f'[ "$(type -t module)" = function ] || source {init}']


def _partitions(shape: shapes.Shape, detected: bool, init: Path | None) -> list[dict]:
    common = {
        "launcher": OPENMPI,
        "environs": [env.name for env in ENVIRONMENTS],
        "processor": _processor(shape),
        "devices": _devices(shape),
    }
    if shape.is_local:
        return [{
            **common,
            "name": "default",
            "descr": f"this machine ({shape.cpu['model']}), one node",
            "scheduler": "local",
            "max_jobs": 1,  # one benchmark at a time: they would disturb each other
            "features": _features(shape),
            "extras": partition_extras(shape, nodes=1),
            "prepare_cmds": _prepare_cmds(init),
        }]
    cluster = shape.data.get("cluster") or {}
    nodes = cluster_nodes(shape, detected)
    if shape.data["scheduler"] == "slurm":
        access = ([f"--partition={cluster['partition']}"] if cluster.get("partition") else [])
        access += list(cluster.get("access") or [])
        hosts = ["scontrol show hostnames \"$SLURM_JOB_NODELIST\" > ocibench_hosts.txt",
                 f"export {HOSTFILE_VAR}=$PWD/ocibench_hosts.txt"]
        # sacct needs slurmdbd; without accounting: squeue, then scontrol for the exit code
        sched = "slurm" if cluster.get("accounting", True) else SQUEUE
        # A sweep (ocibench sweep) submits one job per node group of a wave at once:
        # up to one per node, so every node of the cluster may hold one.
        jobs = max(16, nodes)
        single = {"scheduler": sched, "access": access, "max_jobs": jobs}
        multi = {"scheduler": sched, "access": access, "max_jobs": jobs}
    else:
        hostfile = _hostfile(shape, detected)
        hosts = [f"export {HOSTFILE_VAR}={hostfile}"] if hostfile else []
        single = {"scheduler": "local", "max_jobs": 1}
        multi = {"scheduler": "local", "max_jobs": 1}
    return [
        {**common, **single, "name": "single",
         "descr": f"{shape.name}: one node per job",
         "features": _features(shape),
         "extras": partition_extras(shape, nodes=1),
         "prepare_cmds": _prepare_cmds(init)},
        {**common, **multi, "name": "multi",
         "descr": f"{shape.name}: up to {nodes} nodes per job",
         "features": _features(shape) + ["multinode"],
         "extras": partition_extras(shape, nodes=nodes),
         "prepare_cmds": _prepare_cmds(init) + hosts},
    ]


def _environments(shape: shapes.Shape, lmod_ok: bool,
                  detected: bool = False) -> list[dict[str, Any]]:
    root = paths.module_root(shape.name)
    dirs = module_dirs(shape.name)
    if not lmod_ok:
        use = [f'echo "ocibench: Lmod is not installed (looked in $LMOD_PKG, '
               f'/usr/share/lmod/lmod): cannot load the module tree {root}" >&2', "exit 1"]
    elif not dirs:
        use = [f'echo "ocibench: no Lmod module tree for shape {shape.name}: '
               f'nothing matches {root}/Core or {root}/*/Core (run make install)" >&2',
               "exit 1"]
    else:
        use = module_use_cmds(root, dirs)
    stack = shape.data["software"].get("stack") or {}
    held = tree_modules(root) if dirs else set()
    # What the vendor rows name: a module that is a vendor's collective tests is the
    # shape's vendor's; one that is a vendor's copy-ceiling tool measures its GPUs only.
    collective_tests = {v.collective_tests_package for v in accelerators.VENDORS.values()}
    ceilings = {v.ceiling_package for v in accelerators.VENDORS.values()}
    envs = []
    for env in ENVIRONMENTS:
        mpi = env.mpi
        extras: dict[str, Any] = {"mpi": mpi or "none",
                                  "launcher": INTELMPI if mpi == "intel-mpi" else OPENMPI}
        if mpi == "openmpi":   # the checks write options that differ by major version
            extras["mpi_version"] = str(stack.get("openmpi") or "any")
        vendor = accelerators.of(shape.gpus)
        bench = env.module
        if bench in collective_tests and vendor:
            # the collective tests of the shape's vendor (rccl-tests on AMD)
            bench = vendor.collective_tests_package
        # an MPI's name is its module's (the registry writes it as users load it)
        modules = (list(vendor.gpu_modules) if env.gpu and vendor else []) + \
            ([mpi] if mpi else []) + [bench]
        prepare = list(use)
        if mpi == "intel-mpi" and not has_intel_mpi(shape):
            extras["unavailable"] = (
                f"{shape.name} has no Intel MPI in software.stack of "
                f"site/shapes/{shape.name}.yaml (add intel-oneapi-mpi to build it)")
            modules, prepare = [], []
        if bench in ceilings and vendor and bench != vendor.ceiling_package:
            extras["unavailable"] = (
                f"{bench} measures another vendor's GPUs: {shape.name}'s are "
                f"{vendor.vendor}'s, whose copy ceilings {vendor.ceiling_package} measures")
            modules, prepare = [], []
        if env.rdma and rdma_unavailable(shape, bench):
            extras["unavailable"] = rdma_unavailable(shape, bench)
            modules, prepare = [], []
        if modules and lmod_ok:
            # checks/base.py skips with it once the check's own skips (GPUs, nodes) passed
            absent = absent_modules(shape, modules, detected, held)
            if absent:
                extras["absent"] = absent
        envs.append({
            "name": env.name,
            "target_systems": [system_name(shape.name)],
            "features": list(env.features),
            "modules": modules,
            "prepare_cmds": prepare,
            "extras": extras,
        })
    return envs


def _sched_options(shape: shapes.Shape) -> dict[str, Any]:
    """cluster.cancel_reasons: a job pending for one of them fails instead of waiting."""
    reasons = (shape.data.get("cluster") or {}).get("cancel_reasons")
    if not reasons:
        return {}
    return {"sched_options": {"slurm_job_cancel_reasons": ["ReqNodeNotAvail"] + list(reasons)}}


def _system(shape: shapes.Shape, detected: bool, lmod_ok: bool,
            init: Path | None) -> dict[str, Any]:
    env_vars = []
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        # Open MPI refuses to start as root (containers, CI) unless told it may.
        env_vars = [["OMPI_ALLOW_RUN_AS_ROOT", "1"], ["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"]]
    return {
        "name": system_name(shape.name),
        "descr": f"{shape.name}: {shape.data['summary']}",
        # what detected_system returns for it (autodetect_methods), nothing else
        "hostnames": [f"^{re.escape(system_name(shape.name))}$"],
        "modules_system": "lmod" if lmod_ok else "nomod",
        "env_vars": env_vars,
        **_sched_options(shape),
        "partitions": _partitions(shape, detected, init),
    }


# --------------------------------------------------------------------------- checks

#: What build() found: this machine's shape and, where its file is broken, why.
#: ReFrame calls detected_system after loading the configuration, in the same
#: process; detecting again could mean asking the OCI metadata service again.
_found: dict[str, str | None] = {}


def detected_system() -> str:
    """ReFrame's autodetection method (the configuration's ``autodetect_methods``):
    the system of the shape this machine is.  ReFrame calls it only when no
    ``--system`` is given.  Where that shape's file is broken it says why on stderr and
    raises; ReFrame then reports that autodetection failed."""
    if "shape" not in _found:
        build([])
    detected, broken = str(_found["shape"]), _found.get("broken")
    if broken:
        print(f"ocibench: this machine's shape {detected} cannot be used: {broken} "
              "(--system names another)", file=sys.stderr)
        raise shapes.ShapeError(broken)
    return system_name(detected)


def _requested_system(argv: list[str]) -> str | None:
    """The --system that this ReFrame invocation asks for, if any: read only to word
    the error for a system that does not exist or is left out (ReFrame's own names
    neither the known systems nor the shape file's fault)."""
    for i, arg in enumerate(argv):
        if arg == "--system" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--system="):
            return arg.split("=", 1)[1]
    return os.environ.get("RFM_SYSTEM") or None


def _check_requested(names: list[str], broken: dict[str, str], argv: list[str]) -> None:
    from reframe.core.exceptions import ConfigError

    requested = _requested_system(argv)
    if not requested:
        return
    system = requested.split(":", 1)[0]
    if system in names:
        return
    if system in broken:
        raise ConfigError(f"ocibench: system {system} is left out: {broken[system]}")
    hint = ""
    if system_name(system) in names:
        hint = (f" (ReFrame system names cannot hold '.': shape {system} is "
                f"--system {system_name(system)})")
    raise ConfigError(f"unknown system {system!r}{hint}; known systems, one per shape "
                      f"file in {shapes.shapes_dir()}: {', '.join(names)}")


#: The shapes the last build() configured, by name, and the directory it read them
#: from: ReFrame's checks take theirs from here (:func:`built_shape`), in the process
#: that loaded the configuration.
_built: dict[str, shapes.Shape] = {}
_built_from: list[Path] = []


def _kept() -> dict[str, shapes.Shape]:
    """What build() configured, while the shapes directory is still the one it read
    (a process that points $OCIBENCH_SHAPES_DIR elsewhere loads afresh)."""
    return _built if _built_from == [shapes.shapes_dir()] else {}


def built_shape(name: str) -> shapes.Shape:
    """The shape ``name`` as the configuration built it (a partition's
    ``extras.shape``), so that a check neither reads its file again nor probes
    ``local`` again; loaded where no configuration was built in this process."""
    return _kept().get(name) or shapes.load(name)


def built_shapes() -> list[shapes.Shape]:
    """Every shape the configuration built (its systems); where none was built in this
    process, every shape file that loads (the broken ones are named by build())."""
    if _kept():
        return list(_kept().values())
    return list(load_shapes(quiet=True)[0].values())


def load_shapes(quiet: bool = False) -> tuple[dict[str, shapes.Shape], dict[str, str]]:
    """Every shape file: (shape name -> Shape, ReFrame system -> why it is left out).

    A broken shape file stops only its own system: the others still load, and the
    broken one is named on stderr each time ReFrame reads this configuration.
    """
    loaded: dict[str, shapes.Shape] = {}
    broken: dict[str, str] = {}
    for name in shapes.known_shapes():
        try:
            loaded[name] = shapes.load(name)
        except shapes.ShapeError as err:
            broken[system_name(name)] = str(err)
            if not quiet:
                print(f"ocibench: warning: system {system_name(name)} left out: {err}",
                      file=sys.stderr)
    return loaded, broken


# --------------------------------------------------------------------------- build

def build(argv: list[str] | None = None) -> dict[str, Any]:
    """The whole ReFrame configuration (raises ConfigError with a one-line reason)."""
    from reframe.core.exceptions import ConfigError

    try:
        detected = shapes.detect()
    except shapes.ShapeError as err:
        raise ConfigError(f"ocibench: {err}") from None
    loaded, broken = load_shapes()
    _found.update(shape=detected, broken=broken.get(system_name(detected)))
    _built.clear()
    _built.update(loaded)
    _built_from[:] = [shapes.shapes_dir()]
    argv = sys.argv[1:] if argv is None else argv
    order = ([detected] if detected in loaded else []) + \
        [n for n in sorted(loaded) if n != detected]
    _check_requested([system_name(n) for n in order], broken, argv)

    lmod_cmd, init = find_lmod()
    lmod_ok = bool(lmod_cmd and init)
    if lmod_ok:
        # ReFrame finds Lmod through LMOD_CMD, which only an initialised shell sets.
        os.environ.setdefault("LMOD_CMD", lmod_cmd)
    else:
        print("ocibench: Lmod not found: modules_system is 'nomod' and every check "
              "will fail at its first line saying so (Debian: apt-get install lmod)",
              file=sys.stderr)

    perflogs = os.environ.get(PERFLOG_ENV) or str(paths.REPO_ROOT / "perflogs")
    reports = os.environ.get(REPORT_ENV) or str(paths.REPO_ROOT / "reports")
    envs = []
    for name in order:
        envs += _environments(loaded[name], lmod_ok, detected=name == detected)
    return {
        # ReFrame picks the system whose name detected_system returns (hostnames above)
        "autodetect_methods": [f"py::{__name__}.detected_system"],
        "systems": [_system(loaded[n], n == detected, lmod_ok, init) for n in order],
        "environments": envs,
        "general": [{
            "trap_job_errors": True,
            # Modules are loaded in the job script only, never in ReFrame's own
            # process: a tree that exists only on the compute nodes (or not yet, for
            # --dry-run and listings) must not stop the run before the job does.
            "resolve_module_conflicts": False,
            "check_search_path": [str(paths.CHECKS_DIR)],
            "report_file": f"{reports}/run-report-{{sessionid}}.json",
        }],
        "logging": [{
            "handlers_perflog": [{
                "type": "filelog",
                "prefix": "%(check_system)s/%(check_partition)s",
                "level": "info",
                "basedir": perflogs,
                "format": ("%(check_job_completion_time)s|%(check_result)s|"
                           "%(check_display_name)s|%(check_system)s:%(check_partition)s|"
                           "%(check_environ)s|%(check_perfvalues)s"),
                "format_perfvars": ("%(check_perf_value)s|%(check_perf_unit)s|"
                                    "%(check_perf_ref)s|%(check_perf_lower_thres)s|"
                                    "%(check_perf_upper_thres)s|"),
                "append": True,
            }],
        }],
    }
