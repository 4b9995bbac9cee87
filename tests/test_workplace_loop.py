"""THE tool-call parser and the generic tool loop (whole episodes and turn by turn), plus one real-model rollout."""

from __future__ import annotations

import json

import pytest

from rewards.environments.loop import ToolLoop, run_episode
from rewards.environments.toolcalls import MAX_CALLS_PER_REPLY, parse_reply, system_prompt
from rewards.environments.workplace import WorkplaceEnv
from schemas.messages import Message, ToolCall
from schemas.task import TaskRow
from schemas.tool_prompt import TOOL_CALL_OPEN, format_tool_call
from schemas.workplace import tool_specs
from workplace_testdata import small_world

WORLD = small_world()
TASK = TaskRow(id="t1", prompt=[Message(role="user", content="Delete the pricing page task.")],
               ground_truth_calls=[ToolCall(name="project_management_delete_task", arguments={"task_id": "00000002"})])


def test_parse_valid_calls_and_final_answer():
    text = ("Let me look.\n" + format_tool_call("email_search_emails", {"query": "ana"})
            + '\n<tool_call>{"name": "email_delete_email", "arguments": "{\\"email_id\\": \\"00000001\\"}"}</tool_call>')
    p = parse_reply(text)
    assert [c.name for c in p.calls] == ["email_search_emails", "email_delete_email"]
    assert p.calls[1].arguments == {"email_id": "00000001"} and not p.errors and p.final_answer is None
    final = parse_reply("  All done, nothing else to change.  ")
    assert final.is_final and final.final_answer == "All done, nothing else to change."


@pytest.mark.parametrize("text,fragment", [
    ('<tool_call>{"name": "x", "arguments": {}}', "not closed"),
    ("<tool_call>{not json}</tool_call>", "not valid JSON"),
    ('<tool_call>{"arguments": {}}</tool_call>', "no tool name"),
    ('<tool_call>{"name": "x", "arguments": [1, 2]}</tool_call>', "must be a JSON object"),
    ('<tool_call>{"name": "x", "arguments": {}, "extra": 1}</tool_call>', "unexpected keys"),
    ('<tool_call>["x"]</tool_call>', "must be a JSON object"),
    ('{"name": "email_search_emails", "arguments": {"query": "a"}}', "wrapped in"),
    ("<tool_call>" + '{"name": "x", "arguments": {"a": "' + "y" * 20_000 + '"}}' + "</tool_call>", "characters long"),
    ('<tool_call>{"name": "x", "arguments": {"a": ' + "[" * 5_000 + "]" * 5_000 + "}}</tool_call>", "nested deeper"),
    ("".join(format_tool_call("x", {}) for _ in range(MAX_CALLS_PER_REPLY + 1)), "limit"),
])
def test_malformed_replies_are_format_errors_not_crashes(text, fragment):
    p = parse_reply(text)
    assert p.errors and fragment in p.errors[0], p.errors
    assert not p.is_final


def test_system_prompt_teaches_the_format_and_lists_every_tool():
    sp = system_prompt(tool_specs(), context="Today is Monday.")
    assert sp.startswith("Today is Monday.") and TOOL_CALL_OPEN in sp
    assert all(s.function.name in sp for s in tool_specs())
    assert "list_name: Backlog|In Progress|In Review|Completed" in sp


def test_run_episode_with_a_scripted_policy():
    replies = iter([format_tool_call("project_management_search_tasks", {"task_name": "pricing"}),
                    format_tool_call("project_management_delete_task", {"task_id": "00000002"}),
                    "I deleted the pricing page task."])
    seen = []

    def policy(messages):
        seen.append(messages)
        return next(replies)

    traj = run_episode(TASK, WorkplaceEnv(WORLD), policy)
    assert traj.stopped == "answer" and traj.turns == 3 and traj.final_answer.startswith("I deleted")
    assert traj.reward.passed and traj.reward.reason == "pass"
    assert seen[0][0]["role"] == "system" and "project_management_delete_task" in seen[0][0]["content"]
    tool_msg = seen[1][-1]
    assert tool_msg["role"] == "tool" and json.loads(tool_msg["content"])[0]["task_id"] == "00000002"
    assert WORLD.row("project_tasks", "00000002") is not None  # the base world is untouched


def test_turn_by_turn_api_marks_assistant_and_tool_messages():
    loop = ToolLoop(TASK, WorkplaceEnv(WORLD), max_turns=4)
    added = loop.step("oops <tool_call>{bad</tool_call>")
    assert [m.role for m in added] == ["assistant", "tool"] and "format error" in added[1].content
    added = loop.step(format_tool_call("project_management_delete_task", {"task_id": "00000002"}))
    assert added[0].tool_calls[0].name == "project_management_delete_task" and added[1].role == "tool"
    assert not loop.done
    loop.step("Deleted.")
    traj = loop.trajectory()
    assert loop.done and traj.metadata == {"calls": 1, "format_errors": 1}
    with pytest.raises(RuntimeError):
        loop.step("again")


def test_repeated_format_errors_stop_the_episode():
    loop = ToolLoop(TASK, WorkplaceEnv(WORLD), max_turns=10, max_format_errors=3)
    while not loop.done:
        loop.step("<tool_call>nope</tool_call>")
    assert loop.stopped == "format_error" and loop.turns == 3


@pytest.mark.slow
def test_embedded_model_rollout_is_judged(embedded):
    from training.chat import generate_reply

    model, tok = embedded
    traj = run_episode(TASK, WorkplaceEnv(WORLD),
                       lambda msgs: generate_reply(model, tok, msgs, max_new_tokens=48), max_turns=2)
    assert traj.reward is not None and traj.reward.reason
    assert traj.messages[0].role == "system" and traj.turns >= 1
