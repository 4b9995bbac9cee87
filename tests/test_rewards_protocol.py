"""The reward protocol: loading specs, binding row fields, normalising returns, error results, versions."""

from __future__ import annotations

import math
import textwrap

import numpy as np
import pytest

from rewards import (Reward, RewardSpecError, VersionLog, load_reward, normalize_result, register_reward,
                     score_batch, score_one, trajectory_reward)
from schemas import Message, RewardResult, TaskRow, Trajectory


def _write(tmp_path, name, body):
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return p


def test_load_from_file_and_module_and_bad_specs(tmp_path):
    p = _write(tmp_path, "my_reward.py", """
        def exact(completion, answer):
            return completion.strip() == answer
        VALUE = 3
    """)
    r = load_reward(f"{p}:exact")
    assert r.name == "exact" and r.ref == f"{p.resolve()}:exact"
    assert r("4 ", answer="4").passed is True and r("5", answer="4").score == 0.0
    m = load_reward("rewards.protocol:normalize_result")
    assert m.ref == "rewards.protocol:normalize_result"
    with pytest.raises(RewardSpecError, match="does not exist"):
        load_reward(f"{tmp_path}/nope.py:exact")
    with pytest.raises(RewardSpecError, match=r"has no attribute 'exakt' \(callables defined there: exact\)"):
        load_reward(f"{p}:exakt")
    with pytest.raises(RewardSpecError, match="not callable"):
        load_reward(f"{p}:VALUE")
    with pytest.raises(RewardSpecError, match="no module named 'no_such_pkg'"):
        load_reward("no_such_pkg.mod:fn")
    with pytest.raises(RewardSpecError, match="no reward registered as 'nonexistent'"):
        load_reward("nonexistent")
    bad = _write(tmp_path, "broken.py", "import no_such_module_xyz\n")
    with pytest.raises(RewardSpecError, match="importing the file failed with ModuleNotFoundError"):
        load_reward(f"{bad}:f")


@pytest.mark.parametrize("value, score, passed", [
    (1.0, 1.0, None), (0, 0.0, None), (True, 1.0, True), (False, 0.0, False), (np.float32(0.25), 0.25, None),
    (np.bool_(True), 1.0, True), ({"score": 0.5, "passed": False, "components": {"f": 1}}, 0.5, False),
    ({"reward": 1.0, "reward_components": {"a": 0.5}}, 1.0, None),
    (RewardResult(score=0.7, passed=True, components={"x": 1.0}), 0.7, True),
])
def test_normalize_accepts_the_protocol_forms(value, score, passed):
    res = normalize_result(value, version="v@1")
    assert res.error is None and res.score == pytest.approx(score) and res.passed is passed
    assert res.reward_version == "v@1"


@pytest.mark.parametrize("value, fragment", [
    (math.nan, "non-finite"), (math.inf, "non-finite"), (None, "returned None"), ("1.0", "returned str"),
    ([1.0], "returned list"), ({"passed": True}, "without 'score'"), ({"score": 1, "bogus": 2}, "unknown keys"),
    ({"score": 1.0, "components": {"a": math.nan}}, "component 'a'"), ({"score": "high"}, "expected a number"),
    (RewardResult.model_construct(score=math.inf, components={}, reason="", error=None), "non-finite"),
])
def test_normalize_turns_wrong_returns_into_errors_not_zero(value, fragment):
    res = normalize_result(value)
    assert res.score is None and res.is_error and fragment in res.reason


def test_exceptions_and_missing_fields_are_error_results_with_traceback():
    def crashy(completion, answer):
        return {"a": 1}[completion]

    r = Reward(crashy)
    res = r("zzz", answer="1")
    assert res.score is None and "KeyError" in res.reason and "Traceback" in res.error and "crashy" in res.error
    res = r("a")
    assert res.is_error and "needs row field(s) ['answer']" in res.reason


def test_binding_passes_only_named_fields_or_all_with_kwargs():
    seen = {}

    def named(completion, answer):
        return 1.0

    def everything(completion, **kw):
        seen.update(kw)
        return 1.0

    rows = [TaskRow(id="t1", prompt=[Message(role="user", content="q")], answer="4", metadata={"difficulty": 2})]
    assert score_batch(named, ["x"], rows, sandbox=False)[0].score == 1.0
    score_batch(everything, ["x"], rows, sandbox=False)
    assert seen["answer"] == "4" and seen["difficulty"] == 2 and seen["prompt"][0]["content"] == "q"


def test_versions_change_with_code_and_config_and_are_stamped(tmp_path):
    p = _write(tmp_path, "v.py", "def r(completion):\n    return 1.0\n")
    v1 = load_reward(f"{p}:r", label="first").version
    p.write_text("def r(completion):\n    return 1.0\n\ndef helper():\n    return 2\n")
    import os
    os.utime(p, ns=(1, 1))  # a new mtime so the file is re-imported
    v2 = load_reward(f"{p}:r").version
    assert v1.content_hash != v2.content_hash and v1.label == "first"

    def f(completion):
        return 1.0

    assert Reward(f, config={"tol": 0}).version != Reward(f, config={"tol": 1}).version
    res = score_one(Reward(f, name="const"), "x", {}, sandbox=False)
    assert res.reward_version.startswith("const@") and len(res.reward_version) == len("const@") + 12
    log = VersionLog(tmp_path / "versions.sqlite")
    log.record(Reward(f, name="const", label="baseline"))
    log.record(Reward(f, name="const"))
    (row,) = log.versions("const")
    assert row["label"] == "baseline" and "return 1.0" in log.source("const", row["content_hash"][:8])


def test_registry_by_name(tmp_path):
    @register_reward("test_always_half", label="demo")
    def half(completion):
        return 0.5

    r = load_reward("test_always_half")
    assert r.name == "test_always_half" and r.version.label == "demo" and r("x").score == 0.5
    with pytest.raises(ValueError, match="already registered"):
        register_reward("test_always_half", lambda completion: 0.1)


def test_trajectory_reward_gets_trajectory_and_final_state():
    @trajectory_reward
    def state_check(traj, final_state, answer):
        return {"score": float(final_state["done"] and traj.final_answer == answer), "components": {"turns": traj.turns}}

    def named(trajectory, **kw):
        return 1.0

    traj = Trajectory(task_id="t", messages=[Message(role="assistant", content="ok")], final_answer="42", turns=3)
    (res,) = score_batch(state_check, [traj], [{"answer": "42"}], final_states=[{"done": True}], sandbox=False)
    assert res.score == 1.0 and res.components == {"turns": 3.0}
    assert Reward(named).kind == "trajectory" and Reward(state_check).kind == "trajectory"

    def plain(completion):
        return float(completion == "42")

    assert score_one(plain, traj, {}, sandbox=False).score == 1.0  # a completion reward gets the final answer


def test_versions_are_stable_across_processes_for_closures_and_objects(tmp_path):
    import subprocess
    import sys

    p = _write(tmp_path, "closures.py", """
        def helper(x):
            return x

        def make():
            def inner(completion):
                return float(helper(completion) == "1")
            return inner

        class Scorer:
            def __init__(self):
                self.fn = helper
                self.weight = 0.5
            def __call__(self, completion):
                return self.weight

        closure = make()
        scorer = Scorer()
    """)
    code = (f"from rewards import load_reward; print(load_reward('{p}:closure').version.content_hash, "
            f"load_reward('{p}:scorer').version.content_hash)")
    runs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
            for _ in range(2)}
    assert len(runs) == 1 and len(runs.pop().split()) == 2
