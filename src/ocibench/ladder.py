"""The action ladder: for every failure ocibench finds, what the admin does next.

One table (:data:`LADDER`), read by the healthcheck, preflight, the sweep, ``ocibench
evaluate``, the report and ``ocibench ticket``; docs/ladder.md shows it.  Each entry
(:class:`Rung`) names one failure -- a healthcheck probe, a preflight item, a figure of
the benchmark registry, an NCCL or UCX path verdict, or a class of job failure -- and
gives:

* its **step**, one of :class:`Step`, mildest first: ``rerun`` (measure again before
  acting), ``fix-software`` (with the fix, ``fix``), ``reset-gpu``, ``reboot``,
  ``return-to-oci`` (send the host back, with the fault code);
* its **fault code**: OCI's where OCI's node doctor codes that check
  (:data:`OCI_FAULTS`, transcribed as data from :data:`OCI_SOURCE`), else ours, in the
  ``OCIBENCH-<AREA>-<NNNN>`` namespace (:data:`OURS`);
* the **commands that show the evidence**, for the admin and for the ticket.

A repeat offender (the same failure again after the node was drained for it and put
back) moves one step up (:data:`ESCALATION`): rerun -> reboot, reset-gpu -> reboot,
reboot -> return-to-oci.  Software stays software: a fix that did not hold is the
image's defect, never the host's.

Like the benchmark registry, the table names its own mistake at import (a ValueError
saying which entry and which field), and tests/test_ladder.py derives every probe,
preflight item, figure and path verdict from the code and fails on one without an entry.
To add a probe: add its entry here, under its finding's name (the name a healthcheck
finding or a preflight item carries, less an RDMA port's suffix).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from ocibench import accelerators, benchmarks, metrics


class Step(str, enum.Enum):
    """What the admin does next, mildest first."""

    RERUN = "rerun"
    FIX_SOFTWARE = "fix-software"
    RESET_GPU = "reset-gpu"
    REBOOT = "reboot"
    RETURN_TO_OCI = "return-to-oci"

    def __str__(self) -> str:
        return self.value


STEPS: tuple[Step, ...] = tuple(Step)

#: One step up for a repeat offender.
ESCALATION: dict[Step, Step] = {
    Step.RERUN: Step.REBOOT,
    Step.FIX_SOFTWARE: Step.FIX_SOFTWARE,
    Step.RESET_GPU: Step.REBOOT,
    Step.REBOOT: Step.RETURN_TO_OCI,
    Step.RETURN_TO_OCI: Step.RETURN_TO_OCI,
}

#: The sweep's action (ocibench.metrics.Action: whether --drain takes the node out) for
#: each step: only a rerun leaves the node in service.
SWEEP_ACTION: dict[Step, metrics.Action] = {
    Step.RERUN: metrics.Action.RERUN,
    Step.FIX_SOFTWARE: metrics.Action.FIX_SOFTWARE,
    Step.RESET_GPU: metrics.Action.DRAIN,
    Step.REBOOT: metrics.Action.DRAIN,
    Step.RETURN_TO_OCI: metrics.Action.DRAIN,
}

#: What a failure is of; the name's meaning depends on it.
PROBE = "probe"          # a healthcheck finding (ocibench.health.probes.PROBES)
PREFLIGHT = "preflight"  # a preflight item (ocibench.node.preflight.PROBES, node.rdma)
FIGURE = "figure"        # a check of the benchmark registry (ocibench.benchmarks.CHECKS)
PATH = "path"            # nccl:<fault> (figures.nccl_path.FAULTS), ucx:<capability>
JOB = "job"              # a job that failed before a figure (ocibench.sweep.actions)
KINDS = (PROBE, PREFLIGHT, FIGURE, PATH, JOB)

#: Where OCI's fault codes come from (read, never copied: the codes and their meaning
#: are transcribed below as data).
OCI_SOURCE = ("ai2-compute-gpu/oci-dr-hpc-v2 configs/recommendations.json "
              "@ 1b62d6d3716307c8631ab3fe2962c78f280348e7")

#: OCI's node doctor's checks that have a fault code: check -> (code, what it means).
#: OCI gives one code to several checks (HPCGPU-0008-0001: RDMA link, authentication
#: and nvidia_peermem; -0010-0001: PCIe lanes, eth0, CDFP cabling); transcribed as
#: published.
OCI_FAULTS: dict[str, tuple[str, str]] = {
    "gpu_count_check": ("HPCGPU-0001-0001", "GPU count mismatch"),
    "gpu_mode_check": ("HPCGPU-0001-0002", "GPU MIG mode enabled"),
    "pcie_error_check": ("HPCGPU-0002-0001", "PCIe errors in the system logs"),
    "rdma_nics_count": ("HPCGPU-0003-0001", "RDMA NIC count mismatch"),
    "rx_discards_check": ("HPCGPU-0004-0001", "RX discards over the threshold"),
    "gid_index_check": ("HPCGPU-0005-0001", "GID index out of range"),
    "sram_error_check": ("HPCGPU-0006-0001", "GPU SRAM uncorrectable errors"),
    "eth_link_check": ("HPCGPU-0007-0001", "Ethernet link parameters"),
    "gpu_driver_check": ("HPCGPU-0007-0001", "GPU driver version refused"),
    "link_check": ("HPCGPU-0008-0001", "RDMA link parameters"),
    "auth_check": ("HPCGPU-0008-0001", "RDMA interface not authenticated"),
    "peermem_module_check": ("HPCGPU-0008-0001", "nvidia_peermem not loaded"),
    "nvlink_speed_check": ("HPCGPU-0009-0001", "NVLink speed or count"),
    "pcie_width_missing_lanes_check": ("HPCGPU-0010-0001", "PCIe link width, speed or state"),
    "eth0_presence_check": ("HPCGPU-0010-0001", "eth0 missing"),
    "cdfp_cable_check": ("HPCGPU-0010-0001", "CDFP cabling: GPU PCI address vs module ID"),
    "gpu_clk_check": ("HPCGPU-0011-0001", "GPU clocks below threshold"),
    "fabricmanager_check": ("HPCGPU-0011-0001", "NVIDIA Fabric Manager not running"),
    "hca_error_check": ("HPCGPU-0011-0001", "fatal mlx5 errors in the system logs"),
    "missing_interface_check": ("HPCGPU-0012-0001", "PCIe device missing (revision ff)"),
    "row_remap_error_check": ("HPCGPU-0013-0001", "GPU row remap errors"),
    "gpu_xid_check": ("HPCGPU-0016-0001", "critical GPU Xid errors"),
    "max_acc_check": ("HPCGPU-0017-0001", "MAX_ACC_OUT_READ / ADVANCED_PCI_SETTINGS"),
}

#: Our own codes, for what OCI's doctor does not code: OCIBENCH-<AREA>-<NNNN>.
OURS = re.compile(r"OCIBENCH-(GPU|NET|SW|FIG|PATH|JOB)-[0-9]{4}")
#: The escape a fault code must keep to: it is written into Slurm reasons and file names.
_CODE = re.compile(r"[A-Z0-9-]{1,32}")


@dataclass(frozen=True)
class Rung:
    """One failure's entry.  ``fault``: OCI's code of ``oci_check`` when that is given
    (the two must agree), else ours.  ``fix``: for ``fix-software`` the fix itself; for
    the other steps what to do, in a line."""

    kind: str
    name: str
    step: Step
    fault: str
    meaning: str
    fix: str
    evidence: tuple[str, ...]
    oci_check: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.kind, self.name)

    @property
    def oci_codes(self) -> bool:
        """Whether the fault code is OCI's own (one its support knows)."""
        return self.oci_check is not None

    def check(self) -> None:
        where = f"ladder entry {self.kind}:{self.name}"
        if self.kind not in KINDS:
            raise ValueError(f"{where}: kind {self.kind!r} is not one of {KINDS}")
        if not isinstance(self.step, Step):
            raise ValueError(f"{where}: step {self.step!r} is not one of "
                             f"{', '.join(map(str, STEPS))}")
        if not _CODE.fullmatch(self.fault):
            raise ValueError(f"{where}: fault {self.fault!r} is not a fault code")
        if self.oci_check is not None:
            if self.oci_check not in OCI_FAULTS:
                raise ValueError(f"{where}: oci_check {self.oci_check!r} is no check of "
                                 f"OCI's ({OCI_SOURCE})")
            if OCI_FAULTS[self.oci_check][0] != self.fault:
                raise ValueError(f"{where}: fault {self.fault} is not OCI's code of "
                                 f"{self.oci_check} ({OCI_FAULTS[self.oci_check][0]})")
        elif not OURS.fullmatch(self.fault):
            raise ValueError(f"{where}: fault {self.fault!r}: a code OCI does not give "
                             f"is ours, {OURS.pattern}")
        if not self.meaning.strip() or not self.fix.strip():
            raise ValueError(f"{where}: no meaning or no fix (what to do)")
        if not self.evidence or any(not c.strip() for c in self.evidence):
            raise ValueError(f"{where}: no command that shows the evidence")


