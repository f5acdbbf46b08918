"""ocibench.placement: the cores of a host<->GPU run, and `ocibench placement`, which the
device scripts call for the same cores the checks pin their ranks to."""

from __future__ import annotations

import contextlib
import io

import pytest

from ocibench import cli, placement


def _ocibench(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main(list(argv))
    return status, out.getvalue(), err.getvalue()


def test_placements_a_small_topology_cannot_offer():
    """One socket, one NUMA node, one GPU (a workstation): same-numa only."""
    extras = {"numa_nodes": [{"id": 0, "socket": 0, "cores": [0, 7]}],
              "gpus": 1, "gpu_numa": [0]}
    assert placement.host_device_cores(extras, "H-D", "same-numa") == ([0, 1], "")
    assert placement.host_device_cores(extras, "D-H", "same-numa") == ([1, 0], "")
    cores, why = placement.host_device_cores(extras, "H-D", "same-socket")
    assert cores is None and "single NUMA node" in why
    cores, why = placement.host_device_cores(extras, "D-H", "other-socket")
    assert cores is None and why == "the node has a single socket"
    single_core = {**extras, "numa_nodes": [{"id": 0, "socket": 0, "cores": [0, 0]},
                                            {"id": 1, "socket": 1, "cores": [1, 1]}]}
    cores, why = placement.host_device_cores(single_core, "H-D", "same-numa")
    assert cores is None and "single core" in why
    assert placement.host_device_cores(single_core, "H-D", "other-socket") == ([1, 0], "")
    assert placement.host_device_cores({**extras, "gpus": 0, "gpu_numa": []},
                                       "H-D", "same-numa") == (None, "the node has no GPU")


@pytest.mark.parametrize("buffers, where, cores", [
    # seed 000 sec 2-1/2-2 on BM.GPU4.8 (GPUs 0-1 on NUMA 3 = cores 24-31)
    ("H-D", "same-numa", "24,25"), ("H-D", "same-socket", "0,25"),
    ("H-D", "other-socket", "32,25"), ("D-H", "same-numa", "25,24"),
    ("D-H", "same-socket", "25,0"), ("D-H", "other-socket", "25,32"),
])
def test_the_command_prints_the_seeds_pe_lists(buffers, where, cores):
    status, stdout, stderr = _ocibench("placement", buffers, "--placement", where,
                                       "--shape", "BM.GPU4.8")
    assert (status, stdout, stderr) == (0, f"{cores}\n", "")


def test_a_placement_the_shape_cannot_offer_is_one_line():
    status, stdout, stderr = _ocibench("placement", "H-D", "--shape", "BM.Optimized3.36")
    assert (status, stdout) == (1, "")
    assert stderr == ("ocibench: placement: same-numa H-D is impossible on "
                      "BM.Optimized3.36: the node has no GPU\n")


def test_an_unknown_shape_is_one_line():
    status, _, stderr = _ocibench("placement", "H-D", "--shape", "BM.Nope")
    assert status == 2 and stderr.count("\n") == 1 and "BM.Nope" in stderr
