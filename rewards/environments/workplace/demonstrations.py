"""Demonstrations for SFT: a task's ground truth replayed through the environment as a chat transcript.

The transcript uses exactly what the tool loop shows a model: the same system prompt (`initial_messages`), calls
written in the `<tool_call>` format of `schemas.tool_prompt`, real tool results from the world, and the task's
reference answer as the final message. Reads each get their own turn (the next step depends on their result);
consecutive writes share one turn. A demonstration whose call fails, or whose write uses an id that no earlier
message shows (an ungrounded id the model could not have known), is rejected with the reason.
"""

from __future__ import annotations

import re
from typing import Any

from schemas.messages import Message, ToolCall
from schemas.task import TaskRow
from schemas.tool_prompt import format_tool_call
from schemas.trajectory import Trajectory
from schemas.workplace import WRITE_TOOLS
from rewards.environments.workplace.env import WorkplaceEnv

_ID_ARGS = ("email_id", "event_id", "task_id", "customer_id")


class DemonstrationError(ValueError):
    """The ground truth of a task cannot be shown as a clean transcript; the message names the task and call."""


def _turns(calls: list[ToolCall]) -> list[list[ToolCall]]:
    turns: list[list[ToolCall]] = []
    for c in calls:
        if c.name in WRITE_TOOLS and turns and all(x.name in WRITE_TOOLS for x in turns[-1]):
            turns[-1].append(c)
        else:
            turns.append([c])
    return turns


def demonstration(task: TaskRow, env: WorkplaceEnv, *, check_grounding: bool = True) -> Trajectory:
    """The ground-truth trajectory of `task` (messages + final answer), verified to run cleanly."""
    messages = env.reset(task)
    seen_text = " ".join(m.content for m in messages)
    for turn in _turns(list(task.ground_truth_calls or [])):
        if check_grounding:
            for c in turn:
                for key in _ID_ARGS:
                    v = c.arguments.get(key)
                    if isinstance(v, str) and not re.search(re.escape(v), seen_text):
                        raise DemonstrationError(f"task {task.id}: {c.name} uses {key}={v} that no earlier message shows")
        calls = [ToolCall(name=c.name, arguments=dict(c.arguments), id=f"call_{len(messages)}_{i}")
                 for i, c in enumerate(turn)]
        text = "\n".join(format_tool_call(c.name, c.arguments) for c in calls)
        messages.append(Message(role="assistant", content=text, tool_calls=calls))
        results = env.step(calls)
        for c, r in zip(calls, results):
            if r.content.startswith('{"error"'):
                raise DemonstrationError(f"task {task.id}: ground-truth call {c.name} failed: {r.content[:200]}")
        messages.extend(results)
        seen_text += " " + " ".join(r.content for r in results)
    answer = task.answer or "Done."
    messages.append(Message(role="assistant", content=answer))
    return Trajectory(task_id=task.id, messages=messages, final_answer=answer,
                      turns=sum(1 for m in messages if m.role == "assistant"), stopped="answer",
                      metadata={"demonstration": True})


def demonstration_record(traj: Trajectory, task: TaskRow) -> dict[str, Any]:
    """One SFT line: chat messages (role + content, the format the model sees) and the task's identity."""
    return {"task_id": task.id, "split": task.split,
            "messages": [{"role": m.role, "content": m.content} for m in traj.messages],
            "metadata": {k: task.metadata.get(k) for k in ("category", "template", "difficulty", "noop")}}