# Commands shown as evidence, stated once.
_NV_Q = "nvidia-smi -q"
_AMD_Q = "amd-smi static; amd-smi metric"
_DMESG_GPU = "dmesg -T | grep -iE 'NVRM|Xid|amdgpu'"
_IBSTAT = "ibstat"
_IB_COUNTERS = "grep . /sys/class/infiniband/*/ports/*/counters/{link_downed,port_rcv_errors}"
_LSPCI_LINK = "lspci -vv | grep -E '^[0-9a-f]|LnkSta:'"
_MODULES = "lsmod"
_UCX = "ucx_info -v; ucx_info -d | grep Transport"
_OMPI = "ompi_info --parsable --all | grep -E 'built_with|pml'"
_NCCL_LOG = "the check's output with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV"
_SWEEP_OUT = "ocibench report RUN_DIR (the failing check's output)"


#: A figure missed with no software cause, by what the benchmark measures (the
#: registry's ``parser``; a GPU collective, ``collective``, whatever its parser):
#: (code, step, meaning, evidence).  Derived for every check of the registry, so that a
#: new check has its entry (and a new parser fails here, at import).
_NET = ("ibstat", "grep . /sys/class/infiniband/*/ports/*/counters/{link_downed,"
        "port_rcv_errors}", "ibv_devinfo -v")
