"""The action ladder (ocibench.ladder): every failure ocibench can report has an entry.

The lists are derived from the code, never written here: the healthcheck's PROBES (named
as each vendor row names them), every item preflight gives on every shape of site/shapes
(run on an empty tree with no tool on PATH: each probe still names its item), the
benchmark registry, NCCL's path verdicts, UCX's transports and the sweep's job-failure
patterns.  A new probe, check or verdict without an entry fails here, naming it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from ocibench import accelerators, benchmarks, ladder, paths, shapes
from ocibench.figures import nccl_path, ucx_proto
from ocibench.health import probes
from ocibench.ladder import FIGURE, JOB, PATH, PREFLIGHT, PROBE, Step
from ocibench.node import preflight, rdma
from ocibench.shapes import rules as shape_rules
from ocibench.sweep import actions


def healthcheck_names() -> set[str]:
    """Each PROBES entry under the name its findings carry, for each vendor row (a CPU
    shape runs only the probes without a row's name, which every row gives too)."""
    named = {probes.item_name(name, SimpleNamespace(vendor=row))  # type: ignore[arg-type]
             for row in accelerators.VENDORS.values()
             for name, _applies, _probe in probes.PROBES}
    # the kernel-log probe's findings beyond its own name: what it scans for on a shape
    # whose node_doctor section lists every check the schema knows (pcie_errors)
    every = shape_rules.schema()["properties"]["node_doctor"]["properties"]
    for row in accelerators.VENDORS.values():
        ctx = SimpleNamespace(vendor=row, exp=SimpleNamespace(
            doctor={key: {} for key in every}, gpu_count=8))
        named |= set(probes.kernel_items(ctx))  # type: ignore[arg-type]
    # an RDMA port's checks OCI codes on their own: the finding leads with the check
    return named | {f"rdma:{c}" for c in rdma.FAULTS if c not in rdma.ONE_READING_ONLY}


def preflight_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> set[str]:
    monkeypatch.setenv("PATH", str(tmp_path))  # no tool: every probe still names its item
    names = set()
    for shape in shapes.known_shapes():
        if shape == "local":  # probes this machine; its items are those of the others
            continue
        report = preflight.preflight(shapes.load(shape), tmp_path)
        names |= {ladder.base_name(item.name) for item in report.items}
    return names | {f"rdma:{c}" for c in rdma.FAULTS}


def derived(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> set[tuple[str, str]]:
    return ({(PROBE, n) for n in healthcheck_names()}
            | {(PREFLIGHT, n) for n in preflight_names(tmp_path, monkeypatch)}
            | {(FIGURE, n) for n in benchmarks.CHECKS}
            | {(PATH, f"nccl:{n}") for n in nccl_path.FAULTS}
            | {(PATH, f"ucx:{n}") for n in ucx_proto.TRANSPORTS}
            | {(JOB, n) for n in actions.JOB_FAILURES})


def gaps(table: dict[tuple[str, str], ladder.Rung], wanted: set[tuple[str, str]]) -> list[str]:
    return sorted(f"{kind}:{name}" for kind, name in wanted - set(table))


def test_every_probe_item_figure_and_path_has_an_entry(tmp_path, monkeypatch) -> None:
    wanted = derived(tmp_path, monkeypatch)
    assert len(wanted) > 50, sorted(wanted)  # the derivation found the lot
    assert gaps(ladder.LADDER, wanted) == []


def test_a_missing_entry_is_named(tmp_path, monkeypatch) -> None:
    # The test above with one entry deleted: it must name it (one that cannot fail
    # would prove nothing).
    table = dict(ladder.LADDER)
    del table[(PROBE, "xid")]
    del table[(FIGURE, "nccl_all_reduce_perf")]
    assert gaps(table, derived(tmp_path, monkeypatch)) == [
        "figure:nccl_all_reduce_perf", "probe:xid"]


def test_no_entry_is_of_nothing(tmp_path, monkeypatch) -> None:
    """An entry no probe, item, figure or verdict gives is a stale one (a renamed probe)."""
    assert sorted(set(ladder.LADDER) - derived(tmp_path, monkeypatch)) == []


def test_a_repeat_offender_moves_up_the_ladder() -> None:
    first = ladder.decide(PROBE, "rdma mlx5_0:1")
    assert first is not None and first.step is Step.REBOOT
    again = ladder.decide(PROBE, "rdma mlx5_0:1", repeats=1)
    assert again is not None and again.step is Step.RETURN_TO_OCI
    assert again.fault == "HPCGPU-0008-0001" and "repeat 1" in again.line()
    assert ladder.escalate(Step.RERUN, 1) is Step.REBOOT
    assert ladder.escalate(Step.RESET_GPU, 2) is Step.RETURN_TO_OCI
    # software stays software: a fix that did not hold is the image's, not the host's
    assert ladder.escalate(Step.FIX_SOFTWARE, 3) is Step.FIX_SOFTWARE


def test_oci_codes_are_ocis_and_ours_are_in_our_namespace() -> None:
    for rung in ladder.LADDER.values():
        if rung.oci_check:
            assert rung.fault == ladder.OCI_FAULTS[rung.oci_check][0]
            assert rung.fault.startswith("HPCGPU-")
        else:
            assert ladder.OURS.fullmatch(rung.fault), rung
    assert ladder.LADDER[(PROBE, "xid")].fault == "HPCGPU-0016-0001"


@pytest.mark.parametrize("change, said", [
    ({"step": "drain"}, "step 'drain' is not one of rerun, fix-software"),
    ({"fault": "HPCGPU-0001-0002"}, "is not OCI's code of gpu_count_check"),
    ({"oci_check": None}, "a code OCI does not give is ours"),
    ({"oci_check": "no_such_check"}, "is no check of OCI's"),
    ({"evidence": ()}, "no command that shows the evidence"),
    ({"fix": " "}, "no meaning or no fix"),
])
def test_a_bad_entry_names_its_mistake(change, said) -> None:
    bad = replace(ladder.LADDER[(PROBE, "gpu_count")], **change)
    with pytest.raises(ValueError, match=said.replace("(", r"\(")):
        ladder._index((bad,))
    with pytest.raises(ValueError, match="stated twice"):
        ladder._index((ladder.LADDER[(PROBE, "xid")],) * 2)


def test_every_step_has_a_sweep_action_and_an_escalation() -> None:
    assert set(ladder.SWEEP_ACTION) == set(Step) == set(ladder.ESCALATION)


def test_the_docs_show_the_table_as_it_is() -> None:
    text = (paths.REPO_ROOT / "docs" / "ladder.md").read_text()
    assert ladder.markdown() in text, "docs/ladder.md: regenerate the table (ladder.markdown())"
    assert ladder.oci_markdown() in text, "docs/ladder.md: regenerate OCI's codes"
    assert "docs/ladder.md" in (paths.REPO_ROOT / "docs" / "healthcheck.md").read_text()


@pytest.mark.parametrize("kind, evidence, fault", [
    (PROBE, "gid: GIDs beyond OCI's indexes 0-3: 4 (fd00:...)", "HPCGPU-0005-0001"),
    (PROBE, "rx_discards: rx_prio*_discards of eth4 rose by 500", "HPCGPU-0004-0001"),
    (PREFLIGHT, "mlxconfig: card at 0000:0c:00.0: MAX_ACC_OUT_READ 64", "HPCGPU-0017-0001"),
    (PROBE, "port state 1: DOWN; gid: ...", "HPCGPU-0008-0001"),
    (PROBE, "mlxconfig: the healthcheck reads none", "HPCGPU-0008-0001"),
    (PROBE, "", "HPCGPU-0008-0001"),
])
def test_a_port_check_oci_codes_on_its_own_gets_its_code(kind, evidence, fault) -> None:
    """The rdma finding leads with the check that failed first where OCI gives that
    check a code of its own (ocibench.node.rdma.FAULTS); any other failure of the port
    is its link_check's.  Seen failing without the finer entries: HPCGPU-0008-0001."""
    rung = ladder.entry(kind, "rdma mlx5_0:1", evidence)
    assert rung is not None and rung.fault == fault, rung
    decision = ladder.decide(kind, "rdma mlx5_0:1", 1, evidence)
    assert decision is not None and decision.fault == fault
