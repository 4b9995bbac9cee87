"""The rewards package's own verifiers and shaped compositions pass their audit (the issue's "done when"), and a
shaping that breaks dominance on purpose is caught."""

from __future__ import annotations

import pytest

import audit_gallery as G
from rewards.audit import audit_callable
from rewards.shaping import Signal, component_signal, shape
from rewards.verifiers import ExactMatch, NumericMatch, WorkplaceState


def _has_tag(completion, **_):
    return 1.0 if "<answer>" in completion and "</answer>" in completion else 0.0


@pytest.mark.parametrize("verifier", [ExactMatch(), NumericMatch()], ids=lambda v: v.name)
def test_builtin_text_verifiers_pass_their_audit(verifier):
    report, _ = audit_callable(verifier, G.math_rows(), sandbox=False)
    assert report.verdict == "pass", [(f.probe, f.examples[0].input) for f in report.blocking]
    assert report.baselines.reference_pass_rate == 1.0


def test_shaped_math_reward_passes_its_audit():
    shaped = shape(NumericMatch(), Signal(name="tagged", weight=0.2, reward=_has_tag, applies_to="fail"),
                   name="math_shaped")
    report, _ = audit_callable(shaped, G.math_rows(), sandbox=False)
    assert report.verdict == "pass", [(f.probe, f.examples[0].input) for f in report.blocking]
    status = {p.probe: p.status for p in report.probes}
    assert status["dominance"] == "clean" and status["format_credit_share"] == "clean"


def test_shaping_that_breaks_dominance_is_caught():
    shaped = shape(NumericMatch(), Signal(name="tagged", weight=1.5, reward=_has_tag, applies_to="fail"),
                   name="format_heavy", scale="none", allow_dominance_violation=True)
    report, _ = audit_callable(shaped, G.math_rows(), sandbox=False)
    flagged = {f.probe for f in report.blocking}
    assert {"dominance", "format_credit_share"} <= flagged


def test_shaped_workplace_reward_passes_its_audit():
    world, rows, episode = G.workplace()
    shaped = shape(WorkplaceState(world=world),
                   component_signal("required_changes", 0.3, applies_to="fail"),
                   component_signal("wrong_changes", -0.1, high=3.0, clip=True, applies_to="fail"),
                   name="workplace_shaped")
    for reward in (WorkplaceState(world=world), shaped):
        report, _ = audit_callable(reward, rows, sandbox=False, episode=episode)
        assert report.reward_kind == "trajectory"
        assert report.verdict == "pass", [(f.probe, f.examples[0].note) for f in report.blocking]
        status = {p.probe: p.status for p in report.probes if p.family == "tools"}
        assert status["noop"] == status["create_then_delete"] == status["failed_writes"] == "clean"