_FIGURE_CLASSES: dict[str, tuple[int, Step, str, tuple[str, ...]]] = {
    "mpi": (1, Step.REBOOT, "an MPI figure below its floor", _NET),
    "perftest": (2, Step.REBOOT, "an RDMA figure below its floor", _NET),
    "collective": (3, Step.RESET_GPU, "a GPU collective below its floor",
                   ("the check's output with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV",
                    "nvidia-smi topo -m", "nvidia-smi nvlink -s")),
    "copies": (4, Step.RESET_GPU, "a copy between host and GPU or between GPUs below its "
               "floor", ("nvidia-smi -q -d PCIE,CLOCK", "nvidia-smi topo -m", "amd-smi xgmi")),
    "stream": (5, Step.REBOOT, "host memory bandwidth below its floor",
               ("dmidecode -t memory | grep -E 'Size|Speed'", "numactl -H")),
    "babelstream": (6, Step.RESET_GPU, "GPU memory bandwidth below its floor",
                    ("nvidia-smi -q -d CLOCK,PERFORMANCE", "amd-smi metric")),
}
_CLASS_OF_PARSER = {"omb": "mpi", "imb": "mpi", "perftest": "perftest",
                    "nccl-tests": "collective", "nvbandwidth": "copies",
                    "transferbench-p2p": "copies", "transferbench-a2a": "copies",
                    "stream": "stream", "babelstream": "babelstream"}


def _figure(spec: benchmarks.CheckSpec) -> Rung:
    if spec.parser not in _CLASS_OF_PARSER:
        raise ValueError(f"ladder: check {spec.name}: parser {spec.parser!r} has no class "
                         "of figure (ocibench.ladder._CLASS_OF_PARSER)")
    code, step, meaning, evidence = _FIGURE_CLASSES[
        "collective" if spec.collective else _CLASS_OF_PARSER[spec.parser]]
    what = {Step.RESET_GPU: "reset the node's GPUs (nvidia-smi -r, amd-smi reset), rerun",
            Step.REBOOT: "reboot the node, rerun"}[step]
    return Rung(FIGURE, spec.name, step, f"OCIBENCH-FIG-{code:04d}", f"{spec.name}: {meaning}",
                f"{what}; a figure missed for a software cause shows that cause's entry",
                (_SWEEP_OUT, *evidence))


def _software(kind: str, name: str, code: int, meaning: str, fix: str,
              evidence: tuple[str, ...], oci_check: str | None = None) -> Rung:
    fault = OCI_FAULTS[oci_check][0] if oci_check else f"OCIBENCH-SW-{code:04d}"
    return Rung(kind, name, Step.FIX_SOFTWARE, fault, meaning, fix, evidence, oci_check)


def _both(names: tuple[str, str], *rest: object, **kw: object) -> tuple[Rung, ...]:
    """One entry under the healthcheck's name and preflight's (gpu_count and gpus)."""
    return tuple(Rung(kind, name, *rest, **kw)  # type: ignore[arg-type]
                 for kind, name in zip((PROBE, PREFLIGHT), names))


_NET_NET = _NET

