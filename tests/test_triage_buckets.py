"""Triage on a crafted failure file: three input shapes, re-verification with the workplace verifier, bucketing
by reason code then by error text, regression tasks, recommendations, and DPO pairs from pass/fail traces."""

from __future__ import annotations

import json
from functools import lru_cache

import pytest

from generators.task_io import read_tasks
from schemas.messages import Message
from schemas.trajectory import Trajectory
from training.triage import (
    TriageError, cluster_signatures, error_signature, pairs_from_traces, read_traces, reverify, triage,
    workplace_verifier,
)


@lru_cache(maxsize=1)
def world_and_tasks():
    from generators.workplace.tasks import generate_tasks
    from generators.workplace.world import CONTEXT, TODAY, generate_world_tables
    from rewards.environments.workplace import WorkplaceWorld

    tables = generate_world_tables()
    tasks = generate_tasks(tables, today=TODAY, context=CONTEXT, n=80, seed=0)
    return WorkplaceWorld.from_tables(tables, today=TODAY, context=CONTEXT), tasks


def openai_calls(calls, answer="Done."):
    msgs = []
    for i, c in enumerate(calls):
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": json.dumps({"result": "ok"})})
    if answer is not None:
        msgs.append({"role": "assistant", "content": answer})
    return msgs


def crafted_file(tmp_path):
    world, tasks = world_and_tasks()
    writes = [t for t in tasks if t.metadata["n_writes"] >= 1 and t.metadata["n_calls"] >= 2]
    lines = []
    user = lambda t: [{"role": "user", "content": next(m.content for m in t.prompt if m.role == "user")}]  # noqa: E731
    # 1-2: passing traces (ground truth replayed), OpenAI shape, matched by task id
    for t in writes[:2]:
        lines.append({"task_id": t.id, "messages": user(t) + openai_calls(t.ground_truth_calls)})
    # 3-5: the same two tasks and a third, failing: the reads but not the writes (missing_action)
    from schemas.workplace import WRITE_TOOLS

    for t in writes[:3]:
        reads = [c for c in t.ground_truth_calls if c.name not in WRITE_TOOLS]
        lines.append({"task_id": t.id, "messages": user(t) + openai_calls(reads)})
    # 6-8: calls to tools that do not exist (wrong_tool), our trajectory shape, matched by user message only
    for t in writes[3:6]:
        traj = Trajectory(task_id="prod-unknown", messages=[Message(role="user", content=user(t)[0]["content"]),
                          Message(role="assistant", content='<tool_call>{"name": "send_mail", "arguments": '
                                  '{"to": "x@y.com"}}</tool_call>'), Message(role="assistant", content="Sent.")],
                          final_answer="Sent.", turns=2)
        lines.append(json.loads(traj.model_dump_json()))
    # 9-10: bare JSON without the tags (format_error near misses)
    for t in writes[6:8]:
        lines.append({"task_id": t.id, "messages": user(t) + [
            {"role": "assistant", "content": '{"name": "email_send_email", "arguments": {"recipient": "a@b.co"}}'},
            {"role": "tool", "content": json.dumps({"error": "format error: a bare JSON object"})},
            {"role": "assistant", "content": '<tool_call>{"name": "email_send_email", "arguments": {"recipient": '}],
            "stopped": "format_error"})
    # 11-15: unknown tasks, production error text only: two failure modes with varying specifics
    for day in ("2026-13-01", "2026-02-30", "2026-00-10"):
        lines.append({"id": f"p-{day}", "messages": [{"role": "user", "content": "Move my deadline"},
                      {"role": "assistant", "content": "ok"}],
                      "error": f"Invalid date '{day}' for field due_date of task 00000{day[-1]}3"})
    for s in (30, 45):
        lines.append({"id": f"t-{s}", "messages": [{"role": "user", "content": "Email Bob"},
                      {"role": "assistant", "content": "ok"}], "error": f"Upstream timeout after {s}s calling CRM"})
    # 16: a NeMo Gym rollout for the first task, doing nothing
    t0 = writes[0]
    lines.append({"id": t0.id, "responses_create_params": {"input": user(t0)},
                  "response": {"output": [{"type": "message", "role": "assistant",
                                           "content": [{"type": "output_text", "text": "Nothing to do."}]}]},
                  "reward": 0.0})
    path = tmp_path / "failures.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path, tasks, world


