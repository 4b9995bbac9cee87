"""Shaping: dominance enforced by construction, refused with an explanation, overridable; components kept;
DAPO's soft overlong penalty; errors propagate."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewards import Reward, score_batch
from rewards.shaping import (OverlongPenalty, ShapedReward, ShapingError, Signal, check_dominance,
                             component_signal, overlong_penalty, overlong_signal)
from rewards.verifiers import NumericMatch, ToolCallMatch


def test_overlong_penalty_matches_dapo():
    assert overlong_penalty(10, max_length=20, cache_length=5) == 0.0
    assert overlong_penalty(15, 20, 5) == 0.0
    assert overlong_penalty(16, 20, 5) == pytest.approx(-0.2)
    assert overlong_penalty(20, 20, 5) == pytest.approx(-1.0)
    assert overlong_penalty(21, 20, 5) == -1.0
    pen = OverlongPenalty(max_length=4, cache_length=2)
    assert pen("ignored", completion_ids=[1, 2, 3]) == pytest.approx(-0.5)
    assert OverlongPenalty(max_length=3, cache_length=1, unit="words")("a b c") == pytest.approx(-1.0)
    with pytest.raises(ValueError):
        OverlongPenalty(max_length=4, cache_length=5)


def test_composition_that_breaks_dominance_is_refused_with_explanation():
    signals = [component_signal("format_ok", 0.5), overlong_signal(100, 50, unit="chars", weight=1.0)]
    with pytest.raises(ShapingError) as info:
        ShapedReward(NumericMatch(), signals, name="greedy", scale="none")
    msg = str(info.value)
    assert "breaks dominance" in msg and "up to 0.5" in msg and "as little as 0" in msg and "scale='auto'" in msg
    # explicitly overridden: built, and the bounds say it does not hold
    forced = ShapedReward(NumericMatch(), signals, name="greedy", scale="none", allow_dominance_violation=True)
    assert not forced.bounds.holds and forced.weights == forced.declared_weights
    # the same composition scaled automatically holds, with a margin
    auto = ShapedReward(NumericMatch(), signals, name="greedy")
    assert auto.bounds.holds and auto.bounds.min_pass - auto.bounds.max_fail >= 0.1 - 1e-9
    assert auto.declared_weights == {"format_ok": 0.5, "overlong": 1.0}
    assert auto.weights["format_ok"] / auto.weights["overlong"] == pytest.approx(0.5)  # ratios kept


def test_compositions_that_hold_are_not_rescaled():
    s = ShapedReward(NumericMatch(), [component_signal("format_ok", 0.3, applies_to="fail")], scale="none")
    assert s.weights == {"format_ok": 0.3} and s.bounds.max_fail == pytest.approx(0.3) and s.bounds.min_pass == 1.0


def _tool_rows():
    gt = [{"name": "a", "arguments": {"x": 1, "y": 2}}, {"name": "b", "arguments": {"z": "q"}}]
    return {"ground_truth_calls": gt}


def _calls(*cs):
    import json

    return "".join(f"<tool_call>{json.dumps({'name': n, 'arguments': a})}</tool_call>" for n, a in cs)


@settings(max_examples=25, deadline=None)
@given(w1=st.floats(0, 5), w2=st.floats(0, 5), w3=st.floats(-5, 0), seed=st.integers(0, 1000))
def test_dominance_holds_on_real_samples_for_any_auto_scaled_weights(w1, w2, w3, seed):
    shaped = ShapedReward(ToolCallMatch(), [
        component_signal("calls_matched", w1), component_signal("args_partial", w2),
        component_signal("extra_calls", w3, low=0, high=3, clip=True),
        overlong_signal(120, 60, unit="chars", weight=1.0),
    ])
    rng = random.Random(seed)
    options = [("a", {"x": 1, "y": 2}), ("a", {"x": 1, "y": 3}), ("b", {"z": "q"}), ("b", {"z": "Q "}),
               ("c", {}), ("a", {"x": 1})]
    completions = [_calls(*rng.sample(options, rng.randint(0, 4))) + " " * rng.randint(0, 200) for _ in range(40)]
    completions += [_calls(options[0], options[2]), _calls(options[2], options[0]) + " " * 300]
    res = score_batch(shaped, completions, [_tool_rows()] * len(completions))
    assert not any(r.is_error for r in res)
    b = check_dominance(res)
    assert b is not None and b.holds, (b, shaped.weights)
    assert b.max_fail <= shaped.bounds.max_fail + 1e-9 and b.min_pass >= shaped.bounds.min_pass - 1e-9


def test_components_are_always_kept_and_errors_propagate():
    shaped = ShapedReward(NumericMatch(), [component_signal("format_ok", 0.4, applies_to="fail")], name="m")
    r = Reward(shaped)
    ok, wrong, untagged = (r(c, answer="4") for c in ["<answer>4</answer>", "<answer>5</answer>", "4"])
    assert ok.passed and ok.score == pytest.approx(1.0) and ok.components["format_ok"] == 1.0
    assert wrong.passed is False and 0 < wrong.score < ok.score and wrong.components["abs_error"] == 1.0
    assert untagged.score == 0.0 and untagged.components["format_ok"] == 0.0
    assert ok.reward_version.startswith("m@")
    # the verifier's error is the shaped reward's error, never a 0
    bad = r("<answer>4</answer>", answer="n/a")
    assert bad.is_error and bad.score is None and "numeric_match" in bad.reason


def test_signal_out_of_declared_range_is_an_error():
    def wild(completion):
        return 3.0

    shaped = ShapedReward(NumericMatch(), [Signal(name="wild", weight=0.1, reward=wild)])
    res = Reward(shaped)("<answer>4</answer>", answer="4")
    assert res.is_error and "outside its declared range [0, 1]" in res.reason
    missing = ShapedReward(NumericMatch(), [component_signal("nope", 0.1)])
    assert Reward(missing)("<answer>4</answer>", answer="4").is_error


def test_version_changes_with_weights_and_verifier_config():
    a = Reward(ShapedReward(NumericMatch(), [component_signal("format_ok", 0.2, applies_to="fail")], name="s"))
    b = Reward(ShapedReward(NumericMatch(), [component_signal("format_ok", 0.3, applies_to="fail")], name="s"))
    c = Reward(ShapedReward(NumericMatch(abs_tol=0.1), [component_signal("format_ok", 0.2, applies_to="fail")],
                            name="s"))
    assert len({a.version.content_hash, b.version.content_hash, c.version.content_hash}) == 3
    assert a.weights == {"format_ok": 0.2}


def test_shaped_user_reward_runs_in_the_sandbox(tmp_path):
    p = tmp_path / "shaped_user.py"
    p.write_text(
        "from rewards.shaping import ShapedReward, Signal\n"
        "def binary(completion, answer):\n    return completion.strip() == answer\n"
        "def brevity(completion):\n    return 1.0 / (1 + len(completion))\n"
        "shaped = ShapedReward(binary, [Signal(name='brevity', weight=2.0, reward=brevity)], name='user_shaped')\n"
    )
    from rewards import load_reward

    r = load_reward(f"{p}:shaped")
    assert not r.trusted and r.name == "user_shaped"
    res = score_batch(r, ["4", "5", "44"], [{"answer": "4"}] * 3, sandbox=True)
    assert res[0].passed and not res[1].passed and res[0].score > res[1].score > res[2].score
