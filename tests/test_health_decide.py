"""The healthcheck's decision (ocibench.health.decide) as a table: from the probes'
results, the drain of ours on record, Slurm's answer, the drain budget's count and the
options, what the run does.  No Slurm and no files: the decision asks nothing; the
cluster test (test_healthcheck_cluster.py) sees the same branches done in a real Slurm."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ocibench.health import decide, state
from ocibench.health.decide import FAILED, OK, SLURM, UNJUDGED, Answer, Drain, Facts
from ocibench.health.state import FAIL, PASS, UNKNOWN, ProbeResult

NODE = "gpu-1"
OURS = "ocibench: [HPCGPU-0008-0001] rdma mlx5_0:1 (DOWN)"
NEW = "ocibench: [HPCGPU-0001-0001] xid (79)"


def _results(gpus: str, port: str, xid: str) -> tuple[ProbeResult, ...]:
    return tuple(ProbeResult(name, said, f"{name} said {said}", 0.0, 0.0)
                 for name, said in (("gpus", gpus), ("rdma mlx5_0", port), ("xid", xid)))


CLEAN = _results(PASS, PASS, PASS)
BROKEN = _results(PASS, PASS, FAIL)
UNSURE = _results(PASS, PASS, UNKNOWN)
PORT_UNSURE = _results(PASS, UNKNOWN, PASS)
NOTHING = Drain()
NOT_ASKED = Answer()
RECORD = Drain(OURS, ("rdma mlx5_0",))
UP = Answer(asked=True, state="idle")
DRAINED_BY_US = Answer(asked=True, state="drain", reason=OURS)
DRAINING_BY_US = Answer(asked=True, state="drng*", reason=OURS)
DRAINED_BY_A_PERSON = Answer(asked=True, state="drain~", reason="ocibench: memory swap")
NO_ANSWER = Answer(asked=True, error="sinfo: timed out after 10 s")
NO_SUCH_NODE = Answer(asked=True)


def _facts(results: tuple[ProbeResult, ...], slurm: Answer = NOT_ASKED,
           recorded: Drain = NOTHING, **kw: object) -> Facts:
    base = Facts(node=NODE, results=results, recorded=recorded, slurm=slurm, reason=NEW,
                 time_left=12.0, time_needed=4.5)
    return replace(base, **kw)  # type: ignore[arg-type]


# id: (facts, action, reason, code, the drain kept on record, lines (a piece of each),
#      slurm_error (a piece; "": none), held, ended)
CASES = {
    "clean, nothing on record: pass, Slurm not asked":
        (_facts(CLEAN), state.NONE, "", OK, Drain(), [], "", False, False),
    "an unknown alone: unjudged, never a drain":
        (_facts(UNSURE), state.NONE, "", UNJUDGED, Drain(), [], "", False, False),
    "a failure: drain with its reason and the failing probes on record":
        (_facts(BROKEN, UP), state.DRAIN, NEW, FAILED, Drain(NEW, ("xid",)), [], "",
         False, True),
    "a failure in a dry run: would drain, nothing on record":
        (_facts(BROKEN, UP, dry_run=True), state.WOULD_DRAIN, NEW, FAILED, Drain(), [], "",
         False, False),
    "a failure, the budget spent: would drain (budget spent)":
        (_facts(BROKEN, UP, budget_spent="drain budget spent: partition gpu holds 2"),
         state.BUDGET_SPENT, NEW, FAILED, Drain(),
         ["gpu-1: would drain, drain budget spent: partition gpu holds 2"], "", False, True),
    "a failure, the budget not counted: no drain, said as Slurm's error":
        (_facts(BROKEN, UP, budget_unknown="no count of the drain budget: timed out"),
         state.NONE, NEW, FAILED, Drain(),
         ["no count of the drain budget: timed out: not drained (unknown)"],
         "no count of the drain budget: timed out: not drained (unknown)", False, True),
    "a failure, too little Slurm time for a drain and its re-count: no drain":
        (_facts(BROKEN, UP, time_left=3.0), state.NONE, NEW, FAILED, Drain(),
         ["gpu-1: not drained: 3.0 s left of the run's Slurm time, fewer than the 4.5 s "
          "a drain and its re-count of the drain budget need (Slurm slow to answer)"],
         "gpu-1: not drained: 3.0 s left", False, True),
    "a failure on a node a person drained: left as it is":
        (_facts(BROKEN, DRAINED_BY_A_PERSON), state.NONE, NEW, FAILED, Drain(),
         ["gpu-1 is drained already, by someone else (ocibench: memory swap): left as "
          "it is"], "", True, False),
    "a failure on a node we drained: left as it is, still ours":
        (_facts(BROKEN, DRAINED_BY_US, RECORD), state.NONE, NEW, FAILED, RECORD,
         [f"gpu-1 is drained already, by this healthcheck ({OURS}): left as it is"], "",
         True, False),
    "a failure, Slurm not answering: exit 1, nothing done":
        (_facts(BROKEN, NO_ANSWER), state.NONE, "", FAILED, Drain(),
         ["cannot ask Slurm about gpu-1: sinfo: timed out after 10 s"],
         "cannot ask Slurm about gpu-1: sinfo: timed out", False, False),
    "a failure, no such node in Slurm: exit 1, nothing done":
        (_facts(BROKEN, NO_SUCH_NODE), state.NONE, "", FAILED, Drain(),
         ["Slurm knows no node 'gpu-1': nothing done"], "", False, False),
    "our drain, Slurm not answering: exit 4, the drain kept on record":
        (_facts(CLEAN, NO_ANSWER, RECORD), state.NONE, "", SLURM, RECORD,
         ["cannot ask Slurm about gpu-1"], "cannot ask Slurm", False, False),
    "our drain, no such node: exit 4, the drain kept on record":
        (_facts(UNSURE, NO_SUCH_NODE, RECORD), state.NONE, "", SLURM, RECORD,
         ["Slurm knows no node 'gpu-1'"], "", False, False),
    "our drain, its probes pass: resume":
        (_facts(CLEAN, DRAINED_BY_US, RECORD), state.RESUME, OURS, OK, Drain(), [], "",
         True, True),
    "our drain while the node drains its job: resume":
        (_facts(CLEAN, DRAINING_BY_US, RECORD), state.RESUME, OURS, OK, Drain(), [], "",
         True, True),
    "our drain, another probe unknown: resume (only the drain's probes count), exit 3":
        (_facts(UNSURE, DRAINED_BY_US, RECORD), state.RESUME, OURS, UNJUDGED, Drain(), [],
         "", True, True),
    "our drain, its probe unknown: stays drained (an unknown is not clean)":
        (_facts(PORT_UNSURE, DRAINED_BY_US, RECORD), state.NONE, "", UNJUDGED, RECORD,
         ["gpu-1 stays drained: rdma mlx5_0 could not be judged"], "", True, False),
    "our drain in a dry run: would resume, still ours":
        (_facts(CLEAN, DRAINED_BY_US, RECORD, dry_run=True), state.WOULD_RESUME, OURS, OK,
         RECORD, [], "", True, False),
    "our drain as a prolog: never resumed":
        (_facts(CLEAN, DRAINED_BY_US, RECORD, prolog=True), state.NONE, "", OK, RECORD, [],
         "", True, False),
    "our drain resumed by a person: forgotten, an ended drain":
        (_facts(CLEAN, UP, RECORD), state.NONE, "", OK, Drain(),
         ["the drain this healthcheck wrote is no longer Slurm's (now: idle, no reason): "
          "forgotten"], "", False, True),
    "our drain resumed by a person, in a dry run: forgotten, no offence counted":
        (_facts(CLEAN, UP, RECORD, dry_run=True), state.NONE, "", OK, Drain(),
         ["no longer Slurm's"], "", False, False),
    "our drain resumed by a person, failing anew: a new drain":
        (_facts(BROKEN, UP, RECORD), state.DRAIN, NEW, FAILED, Drain(NEW, ("xid",)),
         ["no longer Slurm's (now: idle, no reason): forgotten"], "", False, True),
    "our drain redrained by a person with a reason of theirs: theirs, never resumed":
        (_facts(CLEAN, DRAINED_BY_A_PERSON, RECORD), state.NONE, "", OK, Drain(),
         ["no longer Slurm's (now: drain~, ocibench: memory swap): forgotten"], "", True,
         False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_decision(case: str) -> None:
    facts, action, reason, code, keep, lines, slurm_error, held, ended = CASES[case]
    got = decide.decide(facts)
    assert (got.action, got.reason, got.code, got.keep) == (action, reason, code, keep), got
    assert len(got.lines) == len(lines) and all(
        piece in line for piece, line in zip(lines, got.lines)), got.lines
    assert slurm_error in got.slurm_error and bool(got.slurm_error) == bool(slurm_error), got
    assert (got.held, got.ended) == (held, ended), got


def test_only_a_failure_on_an_undrained_known_node_is_drained() -> None:
    """Whatever else the facts say, a run without a failure never drains, and a
    failure never resumes: the drain and the resume are each one branch's."""
    answers = (Answer(), UP, DRAINED_BY_US, DRAINED_BY_A_PERSON, NO_ANSWER, NO_SUCH_NODE)
    for results in (CLEAN, UNSURE, PORT_UNSURE, BROKEN):
        for slurm in answers:
            for recorded in (Drain(), RECORD):
                for dry_run in (False, True):
                    got = decide.decide(_facts(results, slurm, recorded, dry_run=dry_run))
                    failed = results is BROKEN
                    if got.action in (state.DRAIN, state.WOULD_DRAIN):
                        assert failed and slurm.state == "idle", (results, slurm, got)
                    if got.action in (state.RESUME, state.WOULD_RESUME):
                        assert not failed and slurm.reason == recorded.reason == OURS, got