def test_signatures_merge_specifics_but_not_different_errors():
    a = error_signature("Invalid date '2026-13-01' for field due_date of task 0000013")
    b = error_signature("Invalid date '2026-02-30' for field due_date of task 0000203")
    c = error_signature("Upstream timeout after 30s calling CRM")
    assert a == b
    reps = cluster_signatures([a, b, c, error_signature("Upstream timeout after 45s calling CRM")])
    assert len(set(reps.values())) == 2


def test_bad_lines_are_named(tmp_path):
    p = tmp_path / "f.jsonl"
    p.write_text('{"messages": [{"role": "user", "content": "x"}]}\nnot json\n')
    with pytest.raises(TriageError, match="line 2 is not valid JSON"):
        read_traces(p)
    p.write_text('{"foo": 1}\n')
    with pytest.raises(TriageError, match="line 1: no 'messages' list"):
        read_traces(p)


def test_triage_buckets_the_crafted_file(tmp_path):
    path, tasks, world = crafted_file(tmp_path)
    verifier = workplace_verifier(lambda task: world)
    rep = triage(path, tasks=tasks, verifier=verifier, out=tmp_path / "regression.parquet")
    assert rep.traces == 16 and rep.formats == {"openai": 10, "trajectory": 5, "nemo_gym": 1}  # 9-10 validate as trajectories
    assert rep.passed_on_reverification == [1, 2]
    by_name = {b.name: b for b in rep.buckets}
    assert by_name["missing_action"].trace_indices == [3, 4, 5, 16]
    assert by_name["wrong_tool"].trace_indices == [6, 7, 8] and by_name["wrong_tool"].key_kind == "verifier"
    assert by_name["format_error"].trace_indices == [9, 10]
    text = [b for b in rep.buckets if b.key_kind == "error_text"]
    assert sorted(b.count for b in text) == [2, 3]
    # recommendations: the lightest that the evidence supports
    assert by_name["wrong_tool"].recommendation.intervention == "prompt_or_tool_description"
    assert "send_mail x3" in by_name["wrong_tool"].recommendation.why
    assert by_name["format_error"].recommendation.intervention == "prompt_or_tool_description"
    ma = by_name["missing_action"].recommendation
    assert ma.intervention == "sft_corrected_demonstrations" and "dpo_pairs" in ma.alternatives
    assert ma.evidence["with_passing_pair"] == 3  # lines 3, 4 and 16 are tasks that also have a passing trace
    date_bucket = next(b for b in text if b.count == 3)
    assert date_bucket.recommendation.intervention == "prompt_or_tool_description"
    assert date_bucket.signature == "invalid date <value> for field due_date of task <id>"
    # regression tasks: one per distinct task per bucket, split regression, category regression/<bucket>
    reg = read_tasks(rep.regression_path)
    assert rep.regression_tasks == len(reg) == 3 + 3 + 2 + 3 + 2
    assert {t.split for t in reg} == {"regression"}
    assert {t.metadata["category"] for t in reg} >= {"regression/missing_action", "regression/wrong_tool"}
    verified = [t for t in reg if t.ground_truth_calls]
    assert len(verified) == 8 and all(t.metadata["original_task_id"] in {x.id for x in tasks} for t in verified)


def test_pairs_from_pass_and_fail_traces(tmp_path):
    path, tasks, world = crafted_file(tmp_path)
    traces = read_traces(path)
    reverify(traces, tasks, workplace_verifier(lambda task: world))
    pairs = pairs_from_traces(traces)
    assert len(pairs) == 3  # task 1: pass x (fail, nemo no-op); task 2: pass x fail
    p = pairs[0]
    assert p["prompt"][0]["role"] == "user" and "<tool_call>" in p["chosen"][0]["content"]
    assert p["chosen"] != p["rejected"]


def test_infrastructure_errors_are_not_sent_to_training(tmp_path):
    path, tasks, world = crafted_file(tmp_path)
    rep = triage(path, tasks=tasks, verifier=workplace_verifier(lambda task: world), out=tmp_path / "r.parquet")
    timeout = next(b for b in rep.buckets if "timeout" in b.name)
    assert timeout.recommendation.evidence["infrastructure_errors"] == 2
    assert "no model training" in timeout.recommendation.why