LADDER_ENTRIES: tuple[Rung, ...] = (
    # --- the node's hardware: the healthcheck's probes and preflight's items
    *_both(("gpu_count", "gpus"), Step.REBOOT, "HPCGPU-0001-0001",
           "fewer GPUs, or other GPUs, than the shape has",
           "reboot; if a GPU is still missing, return the host to OCI",
           ("nvidia-smi -L", "lspci -d 10de:", _DMESG_GPU, "amd-smi list"),
           oci_check="gpu_count_check"),
    Rung(PROBE, "xid", Step.RESET_GPU, "HPCGPU-0016-0001",
         "critical Xid errors in the kernel log",
         "drain, reset the GPUs (nvidia-smi -r) or reboot; return the host if they recur",
         ("dmesg -T | grep -i xid", _NV_Q), oci_check="gpu_xid_check"),
    Rung(PROBE, "ras", Step.RESET_GPU, "OCIBENCH-GPU-0001",
         "uncorrectable RAS errors of the AMD GPUs in the kernel log",
         "drain, reset the GPUs (amd-smi reset -G) or reboot; return the host if they recur",
         ("dmesg -T | grep -iE 'amdgpu|ras'", _AMD_Q)),
    Rung(PROBE, "row_remap", Step.RESET_GPU, "HPCGPU-0013-0001",
         "GPU memory rows pending remap or a remap failure",
         "reset the GPUs or reboot (a pending remap takes effect then); a failure: return",
         ("nvidia-smi -q -d ROW_REMAPPER", _NV_Q), oci_check="row_remap_error_check"),
    Rung(PROBE, "bad_pages", Step.REBOOT, "OCIBENCH-GPU-0002",
         "AMD GPU memory pages retired past the threshold",
         "reboot; return the host if the count still grows",
         ("amd-smi bad-pages", _AMD_Q)),
    *_both(("pcie", "pcie"), Step.REBOOT, "HPCGPU-0010-0001",
           "a GPU's PCIe link below the shape's generation or width",
           "reboot; if the link is still degraded, return the host to OCI",
           (_LSPCI_LINK, "nvidia-smi -q -d PCIE"), oci_check="pcie_width_missing_lanes_check"),
    *_both(("nvlink", "nvlink"), Step.RESET_GPU, "HPCGPU-0009-0001",
           "NVLink links down or fewer than the shape has",
           "reset the GPUs (with the fabric manager stopped) or reboot; return if it persists",
           ("nvidia-smi nvlink -s", "nvidia-smi nvlink -e", "nvidia-smi topo -m"),
           oci_check="nvlink_speed_check"),
    *_both(("xgmi", "xgmi"), Step.REBOOT, "OCIBENCH-GPU-0003",
           "xGMI links between the AMD GPUs down or fewer than the shape has",
           "reboot; return the host if it persists",
           ("amd-smi xgmi", "amd-smi topology")),
    Rung(PREFLIGHT, "gpu_numa", Step.REBOOT, "OCIBENCH-GPU-0004",
         "GPUs on other NUMA nodes than the shape says (BIOS NPS setting, or a GPU moved)",
         "check the BIOS NUMA setting, reboot; return the host if it persists",
         ("nvidia-smi topo -m", "cat /sys/bus/pci/devices/*/numa_node", "lscpu")),
    *_both(("rdma", "rdma"), Step.REBOOT, "HPCGPU-0008-0001",
           "an RDMA port missing, down, at a lower rate, without its RoCE GID, flapping "
           "or discarding",
           "reboot; if the port stays down or keeps flapping, return the host to OCI",
           _NET_NET, oci_check="link_check"),
    # an RDMA port's checks that OCI's doctor codes on their own (ocibench.node.rdma.FAULTS):
    # the port's finding leads with the check's name ("gid: ..."), read by entry()
    *_both(("rdma:gid", "rdma:gid"), Step.REBOOT, "HPCGPU-0005-0001",
           "an RDMA port with a GID beyond OCI's indexes 0-3 (an address added to its "
           "interface moves the GID the jobs name)",
           "remove the address added to the port's interface, or reboot; if it persists, "
           "check the oracle-cloud-agent RDMA plugin (v1.46+) and the image",
           ("show_gids", "ip addr show", "grep . /sys/class/infiniband/*/ports/*/gids/*"),
           oci_check="gid_index_check"),
    *_both(("rdma:rx_discards", "rdma:rx_discards"), Step.REBOOT, "HPCGPU-0004-0001",
           "an RDMA port discarding received packets past OCI's threshold (no receive "
           "buffers: PFC or the port's settings)",
           "check the port's PFC and trust settings (the mtu/qos checks), reboot; return "
           "the host if the discards keep rising",
           ("ethtool -S IFACE | grep -E 'rx_prio[0-7]_discards'", "mlnx_qos -i IFACE"),
           oci_check="rx_discards_check"),
    *_both(("rdma:auth", "rdma:auth"), Step.FIX_SOFTWARE, "HPCGPU-0008-0001",
           "an RDMA port not authenticated to the cluster network (802.1X)",
           "rerun (a certificate rotation may have been under way); if it persists, "
           "restart the oracle-cloud-agent plugin",
           ("wpa_cli -i IFACE status", "systemctl status oracle-cloud-agent"),
           oci_check="auth_check"),
    _software(PREFLIGHT, "rdma:mlxconfig", 14,
              "a cluster-network card's MAX_ACC_OUT_READ or ADVANCED_PCI_SETTINGS not as "
              "OCI sets them",
              "mlxconfig -d PCI set the shape's values (node_doctor.rdma_settings.mlxconfig), "
              "then reset the card's firmware (mlxfwreset) or reboot",
              ("mlxconfig -d PCI query MAX_ACC_OUT_READ ADVANCED_PCI_SETTINGS",),
              "max_acc_check"),
    Rung(PROBE, "fabric_manager", Step.FIX_SOFTWARE, "HPCGPU-0011-0001",
         "NVIDIA Fabric Manager not running (CUDA does not initialise on NVSwitch boards)",
         "systemctl enable --now nvidia-fabricmanager; its version must equal the driver's",
         ("systemctl status nvidia-fabricmanager", "journalctl -u nvidia-fabricmanager -n 50",
          "nvidia-smi -q | grep -i -A2 fabric"), oci_check="fabricmanager_check"),
    # OCI's node-doctor checks a shape's node_doctor section lists (ocibench.node.doctor)
    *_both(("mig_mode", "mig_mode"), Step.FIX_SOFTWARE, "HPCGPU-0001-0002",
           "a GPU in MIG mode (the figures are of whole GPUs)",
           "nvidia-smi -mig 0, then reset the GPUs (nvidia-smi -r) or reboot",
           ("nvidia-smi --query-gpu=index,mig.mode.current,mig.mode.pending --format=csv",),
           oci_check="gpu_mode_check"),
    *_both(("sram_errors", "sram_errors"), Step.RETURN_TO_OCI, "HPCGPU-0006-0001",
           "GPU SRAM uncorrectable errors above the shape's threshold",
           "drain and return the host to OCI with the ECC counts",
           ("nvidia-smi -q -d ECC", _NV_Q), oci_check="sram_error_check"),
    *_both(("driver_version", "driver_version"), Step.FIX_SOFTWARE, "HPCGPU-0007-0001",
           "a GPU driver on the shape's refused list, or GPUs on different drivers",
           "install a driver the shape allows (node_doctor.driver), then reboot",
           ("nvidia-smi --query-gpu=index,driver_version --format=csv", "modinfo nvidia"),
           oci_check="gpu_driver_check"),
    *_both(("cdfp_cabling", "cdfp_cabling"), Step.RETURN_TO_OCI, "HPCGPU-0010-0001",
           "a GPU in another module than the shape's map (CDFP cables swapped or unseated)",
           "return the host to OCI: the cabling is theirs to fix",
           ("nvidia-smi -q | grep -E '^GPU |Module Id'",),
           oci_check="cdfp_cable_check"),
    Rung(PROBE, "pcie_errors", Step.REBOOT, "HPCGPU-0002-0001",
         "PCIe AER errors in the kernel log",
         "reboot; if they recur, return the host to OCI with the kernel-log lines",
         ("dmesg -T | grep -iE 'AER|PCIe Bus Error'", _LSPCI_LINK),
         oci_check="pcie_error_check"),
    Rung(PROBE, "hca_errors", Step.REBOOT, "HPCGPU-0011-0001",
         "fatal mlx5 (RDMA NIC) errors in the kernel log",
         "reboot; if they recur, return the host to OCI with the kernel-log lines",
         ("dmesg -T | grep -i mlx5 | grep -iw fatal", _IBSTAT),
         oci_check="hca_error_check"),
    *_both(("gpu_clocks", "gpu_clocks"), Step.FIX_SOFTWARE, "HPCGPU-0011-0001",
           "a GPU's applications clock below the shape's (the GPU runs jobs slower)",
           "nvidia-smi -rac (the default applications clocks), or nvidia-smi -ac "
           "MEMORY,GRAPHICS at the shape's clock",
           ("nvidia-smi -q -d CLOCK", "nvidia-smi -q -d PERFORMANCE"),
           oci_check="gpu_clk_check"),
    *_both(("eth0_presence", "eth0_presence"), Step.REBOOT, "HPCGPU-0010-0001",
           "no eth0 (the host's front-end interface)",
           "reboot; if eth0 is still missing, return the host to OCI",
           ("ip link show", "ls -la /sys/class/net/", "lspci | grep -i ethernet"),
           oci_check="eth0_presence_check"),
    *_both(("eth_link", "eth_link"), Step.REBOOT, "HPCGPU-0007-0001",
           "the front-end interface down or below the shape's speed",
           "reboot; if the link stays down or slow, return the host to OCI",
           ("ip link show", "ethtool eth0", "cat /sys/class/net/eth0/{operstate,speed}"),
           oci_check="eth_link_check"),
    *_both(("missing_interface", "missing_interface"), Step.REBOOT, "HPCGPU-0012-0001",
           "a PCI device reading revision ff (fallen off the bus)",
           "reboot; if a device is missing again within a day, return the host to OCI",
           ("lspci | grep -i 'rev ff'", "dmesg -T | grep -i pci"),
           oci_check="missing_interface_check"),
    # a rack-scale NVLink domain (GB200 NVL72: ocibench.node.nvlink_fabric)
    Rung(PROBE, "nvlink_fabric", Step.RESET_GPU, "OCIBENCH-GPU-0005",
         "a GPU not registered in the rack's NVLink fabric (state, status, cluster UUID "
         "or clique not as the rack's)",
         "reset the GPUs or reboot; if the registration still fails, return the host to "
         "OCI with the rack's other hosts' states", (_NV_Q, "nvidia-smi -q | grep -A8 Fabric")),
    Rung(PROBE, "c2c", Step.REBOOT, "OCIBENCH-GPU-0006",
         "an NVLink-C2C link between a GPU and its Grace down or trained slower than "
         "the GPU's other links",
         "reboot; if the link stays down or slow, return the host to OCI with "
         "nvidia-smi c2c -s", ("nvidia-smi c2c -s", _NV_Q)),
    Rung(PROBE, "imex", Step.FIX_SOFTWARE, "OCIBENCH-SW-0013",
         "the IMEX service not running, or its domain not up",
         "systemctl restart nvidia-imex on the rack's hosts; its nodes_config.cfg must list "
         "every host of the NVLink domain; its version must equal the driver's",
         ("nvidia-imex-ctl -N", "systemctl status nvidia-imex",
          "journalctl -u nvidia-imex -n 50")),
    Rung(PROBE, "history", Step.RERUN, "OCIBENCH-FIG-0000",
         "a figure of this node failed in its latest sweep or ReFrame run",
         "rerun the failing check on this node; the figure's own entry gives the next step",
         ("ocibench history --node NODE", _SWEEP_OUT)),
    Rung(PROBE, "drift", Step.RERUN, "OCIBENCH-FIG-0099",
         "a figure drifting below the node's own past and its peers",
         "rerun the drifting check; a repeat offender is rebooted",
         ("ocibench history --node NODE",)),
    # --- preflight's software items
    _software(PREFLIGHT, "gdrdrv", 1, "GDRCopy's gdrdrv module not loaded",
              "install GDRCopy matching the driver; modprobe gdrdrv",
              (_MODULES, "ls -l /dev/gdrdrv")),
    _software(PREFLIGHT, "xpmem", 2, "the XPMEM module not loaded",
              "install xpmem for this kernel; modprobe xpmem", (_MODULES, "ls -l /dev/xpmem")),
    _software(PREFLIGHT, "nvidia_peermem", 3, "nvidia_peermem not loaded (GPUDirect RDMA)",
              "modprobe nvidia_peermem (or use dma-buf: open kernel module, kernel >= 5.12)",
              (_MODULES, "modinfo nvidia_peermem"), "peermem_module_check"),
    _software(PREFLIGHT, "amd_peermem", 4, "amdkfd registers no peer memory (GPUDirect RDMA)",
              "load amdgpu with peer memory (ROCm's amdgpu-dkms) or use dma-buf",
              (_MODULES, "ls /sys/kernel/mm/memory_peers")),
    _software(PREFLIGHT, "dmabuf", 5, "no dma-buf GPUDirect RDMA (kernel or driver too old)",
              "kernel >= 5.12 with the open GPU kernel module (NVIDIA >= 515), or nvidia_peermem",
              ("uname -r", "cat /proc/driver/nvidia/version")),
    _software(PREFLIGHT, "cma", 6, "CMA single-copy restricted by Yama ptrace_scope",
              "sysctl kernel.yama.ptrace_scope=0 (or 1 with CAP_SYS_PTRACE)",
              ("sysctl kernel.yama.ptrace_scope",)),
    _software(PREFLIGHT, "memlock", 7, "locked-memory limit not unlimited (RDMA registers "
              "buffers)", "LimitMEMLOCK=infinity for slurmd; memlock unlimited in limits.conf",
              ("ulimit -l", "systemctl show slurmd -p LimitMEMLOCK")),
    _software(PREFLIGHT, "ucx built", 8, "UCX built without a module the shape needs",
              "rebuild UCX with the module (spack: ucx +gdrcopy +xpmem +cma +cuda/+rocm)",
              (_UCX,)),
    _software(PREFLIGHT, "ucx transports", 9, "UCX lists no transport the shape needs",
              "load the kernel module behind it, or rebuild UCX with it", (_UCX, _MODULES)),
    _software(PREFLIGHT, "openmpi cuda", 10, "Open MPI not built CUDA-aware",
              "rebuild Open MPI +cuda with UCX (spack: openmpi +cuda fabrics=ucx)", (_OMPI,)),
    _software(PREFLIGHT, "openmpi rocm", 11, "Open MPI not built ROCm-aware",
              "rebuild Open MPI +rocm with UCX (spack: openmpi +rocm fabrics=ucx)", (_OMPI,)),
    _software(PREFLIGHT, "openmpi pml", 12, "Open MPI's UCX PML missing or not preferred",
              "rebuild Open MPI with fabrics=ucx; OMPI_MCA_pml=ucx", (_OMPI,)),
    # --- the figures of the registry: missed with no software cause (derived below)
    *(_figure(spec) for spec in benchmarks.CHECKS.values()),
    # --- the paths NCCL and UCX took (figures.nccl_path, figures.ucx_proto)
    _software(PATH, "nccl:local-over-net", 20,
              "NCCL connected GPUs of one host over the network: no peer access, no SHM",
              "unset the NCCL_*_DISABLE / NCCL_P2P_LEVEL the reason names; check ACS and "
              "IOMMU; if none is set, reset the GPUs", (_NCCL_LOG, "nvidia-smi topo -p2p r")),
    _software(PATH, "nccl:local-over-shm", 21,
              "NCCL used host memory between NVLink-connected GPUs",
              "unset NCCL_P2P_DISABLE / NCCL_P2P_LEVEL; start the fabric manager; if neither, "
              "reset the GPUs", (_NCCL_LOG, "nvidia-smi topo -m", "nvidia-smi nvlink -s")),
    _software(PATH, "nccl:hosts-without-gdrdma", 22,
              "NCCL crossed hosts without GPUDirect RDMA over the cluster network",
              "load nvidia_peermem or use dma-buf; unset NCCL_IB_DISABLE / NCCL_NET_GDR_LEVEL; "
              "check NCCL_IB_HCA", (_NCCL_LOG, _MODULES, "ibstat")),
    _software(PATH, "nccl:mnnvl-not-set-up", 23,
              "NCCL could not set up multi-node NVLink in the rack's NVLink domain (IMEX)",
              "fix the IMEX service and its domain (the imex probe's entry); unset "
              "NCCL_MNNVL_ENABLE=0 / NCCL_CUMEM_ENABLE=0", (_NCCL_LOG, "nvidia-imex-ctl -N")),
    _software(PATH, "nccl:domain-without-mnnvl", 24,
              "NCCL joined hosts of one NVLink domain by the network, not multi-node NVLink",
              "unset NCCL_MNNVL_ENABLE=0 / NCCL_CUMEM_ENABLE=0; check IMEX and that both hosts "
              "are in one clique (the nvlink_fabric probe)",
              (_NCCL_LOG, "nvidia-imex-ctl -N", "nvidia-smi -q | grep -A8 Fabric")),
    *(_software(PATH, f"ucx:{cap}", 30 + i, f"UCX took no {cap} lane for these messages",
                f"make UCX see {cap}: its kernel module loaded and UCX built with its "
                "transport (the preflight item of the same name)", (_UCX, _MODULES))
      for i, cap in enumerate(("gdrdrv", "xpmem", "cma", "nvlink", "xgmi", "rdma",
                               "nvidia_peermem"))),
    # --- jobs that failed before a figure (ocibench.sweep.actions' patterns)
    _software(JOB, "module", 40, "the job's module does not load (Lmod's error)",
              "ocibench audit-modules; fix the module tree",
              ("module avail", "ocibench audit-modules")),
    _software(JOB, "missing-program", 41, "a program or library the job runs is missing",
              "install the benchmark stack for this node (ocibench spack-config; spack install)",
              (_SWEEP_OUT, "ldd $(which PROGRAM)")),
    _software(JOB, "mpi-not-gpu-aware", 42, "the job's MPI does not take GPU buffers",
              "rebuild Open MPI GPU-aware (the preflight item openmpi cuda/rocm)", (_OMPI,)),
    _software(JOB, "preflight-software", 43, "the node lacks software the check needs",
              "the preflight item it names gives the fix", ("ocibench preflight --json",)),
    Rung(JOB, "preflight-hardware", Step.REBOOT, "OCIBENCH-JOB-0044",
         "the node lacks hardware the check needs (GPUs, links, PCIe lanes, RDMA ports)",
         "the preflight item it names gives the step", ("ocibench preflight --json",)),
    Rung(JOB, "rdma-port-missing", Step.REBOOT, "HPCGPU-0008-0001",
         "the job found no RDMA port it was given", "reboot; return the host if it persists",
         _NET_NET, oci_check="link_check"),
    Rung(JOB, "wrong-data", Step.RESET_GPU, "OCIBENCH-JOB-0046",
         "the benchmark computed wrong results (nccl-tests #wrong, out of bounds values)",
         "reset the GPUs and rerun; a repeat is returned", (_SWEEP_OUT, _NV_Q)),
    Rung(JOB, "node-lost", Step.REBOOT, "OCIBENCH-JOB-0047",
         "Slurm lost the node during the job (NODE_FAIL, BOOT_FAIL)",
         "reboot; look at its console and kernel log", ("sacct -j JOB -o JobID,State,NodeList",
                                                         "journalctl -k -b -1 | tail -100")),
    Rung(JOB, "xid", Step.RESET_GPU, "HPCGPU-0016-0001", "the job hit a GPU Xid error",
         "drain, reset the GPUs or reboot; return the host if they recur",
         ("dmesg -T | grep -i xid", _NV_Q), oci_check="gpu_xid_check"),
    Rung(JOB, "unattributed", Step.RERUN, "OCIBENCH-JOB-0049",
         "a crash, a time limit or a value that cannot be a measurement",
         "run the check again; a repeat offender is rebooted", (_SWEEP_OUT,)),
    Rung(JOB, "outlier", Step.RERUN, "OCIBENCH-JOB-0052",
         "a figure far worse than the cluster's median of it (robust deviations)",
         "rerun: a pair or group that is an outlier again, with other partners, is pinned "
         "to the node and one step up", (_SWEEP_OUT, "ocibench history --node NODE")),
    Rung(JOB, "figure-unregistered", Step.REBOOT, "OCIBENCH-JOB-0051",
         "a documented figure missed by a check the registry does not hold",
         "reboot the node, rerun; add the check to the registry (docs/adding-a-benchmark.md)",
         (_SWEEP_OUT,)),
    Rung(JOB, "unjudged", Step.RERUN, "OCIBENCH-JOB-0050",
         "the run could not be judged (this project's defect, never the node's)",
         "rerun; report the line it could not judge", (_SWEEP_OUT,)),
)