def test_slurm_is_asked_only_for_a_failure_or_a_drain_on_record() -> None:
    assert not decide.asks_slurm(CLEAN, Drain())
    assert not decide.asks_slurm(UNSURE, Drain())
    assert decide.asks_slurm(BROKEN, Drain())
    assert decide.asks_slurm(CLEAN, RECORD)


@pytest.mark.parametrize("slurm, recorded, drained, ours, lost, resumed", [
    (UP, Drain(), False, False, False, False),
    (UP, RECORD, False, False, True, True),
    (DRAINED_BY_US, RECORD, True, True, False, False),
    (DRAINING_BY_US, RECORD, True, True, False, False),
    (DRAINED_BY_US, Drain(), True, False, False, False),   # a reason like ours, no record
    (DRAINED_BY_A_PERSON, RECORD, True, False, True, False),
    (Answer(asked=True, state="down*", reason=OURS), RECORD, False, False, True, True),
    (NO_ANSWER, RECORD, False, False, False, False),
    (NO_SUCH_NODE, RECORD, False, False, False, False),
])
def test_what_slurms_answer_says_of_our_drain(slurm: Answer, recorded: Drain, drained: bool,
                                              ours: bool, lost: bool, resumed: bool) -> None:
    got = decide.standing(slurm, recorded)
    assert (got.drained, got.ours, got.lost, got.resumed) == (drained, ours, lost, resumed)


def test_the_budget_is_counted_only_before_a_new_drain() -> None:
    def counts(results: tuple[ProbeResult, ...], slurm: Answer) -> bool:
        return decide.counts_budget(results, slurm, decide.standing(slurm, RECORD))
    assert counts(BROKEN, UP)
    assert not counts(CLEAN, UP) and not counts(UNSURE, UP)
    assert not counts(BROKEN, DRAINED_BY_US) and not counts(BROKEN, DRAINED_BY_A_PERSON)
    assert not counts(BROKEN, NO_ANSWER) and not counts(BROKEN, NO_SUCH_NODE)
