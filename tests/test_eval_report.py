"""Evaluation reports: aggregation on known samples, errors counted as errors, a real-model run, compare, plots."""

from __future__ import annotations

import json

import pytest

from schemas.evaluation import SampleResult
from schemas.rewards import RewardResult
from schemas.task import TaskRow
from training.evaluation import (
    CompletionRunner, EvaluationError, FixedCompletionRunner, build_report, compare_reports, evaluate, load_report,
    make_task_eval, save_report, select_split,
)
from training.passk import pass_at_k


def task(i: int, cat: str, split: str = "test", answer: str = "yes") -> TaskRow:
    return TaskRow(id=f"t{i}", split=split, prompt=[{"role": "user", "content": f"q{i}"}], answer=answer,
                   metadata={"category": cat})


def exact(completion: str, answer: str) -> RewardResult:
    ok = completion.strip() == answer
    return RewardResult(score=1.0 if ok else 0.2, passed=ok, reason="" if ok else "wrong_answer: differs",
                        components={"format": 1.0 if completion else 0.0})


def test_report_numbers_match_hand_computation():
    tasks = [task(0, "math"), task(1, "math"), task(2, "email"), task(3, "email", split="regression")]
    outs = {"t0": ["yes", "no", "yes", "no"], "t1": ["no"] * 4, "t2": ["yes"] * 4, "t3": ["no", "no", "no", "yes"]}
    rep = evaluate(tasks, FixedCompletionRunner(outs, exact), n_samples=4, k=2, model="m", dataset="d")
    assert rep.overall.pass_at_1 == pytest.approx((0.5 + 0 + 1 + 0.25) / 4)
    expect_k2 = (pass_at_k(4, 2, 2) + 0 + 1 + pass_at_k(4, 1, 2)) / 4
    assert rep.overall.pass_at_k["2"] == pytest.approx(expect_k2)
    assert rep.by_category["math"].pass_at_1 == pytest.approx(0.25)
    assert set(rep.by_split) == {"test", "regression"} and rep.by_split["regression"].tasks == 1
    assert rep.overall.failure_reasons == {"wrong_answer": 9}
    assert rep.overall.mean_reward == pytest.approx((7 * 1.0 + 9 * 0.2) / 16)
    assert rep.overall.components == {"format": 1.0}


def test_a_crashing_reward_is_an_error_not_a_zero():
    def bad(completion: str, answer: str) -> float:
        if completion == "boom":
            raise ZeroDivisionError("division by zero")
        return float(completion == answer)

    rep = evaluate([task(0, "a"), task(1, "a")], FixedCompletionRunner({"t0": ["boom"], "t1": ["yes"]}, bad),
                   model="m", dataset="d")
    assert rep.overall.errors == 1
    assert rep.overall.failure_reasons == {"reward_error": 1}
    s = rep.tasks[0].samples[0]
    assert s.score is None and "ZeroDivisionError" in s.error
    assert rep.overall.mean_reward == 1.0  # the error is excluded, not averaged in as 0


def test_k_above_samples_and_empty_split_are_refused():
    with pytest.raises(EvaluationError, match="k=4 needs at least k samples"):
        evaluate([task(0, "a")], FixedCompletionRunner({"t0": ["yes"]}, exact), n_samples=2, k=4)
    with pytest.raises(EvaluationError, match=r"dataset has splits \['test'\]"):
        select_split([task(0, "a")], ["validation"])


def test_compare_finds_flips_and_a_known_difference():
    tasks = [task(i, "a" if i % 2 else "b") for i in range(60)]
    a_out = {t.id: ["yes" if i < 20 else "no"] for i, t in enumerate(tasks)}
    b_out = {t.id: ["yes" if i < 40 or i == 59 else "no"] for i, t in enumerate(tasks)}
    b_out["t0"] = ["no"]  # one regression
    ra = evaluate(tasks, FixedCompletionRunner(a_out, exact), model="A", dataset="d")
    rb = evaluate(tasks, FixedCompletionRunner(b_out, exact), model="B", dataset="d")
    cmp = compare_reports(ra, rb, n_resamples=3000)
    assert cmp.n_tasks == 60 and cmp.delta == pytest.approx(20 / 60)
    assert cmp.significant and cmp.ci_low > 0
    fixed = [f.task_id for f in cmp.flips if f.kind == "fixed"]
    broken = [f.task_id for f in cmp.flips if f.kind == "broken"]
    assert broken == ["t0"] and len(fixed) == 21 and "t59" in fixed
    assert set(cmp.by_category) == {"a", "b"}


def test_save_load_and_plots(tmp_path):
    rep = build_report([make_task_eval(task(0, "a"), [SampleResult(passed=True, score=1.0)]),
                        make_task_eval(task(1, "b"), [SampleResult(passed=False, score=0.0, reason="wrong_tool")])],
                       k=1, model="m", dataset="d")
    path = save_report(rep, tmp_path / "eval" / "report.json")
    back = load_report(path)
    assert back.overall.pass_at_1 == 0.5 and len(back.plots) == 2
    for p in back.plots:
        data = open(p, "rb").read()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000
    (tmp_path / "bad.json").write_text(json.dumps({"model": "x"}))
    with pytest.raises(EvaluationError, match="not an evaluation report"):
        load_report(tmp_path / "bad.json")


def test_real_model_sampled_evaluation(embedded):
    model, tok = embedded
    tasks = [TaskRow(id="cap", split="test", prompt=[{"role": "user", "content": "What is the capital of France? One word."}],
                     answer="Paris", metadata={"category": "geo"}),
             TaskRow(id="add", split="test", prompt=[{"role": "user", "content": "What is 2+2? Answer with a number."}],
                     answer="4", metadata={"category": "math"})]

    def contains(completion: str, answer: str) -> float:
        return float(answer.lower() in completion.lower())

    runner = CompletionRunner(model, tok, contains, temperature=0.8, max_new_tokens=12)
    rep = evaluate(tasks, runner, n_samples=3, k=2, model="default", dataset="inline", seed=1)
    assert rep.overall.samples == 6 and set(rep.by_category) == {"geo", "math"}
    for t in rep.tasks:
        assert all(s.completion for s in t.samples)
        assert t.c == sum(1 for s in t.samples if (tasks[0] if t.task_id == "cap" else tasks[1]).answer.lower()
                          in s.completion.lower())
    assert 0.0 <= rep.overall.pass_at_1 <= rep.overall.pass_at_k["2"] <= 1.0