def _index(entries: tuple[Rung, ...]) -> dict[tuple[str, str], Rung]:
    table: dict[tuple[str, str], Rung] = {}
    for rung in entries:
        rung.check()
        if rung.key in table:
            raise ValueError(f"ladder entry {rung.kind}:{rung.name}: stated twice")
        table[rung.key] = rung
    return table


#: (kind, name) -> entry.
LADDER: dict[tuple[str, str], Rung] = _index(LADDER_ENTRIES)


def base_name(name: str) -> str:
    """A finding's or item's name less its port ("rdma mlx5_0" -> "rdma")."""
    return name.split(" ", 1)[0] if name.startswith("rdma ") else name


#: A finding's or item's words led by the name of the check that failed first
#: ("gid: GIDs beyond ..."): ocibench.node.rdma's, for its finer entries.
_LEADING_CHECK = re.compile(r"([a-z][a-z0-9_]{0,30}): ")


def entry(kind: str, name: str, evidence: str = "") -> Rung | None:
    """The entry of a failure, or None: a failure of no entry is the table's gap
    (tests/test_ladder.py fails on one); callers say "no ladder entry", never guess.
    ``evidence``: the failure's words; where they lead with the name of a check that
    has a finer entry of its own (``rdma:gid``, OCI's HPCGPU-0005-0001, under
    ``rdma``), that entry."""
    base = base_name(name)
    lead = _LEADING_CHECK.match(evidence)
    finer = LADDER.get((kind, f"{base}:{lead.group(1)}")) if lead else None
    return finer or LADDER.get((kind, base))


