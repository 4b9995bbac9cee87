"""The workplace verifier (rewards/environments/workplace) passes its own audit, with the tool probes run through
a live environment episode; a final-state-only verifier (NeMo Gym's judgement) is caught by create-then-delete."""

from __future__ import annotations

import pytest

import audit_gallery as G

from rewards.audit import run_audit, scorer_from_callable
from schemas.audit import SEVERITY_RANK


@pytest.fixture(scope="module")
def workplace():
    return G.workplace()


def _verifier(world):
    """The rewards package's registered workplace verifier, bound to this world."""
    from rewards.verifiers import WorkplaceState

    return WorkplaceState(world=world)


def test_workplace_verifier_passes_its_audit(workplace):
    world, rows, episode = workplace
    report, _ = run_audit(scorer_from_callable(_verifier(world), sandbox=False), rows, episode=episode)
    assert report.verdict == "pass", [(f.probe, f.examples[0].note) for f in report.blocking]
    status = {p.probe: p.status for p in report.probes if p.family == "tools"}
    for probe in ("noop", "read_spam", "failed_writes", "writes_on_noop_task", "create_then_delete"):
        assert status[probe] == "clean", (probe, status)
    noop_tasks = sum(1 for r in rows if r["metadata"]["noop"])
    assert report.baselines.policies["do_nothing"].pass_rate == pytest.approx(noop_tasks / len(rows))
    assert report.baselines.reference_pass_rate == 1.0


def test_workplace_shaped_signal_passes_its_audit(workplace):
    world, rows, episode = workplace
    verify = _verifier(world)

    def workplace_shaped(trajectory, **row):
        r = verify(trajectory, **row)
        return r.model_copy(update={"score": r.components["shaped"]})

    report, _ = run_audit(scorer_from_callable(workplace_shaped, sandbox=False), rows, episode=episode)
    assert report.verdict == "pass", [(f.probe, f.examples[0].note) for f in report.blocking]
    status = {p.probe: p.status for p in report.probes}
    assert status["dominance"] == status["give_up_over_attempt"] == status["noop_credit_share"] == "clean"


def test_shaped_credit_for_giving_up_is_caught_before_training(workplace):
    """The first shaped composition: valid_call_rate and call_efficiency credited on failures, so reading and
    stopping (0.245) beat trying the write and failing. GRPO learned exactly that; the audit must say so first."""
    world, rows, episode = workplace
    verify = _verifier(world)

    def first_shaped(trajectory, **row):
        r = verify(trajectory, **row)
        c = r.components
        if c["passed"]:
            return r.model_copy(update={"score": 0.75 + 0.25 * c["call_efficiency"]})
        partial = 0.5 * c["required_changes"] + 0.25 * c["valid_call_rate"] + 0.25 * c["call_efficiency"]
        return r.model_copy(update={"score": max(0.0, min(0.49, 0.49 * partial - 0.15 * min(c["wrong_changes"], 3)))})

    report, _ = run_audit(scorer_from_callable(first_shaped, sandbox=False), rows, episode=episode)
    found = {f.probe: f for f in report.findings}
    assert "give_up_over_attempt" in found and found["give_up_over_attempt"].severity == "high"
    assert "reading and stopping scores" in found["give_up_over_attempt"].examples[0].note
    assert report.verdict != "pass"


def test_final_state_only_verifier_is_caught_by_create_then_delete(workplace):
    world, rows, episode = workplace
    verify = _verifier(world)

    def final_state_only(trajectory, **row):
        r = verify(trajectory, **row)
        if r.error:
            return r
        undone = r.reason.startswith("extra_write") and "created then deleted" in r.reason
        return r.model_copy(update={"passed": True, "score": 1.0}) if undone else r

    report, _ = run_audit(scorer_from_callable(final_state_only, sandbox=False), rows, episode=episode)
    f = next(f for f in report.findings if f.probe == "create_then_delete")
    assert SEVERITY_RANK[f.severity] >= SEVERITY_RANK["high"] and f.fooled_rows > 0
    assert report.verdict == "fail"
