"""The workplace environment: `reset(task) -> messages`, `step(calls) -> tool messages`, `state()`, `verify()`.

Each episode gets its own copy of the world (`WorkplaceWorld.fork`), so episodes never see each other's writes and
the base world stays the initial state the verifier replays against.
"""

from __future__ import annotations

import itertools
from typing import Any

from schemas.messages import Message, ToolCall
from schemas.rewards import RewardResult
from schemas.task import TaskRow, ToolSpec
from schemas.tool_prompt import format_tool_result
from schemas.trajectory import Trajectory
from schemas.workplace import tool_specs
from rewards.environments.toolcalls import system_prompt
from rewards.environments.workplace.tools import ToolResult, execute
from rewards.environments.workplace.verifier import verify_trajectory
from rewards.environments.workplace.world import WorkplaceWorld


def task_context(task: TaskRow, world: WorkplaceWorld) -> str:
    """The date/rules context: the task's own system message when it has one (NeMo Gym tasks do), else the world's."""
    own = [m.content for m in task.prompt if m.role == "system" and m.content.strip()]
    if own:
        return "\n".join(own)
    return f"Today is {world.today}. {world.context}".strip()


def initial_messages(task: TaskRow, world: WorkplaceWorld, tools: list[ToolSpec] | None = None,
                     style: str = "compact") -> list[Message]:
    """System prompt (context + tool instructions + tools) followed by the task's non-system messages."""
    specs = tools if tools is not None else (task.tools or tool_specs())
    sys = Message(role="system", content=system_prompt(specs, context=task_context(task, world), style=style))
    return [sys] + [m for m in task.prompt if m.role != "system"]


class WorkplaceEnv:
    """Tools + state + verifier for one episode at a time (create one per concurrent episode)."""

    name = "workplace"

    def __init__(self, world: WorkplaceWorld, *, prompt_style: str = "compact"):
        self.base = world
        self._snapshot = world.snapshot()  # one copy, deserialised per episode (cheaper than fork())
        self.prompt_style = prompt_style
        self.world: WorkplaceWorld | None = None
        self.task: TaskRow | None = None
        self.results: list[ToolResult] = []
        self._ids = itertools.count()

    def reset(self, task: TaskRow) -> list[Message]:
        self.world = WorkplaceWorld.from_snapshot(self._snapshot, today=self.base.today, context=self.base.context,
                                                  name=self.base.name)
        self.task = task
        self.results = []
        return initial_messages(task, self.base, style=self.prompt_style)

    def step(self, calls: list[ToolCall]) -> list[Message]:
        if self.world is None:
            raise RuntimeError("call reset(task) before step()")
        out = []
        for call in calls:
            res = execute(self.world, call)
            self.results.append(res)
            call_id = call.id or f"call_{next(self._ids)}"
            out.append(Message(role="tool", name=call.name, tool_call_id=call_id,
                               content=format_tool_result(res.output, res.error)))
        return out

    def state(self) -> dict[str, Any]:
        """What the episode changed so far: written rows, failed calls."""
        return {
            "calls": len(self.results),
            "failed_calls": sum(1 for r in self.results if not r.ok),
            "written": [f"{t}:{k}" for r in self.results for t, k in r.writes],
        }

    def verify(self, trajectory: Trajectory) -> RewardResult:
        if self.task is None:
            raise RuntimeError("call reset(task) before verify()")
        return verify_trajectory(self.task, trajectory, self.base)
