"""DPO through TRL's DPOTrainer on a tiny random-init Llama with the SmolLM2 tokenizer; pairs from a report."""

from __future__ import annotations

import json

import pytest

from schemas.dpo_config import DPOConfig
from schemas.evaluation import SampleResult
from schemas.task import TaskRow
from training.dpo import DPOError, pairs_from_report, read_pairs, run_dpo
from training.evaluation import build_report, make_task_eval
from training.registry import Registry


def test_pairs_from_report_pair_pass_with_fail_of_the_same_task():
    t1 = TaskRow(id="a", prompt=[{"role": "user", "content": "2+2?"}], metadata={"category": "m"})
    t2 = TaskRow(id="b", prompt=[{"role": "user", "content": "3+3?"}])
    rep = build_report([
        make_task_eval(t1, [SampleResult(completion="4", passed=True, score=1.0),
                            SampleResult(completion="5", passed=False, score=0.0, reason="wrong"),
                            SampleResult(completion="22", passed=False, score=0.0, reason="wrong")]),
        make_task_eval(t2, [SampleResult(completion="6", passed=True, score=1.0)] * 2),  # no failure: no pair
    ], k=1, model="m", dataset="d")
    pairs = pairs_from_report(rep)
    assert [(p["chosen"][0]["content"], p["rejected"][0]["content"]) for p in pairs] == [("4", "5"), ("4", "22")]
    assert pairs[0]["prompt"] == [{"role": "user", "content": "2+2?"}]


def test_bad_pairs_file_names_the_line(tmp_path):
    p = tmp_path / "pairs.jsonl"
    p.write_text(json.dumps({"prompt": "x", "chosen": "y", "rejected": "z"}) + "\n" + json.dumps({"prompt": "x"}) + "\n")
    with pytest.raises(DPOError, match=r"line 2 lacks field\(s\) \['chosen', 'rejected'\]"):
        read_pairs(p)


def test_dpo_steps_move_the_margin_and_register_a_checkpoint(tmp_path):
    pairs = [{"prompt": [{"role": "user", "content": f"What is {i} plus {i}?"}],
              "chosen": [{"role": "assistant", "content": f"It is {2 * i}."}],
              "rejected": [{"role": "assistant", "content": "I cannot help with that request, sorry."}]}
             for i in range(4)]
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs))
    cfg = DPOConfig(pairs={"path": "pairs.jsonl"}, model={"init": "random", "tokenizer": "default"},
                    max_steps=4, lr=1e-3, batch_size=2, max_length=64, output_dir=str(tmp_path / "out"))
    reg = Registry(tmp_path / "r.sqlite")
    res = run_dpo(cfg, base=tmp_path, registry=reg)
    steps = [e for e in res["logs"] if "rewards/margins" in e]
    assert len(steps) == 4
    assert steps[0]["loss"] == pytest.approx(0.6931, abs=1e-3)  # policy == reference at the first step
    assert steps[-1]["loss"] < steps[0]["loss"] - 0.02
    assert steps[-1]["rewards/margins"] > 0.05
    rec = reg.checkpoint(res["registered"])
    assert reg.verify(rec.name)[0] and rec.metrics["rewards/margins"] > 0
    assert (tmp_path / "out" / "final" / "manifest.json").is_file()
