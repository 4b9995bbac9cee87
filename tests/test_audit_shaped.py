"""The rewards issue's own rewards (examples/rewards: binary and shaped, math and workplace) and built-in
verifiers pass their audit, as the issue's "done when" asks; a shaping that breaks dominance on purpose is
caught."""

from __future__ import annotations

from pathlib import Path

import pytest

import audit_gallery as G
from rewards import load_reward
from rewards.audit import audit_callable
from rewards.shaping import Signal, shape
from rewards.verifiers import ExactMatch, NumericMatch

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "rewards"


def _has_tag(completion, **_):
    return 1.0 if "<answer>" in completion and "</answer>" in completion else 0.0


@pytest.mark.parametrize("reward", [ExactMatch(), NumericMatch(), f"{EXAMPLES}/math_rewards.py:math_binary",
                                    f"{EXAMPLES}/math_rewards.py:my_math_reward"],
                         ids=["exact_match", "numeric_match", "math_binary", "my_math_reward"])
def test_binary_math_rewards_pass_their_audit(reward):
    report, _ = audit_callable(load_reward(reward) if isinstance(reward, str) else reward, G.math_rows(), sandbox=False)
    assert report.verdict == "pass", [(f.probe, f.examples[0].input) for f in report.blocking]
    assert report.baselines.reference_pass_rate == 1.0


def test_shaped_math_reward_passes_its_audit():
    report, _ = audit_callable(load_reward(f"{EXAMPLES}/math_rewards.py:math_shaped"), G.math_rows(16))
    assert report.verdict == "pass", [(f.probe, f.examples[0].input) for f in report.blocking]
    status = {p.probe: p.status for p in report.probes}
    assert status["dominance"] == "clean" and status["component_sign"] != "finding"


def test_shaping_that_breaks_dominance_is_caught():
    shaped = shape(NumericMatch(), Signal(name="tagged", weight=1.5, reward=_has_tag, applies_to="fail"),
                   name="format_heavy", scale="none", allow_dominance_violation=True)
    report, _ = audit_callable(shaped, G.math_rows(), sandbox=False)
    assert {"dominance", "format_credit_share"} <= {f.probe for f in report.blocking}


@pytest.mark.parametrize("name", ["workplace_binary", "workplace_shaped"])
def test_workplace_rewards_pass_their_audit(name):
    world, rows, episode = G.workplace()
    reward = load_reward(f"{EXAMPLES}/workplace.py:{name}")
    report, _ = audit_callable(reward, rows, sandbox=False, episode=episode)
    assert report.reward_kind == "trajectory"
    assert report.verdict == "pass", [(f.probe, f.examples[0].note) for f in report.blocking]
    status = {p.probe: p.status for p in report.probes if p.family in ("tools", "composition")}
    for probe in ("noop", "read_spam", "failed_writes", "writes_on_noop_task", "create_then_delete", "dominance"):
        assert status[probe] == "clean", (probe, status)
