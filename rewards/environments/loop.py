"""The generic tool loop used by evaluation and training: model text -> tool calls -> results -> ... -> trajectory.

Torch-free on purpose: a trainer drives it with its own policy and does token bookkeeping/masking itself.

Two ways to drive it:

1. Whole episodes: `run_episode(task, env, policy)` where `policy(messages: list[dict]) -> str` returns the next
   assistant reply for chat messages (`{"role", "content"}` dicts, tool specs already in the system message).

2. Turn by turn (what a trainer that batches generation and masks tokens needs)::

       loop = ToolLoop(task, env, max_turns=8)
       while not loop.done:
           msgs = loop.prompt()            # chat dicts to render with the tokenizer's template
           text = my_generate(msgs)        # the trainer's own generation; it keeps token ids / logprobs
           added = loop.step(text)         # parses, runs the calls, returns the new Message objects:
                                           #   added[0] is the assistant turn (train on its tokens),
                                           #   added[1:] are tool results (mask them from the loss)
       traj = loop.trajectory()            # schemas.trajectory.Trajectory; token fields are the trainer's to fill
       result = env.verify(traj)           # optional: the environment's verdict

The environment must provide `reset(task) -> list[Message]` and `step(calls: list[ToolCall]) -> list[Message]`
(one tool message per call, in order); `verify(trajectory) -> RewardResult` is optional.

Stops: a reply without tool calls is the final answer (`stopped="answer"`); `max_turns` assistant turns or
`max_calls` tool calls without an answer is `stopped="step_limit"` (calls beyond the budget are not run);
`max_format_errors` consecutive malformed replies is `stopped="format_error"`. Malformed calls are never run; the
model sees the error as a tool message and may retry.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

from schemas.messages import Message, ToolCall
from schemas.task import TaskRow
from schemas.tool_prompt import format_tool_result
from schemas.trajectory import Trajectory
from rewards.environments.toolcalls import parse_reply

Policy = Callable[[list[dict[str, Any]]], str]


class Environment(Protocol):
    def reset(self, task: TaskRow) -> list[Message]: ...

    def step(self, calls: list[ToolCall]) -> list[Message]: ...


class ToolLoop:
    """One episode, advanced one assistant reply at a time (see the module docstring)."""

    def __init__(self, task: TaskRow, env: Environment, *, max_turns: int = 8, max_calls: int = 32,
                 max_format_errors: int = 3):
        if max_turns < 1 or max_calls < 1:
            raise ValueError("max_turns and max_calls must be at least 1")
        self.task = task
        self.env = env
        self.max_turns = max_turns
        self.max_calls = max_calls
        self.max_format_errors = max_format_errors
        self.messages: list[Message] = list(env.reset(task))
        self.turns = 0
        self.calls = 0
        self.format_errors = 0
        self._consecutive_errors = 0
        self.final_answer: str | None = None
        self.stopped: str | None = None

    @property
    def done(self) -> bool:
        return self.stopped is not None

    def prompt(self) -> list[dict[str, Any]]:
        """The conversation so far as chat dicts (role + content) for the policy's chat template."""
        return [{"role": m.role, "content": m.content} for m in self.messages]

    def step(self, text: str) -> list[Message]:
        """Feed one assistant reply; returns the messages added (assistant turn first, then tool results)."""
        if self.done:
            raise RuntimeError(f"episode already finished ({self.stopped})")
        self.turns += 1
        parsed = parse_reply(text)
        for i, c in enumerate(parsed.calls):
            c.id = f"call_{self.turns}_{i}"
        assistant = Message(role="assistant", content=text, tool_calls=parsed.calls or None)
        added = [assistant]
        if parsed.is_final:
            self.final_answer = parsed.final_answer
            self.stopped = "answer"
            self.messages.extend(added)
            return added
        budget = self.max_calls - self.calls
        to_run = parsed.calls[:max(budget, 0)]
        if to_run:
            added.extend(self.env.step(to_run))
            self.calls += len(to_run)
        if parsed.errors:
            self.format_errors += len(parsed.errors)
            self._consecutive_errors += 1
            added.append(Message(role="tool", name="format_error",
                                 content=format_tool_result(error="format error: " + "; ".join(parsed.errors))))
        else:
            self._consecutive_errors = 0
        self.messages.extend(added)
        if len(parsed.calls) > len(to_run):  # the call budget ran out mid-reply
            self.stopped = "step_limit"
        elif self._consecutive_errors >= self.max_format_errors:
            self.stopped = "format_error"
        elif self.turns >= self.max_turns:
            self.stopped = "step_limit"
        return added

    def trajectory(self) -> Trajectory:
        return Trajectory(
            task_id=self.task.id, messages=list(self.messages), final_answer=self.final_answer, turns=self.turns,
            stopped=self.stopped or "length",
            metadata={"calls": self.calls, "format_errors": self.format_errors},
        )


def run_episode(task: TaskRow, env: Environment, policy: Policy, *, max_turns: int = 8, max_calls: int = 32,
                max_format_errors: int = 3, verify: bool = True) -> Trajectory:
    """Roll out one episode with `policy`; attaches `env.verify(trajectory)` as `trajectory.reward` when available."""
    loop = ToolLoop(task, env, max_turns=max_turns, max_calls=max_calls, max_format_errors=max_format_errors)
    while not loop.done:
        loop.step(policy(loop.prompt()))
    traj = loop.trajectory()
    if verify and hasattr(env, "verify"):
        traj.reward = env.verify(traj)
    return traj
