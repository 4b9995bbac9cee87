"""benchmarks/decision_margin.py: the decision tokens of a verified demonstration are found in the rendered chat,
read teacher-forced, and a deviation's margin is the model's own log-prob gap between its argmax and the
demonstration's token."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from decision_margin import (assistant_spans, demo_messages, focus_summary, leads_vs_flips, summary,  # noqa: E402
                             task_record, token_margins)
from workplace_testdata import default_world_and_tasks  # noqa: E402


@pytest.fixture(scope="module")
def demo():
    from training.model import load_tokenizer

    _, world, tasks = default_world_and_tasks()
    task = next(t for t in tasks if len(t.ground_truth_calls or []) >= 2)
    return task, demo_messages(task, world), load_tokenizer("default")


def test_each_assistant_span_is_the_reply_and_its_end_token(demo):
    task, messages, tok = demo
    full, spans = assistant_spans(tok, messages)
    replies = [m["content"] for m in messages if m["role"] == "assistant"]
    assert len(spans) == len(replies) == len(task.ground_truth_calls) + 1  # one turn per read, then the answer
    for (turn, start, end, calls), reply in zip(spans, replies):
        assert full[start:end] == reply + "<|im_end|>"
        assert calls == ("<tool_call>" in reply)
    assert [s[3] for s in spans] == [True] * (len(spans) - 1) + [False]


def test_margins_are_the_models_log_prob_gaps_on_the_decision_tokens(demo):
    import torch

    from training.policy import build_random_model

    task, messages, tok = demo
    model = build_random_model(tok, {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                                     "num_attention_heads": 4, "num_key_value_heads": 2}, seed=0).eval()
    recs = token_margins(model, tok, messages)
    replies = [m["content"] for m in messages if m["role"] == "assistant"]
    for turn, reply in enumerate(replies[:-1]):  # a tool-calling turn: every token, in order
        assert "".join(r["token"] for r in recs if r["turn"] == turn) == reply + "<|im_end|>"
    assert len([r for r in recs if r["turn"] == len(replies) - 1]) == 1  # the answer: its first token only
    full, _ = assistant_spans(tok, messages)
    ids = tok(full, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logp = model(torch.tensor([ids])).logits[0].float().log_softmax(-1)
    deviating = [r for r in recs if "margin" in r]
    assert deviating  # a random model follows no demonstration
    for r in recs:
        row = logp[r["pos"] - 1]
        assert r["logp"] == pytest.approx(float(row[ids[r["pos"]]]), abs=1e-3)
        if "margin" in r:
            assert r["margin"] == pytest.approx(float(row.max() - row[ids[r["pos"]]]), abs=1e-3) and r["margin"] > 0
        else:
            top2 = row.topk(2).values
            assert int(row.argmax()) == ids[r["pos"]] and r["lead"] == pytest.approx(float(top2[0] - top2[1]), abs=1e-3)


def test_the_summary_reports_how_far_the_second_model_moved_the_first_models_deviation():
    class T:
        id, metadata = "t1", {"template": "calendar.create"}

    sft = [{"pos": 5, "turn": 0, "token": "company", "logp": -2.9, "argmax": "calendar", "margin": 2.8, "context": ""},
           {"pos": 6, "turn": 0, "token": "_", "logp": -0.01}]
    grpo = [{"pos": 5, "turn": 0, "token": "company", "logp": -0.5}, {"pos": 6, "turn": 0, "token": "_", "logp": -0.01}]
    rec = task_record(T, {"sft": sft, "grpo": grpo}, "sft")
    assert rec["models"]["sft"]["first"]["margin"] == 2.8 and not rec["models"]["sft"]["follows"]
    assert rec["models"]["grpo"]["follows"] and rec["models"]["grpo"]["at_first_model_deviation"]["margin"] == 0.0
    s = summary([rec], ["sft", "grpo"])
    assert (s["sft"]["follows"], s["grpo"]["follows"]) == (0, 1)
    assert s["by_template"]["calendar.create"]["margin_at_first_model_deviation"] == {"sft": 2.8, "grpo": 0.0}


def test_the_focus_split_separates_trained_templates_from_the_rest():
    def rec(template, before, after):
        return {"template": template, "models": {"sft": {"at_first_model_deviation": {"margin": before}},
                                                 "grpo": {"at_first_model_deviation": {"margin": after}}}}

    records = [rec("calendar.create", 2.0, 1.0), rec("calendar.create", 1.0, 0.0), rec("crm.phone", 3.0, 3.5)]
    out = focus_summary(records, ["sft", "grpo"], {"calendar.create"})
    assert out["focused_templates"] == {"tasks": 2, "mean_margin_at_first_model_deviation": {"sft": 1.5, "grpo": 0.5},
                                        "flipped_at_that_position": {"sft": 0, "grpo": 1}}
    assert out["other_templates"]["mean_margin_at_first_model_deviation"] == {"sft": 3.0, "grpo": 3.5}


def test_closest_calls_of_lost_tasks_are_set_against_the_kept_ones():
    """A task's closest call is its smallest lead, defined only where the model follows the demonstration; the
    split counts the tasks passed another way apart and reads only the tasks passed before."""
    class T:
        def __init__(self, i):
            self.id, self.metadata = f"t{i}", {"template": "x"}

    def toks(*leads, deviate=False):
        out = [{"pos": i + 1, "turn": 0, "token": "a", "logp": -0.1, "lead": v} for i, v in enumerate(leads)]
        if deviate:
            out.append({"pos": 9, "turn": 0, "token": "b", "logp": -3.0, "argmax": "c", "margin": 1.0, "context": ""})
        return out

    records = [task_record(T(i), {"sft": t}, "sft") for i, t in
               enumerate([toks(2.0, 0.3), toks(0.8, 5.0), toks(3.0, 1.5), toks(0.1, deviate=True), toks(0.05)])]
    assert [r["models"]["sft"]["closest_lead"] for r in records] == [0.3, 0.8, 1.5, None, 0.05]
    out = leads_vs_flips(records, "sft", passed_before={"t0", "t1", "t2", "t3"}, lost={"t0", "t3"})
    assert out == {"passed_before": 4, "passed_another_way": 1,
                   "lost": {"tasks": 1, "median_closest_lead": 0.3, "below_1_nats": 1},
                   "kept": {"tasks": 2, "median_closest_lead": 1.15, "below_1_nats": 1}}