@dataclass(frozen=True)
class Decision:
    """A failure's step for this node: the entry's, moved up for a repeat offender."""

    rung: Rung
    step: Step
    repeats: int

    @property
    def fault(self) -> str:
        return self.rung.fault

    def line(self) -> str:
        """``<step> <fault>: <meaning>``, e.g. for a drain reason or a report cell."""
        moved = f" (repeat {self.repeats}: was {self.rung.step})" if self.step != self.rung.step \
            else ""
        return f"{self.step} {self.fault}{moved}: {self.rung.meaning}"

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.rung.kind, "name": self.rung.name, "step": str(self.step),
                "fault": self.fault, "oci": self.rung.oci_codes, "repeats": self.repeats,
                "meaning": self.rung.meaning, "fix": self.rung.fix,
                "evidence": list(self.rung.evidence)}


# --------------------------------------------------------------------------- finding an entry

#: An MPI that does not take the GPUs' buffers, in each vendor's words (ocibench.accelerators:
#: "CUDA-aware", "cuda support" as in ompi_info's *_built_with_cuda_support).
_GPU_AWARE = "|".join(f"{a.mpi_aware_variant}-aware|{a.mpi_aware_variant} support"
                      for a in accelerators.VENDORS.values())

#: A job's failure line (ocibench.figures.joblog.failure_line, reframe_slurm, a benchmark's
#: sanity error) -> its entry (kind "job"), first match.
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), name) for pattern, name in (
        (r"Lmod has detected|module\(s\) are unknown|unsafe module tree", "module"),
        (r"command not found|cannot open shared object file|No module named",
         "missing-program"),
        (r"is written for Open MPI|needs Open MPI|" + _GPU_AWARE, "mpi-not-gpu-aware"),
        (r"network device .* is not available|no port \d+ of", "rdma-port-missing"),
        (r"#wrong|Out of bounds values", "wrong-data"),
        (r"NODE_FAIL|BOOT_FAIL", "node-lost"),
        (r"Xid", "xid"),
    ))
#: Every job failure :func:`failure_entry` and :func:`figure_entry` name.
JOB_FAILURES = (*(name for _p, name in _PATTERNS), "preflight-software",
                "preflight-hardware", "unattributed", "unjudged", "figure-unregistered",
                "outlier")
#: What preflight's report says the node lacks, as a job's failure quotes it.
_PREFLIGHT_LACKS = re.compile(r"requires what this node lacks: (.*)")
#: Capabilities (ocibench.capabilities) that are hardware (the links between the GPUs,
#: PCIe, RDMA ports); the others are software.
HARDWARE_CAPABILITIES = (*(a.device_link for a in accelerators.VENDORS.values()),
                         "pcie", "rdma")


def failure_entry(reason: str | None) -> Rung:
    """The entry of a job that failed with ``reason`` before a figure was judged: a run
    that could not be judged (this project's defect: rerun), a preflight item the node
    lacks (hardware when that item's own entry is not a software fix), a known failure
    line, else unattributed (rerun)."""
    if metrics.unjudged_in(reason) is not None:
        return LADDER[(JOB, "unjudged")]
    lacks = _PREFLIGHT_LACKS.search(reason or "")
    if lacks:
        items = [part.strip().split(" ")[0] for part in lacks.group(1).split(";")]
        steps = [rung.step for rung in (entry(PREFLIGHT, i) for i in items) if rung]
        hardware = any(step is not Step.FIX_SOFTWARE for step in steps)
        return LADDER[(JOB, "preflight-hardware" if hardware else "preflight-software")]
    for pattern, name in _PATTERNS:
        if pattern.search(reason or ""):
            return LADDER[(JOB, name)]
    return LADDER[(JOB, "unattributed")]


def figure_entry(check: str | None, implausible: bool, lacking: tuple[str, ...]) -> Rung:
    """The entry of a judged figure of ``check`` that failed: a value that cannot be a
    measurement is rerun; a software capability UCX or preflight found lacking is its
    fix (UCX's path entry, else preflight's item); else the figure's own entry."""
    if implausible:
        return LADDER[(JOB, "unattributed")]
    software = [c for c in lacking if c not in HARDWARE_CAPABILITIES]
    for capability in software:
        rung = entry(PATH, f"ucx:{capability}") or entry(PREFLIGHT, capability)
        if rung is not None:
            return rung
    if software:
        return LADDER[(JOB, "preflight-software")]
    return (entry(FIGURE, check) if check else None) or LADDER[(JOB, "figure-unregistered")]


def escalate(step: Step, repeats: int) -> Step:
    for _ in range(max(0, repeats)):
        step = ESCALATION[step]
    return step


def decide(kind: str, name: str, repeats: int = 0, evidence: str = "") -> Decision | None:
    """The step for a failure seen ``repeats`` times before on this node (flagged,
    drained, put back, flagged again); None where the table has no entry.
    ``evidence``: as for :func:`entry`."""
    rung = entry(kind, name, evidence)
    return None if rung is None else Decision(rung, escalate(rung.step, repeats), repeats)


def worst(decisions: list[Decision]) -> Decision | None:
    """The most severe decision of a node (what the admin does first)."""
    return max(decisions, key=lambda d: STEPS.index(d.step), default=None)


def markdown() -> str:
    """The table as docs/ladder.md shows it (tests/test_ladder.py holds the two equal)."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = ["| failure | step | fault code | what failed | what to do | evidence |",
             "| --- | --- | --- | --- | --- | --- |"]
    for rung in LADDER_ENTRIES:
        code = f"{rung.fault} (OCI: `{rung.oci_check}`)" if rung.oci_check else rung.fault
        lines.append(f"| {rung.kind} `{rung.name}` | {rung.step} | {code} | "
                     f"{cell(rung.meaning)} | {cell(rung.fix)} | "
                     + "; ".join(f"`{cell(c)}`" for c in rung.evidence) + " |")
    return "\n".join(lines) + "\n"


def oci_markdown() -> str:
    """OCI's fault codes as transcribed (:data:`OCI_FAULTS`), for docs/ladder.md."""
    lines = ["| OCI's check | fault code | meaning | our entries |", "| --- | --- | --- | --- |"]
    for check, (code, meaning) in OCI_FAULTS.items():
        ours = ", ".join(f"{r.kind} `{r.name}`" for r in LADDER_ENTRIES if r.oci_check == check)
        lines.append(f"| `{check}` | {code} | {meaning} | {ours or 'none yet'} |")
    return "\n".join(lines) + "\n"
