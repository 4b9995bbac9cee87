"""data.focus: which training tasks a run draws from, chosen by where the starting policy fails.

The choice is pure (`choose_focus`: probe verdicts in, a `FocusChoice` out); the trainer runs the probe (greedy
pass@1 on the eval split, `training.train_eval.greedy_pass_at_1`) and keeps the choice in `focus.json` next to its
checkpoints, so a resumed or restarted run trains on the same tasks without probing again. See
`schemas.train_config.FocusSection` for why.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from schemas.task import TaskRow
from schemas.train_config import FocusSection
from training.branch import FirstMistake, call_signature, first_mistake

FOCUS_FILE = "focus.json"


class GroupProbe(BaseModel):
    """One group's probe result: tasks probed and how many the starting policy passed greedily; with
    `mistake_from_turn` or `mistake_kind`, also how many right replies each failed probe episode made before its
    first mistake, and what that mistake got wrong."""

    tasks: int
    passed: int
    mistake_turns: list[int] = Field(default_factory=list)  # per failed probe task, in probe order (training.branch)
    mistake_kinds: list[str] = Field(default_factory=list)  # the same tasks' FirstMistake.kind: tool|arguments|answer

    @property
    def pass_rate(self) -> float:
        return self.passed / self.tasks if self.tasks else 0.0


class FocusChoice(BaseModel):
    """What `data.focus` chose, as written to `focus.json` (read back on resume)."""

    by: str
    max_pass_rate: float
    start: str  # the policy probed (the run's starting model)
    probe_data: str = ""  # the eval split probed ("path:split"), so a changed dataset is probed again
    probe_per_group: int | None = None
    mistake_from_turn: int = 0
    mistake_kind: str = "any"
    probe_tasks: int
    probe_passed: int
    groups: dict[str, GroupProbe]
    trained_groups: list[str]  # probed at or below max_pass_rate
    unprobed_groups: list[str] = Field(default_factory=list)  # in the training tasks, absent from the probe: kept
    training_tasks: int  # training tasks drawn from (after guidance's filter, if any)
    training_tasks_before: int
    probe_s: float | None = None  # seconds the probe took

    def matches(self, focus: FocusSection, start: str, probe_data: str = "") -> bool:
        """Whether this choice answers `focus` for a run starting from `start` and probing `probe_data` (else the
        probe runs again, or a resumed run is refused)."""
        return (self.by, self.max_pass_rate, self.probe_per_group, self.mistake_from_turn, self.mistake_kind,
                self.start, self.probe_data) == (focus.by, focus.max_pass_rate, focus.probe_per_group,
                                                 focus.mistake_from_turn, focus.mistake_kind, start, probe_data)


def describe(choice: FocusChoice) -> str:
    """One line for the CLI: what the run trained on, and why."""
    rates = ", ".join(f"{g} {choice.groups[g].passed}/{choice.groups[g].tasks}" for g in choice.trained_groups)
    extra = f"; never probed: {', '.join(choice.unprobed_groups)}" if choice.unprobed_groups else ""
    where = (f", whose failed probe episodes all made their first {choice.mistake_from_turn} replies right"
             if choice.mistake_from_turn else "")
    if choice.mistake_kind != "any":
        where += (f"{' and' if where else ', whose'} failed probe episodes all first went wrong in a call's "
                  f"{choice.mistake_kind}")
    return (f"data.focus: {choice.training_tasks} of {choice.training_tasks_before} training tasks, the {choice.by} "
            f"groups the starting policy passed at most {choice.max_pass_rate:g} of{where} ({rates}{extra}); probe "
            f"{choice.probe_passed}/{choice.probe_tasks} eval tasks")


def group_of(task: TaskRow, by: str) -> str:
    """The task's group under `by` (a metadata key); tasks without it form the group '(none)'."""
    value = task.metadata.get(by)
    return "(none)" if value is None else str(value)


def probe_sample(tasks: Sequence[TaskRow], by: str, per_group: int | None) -> list[TaskRow]:
    """The probe: at most `per_group` tasks of each group (the first ones, in file order), or all of them."""
    if per_group is None:
        return list(tasks)
    seen: dict[str, int] = {}
    out = []
    for t in tasks:
        g = group_of(t, by)
        if seen.get(g, 0) < per_group:
            seen[g] = seen.get(g, 0) + 1
            out.append(t)
    return out


def episode_mistake(task: TaskRow, episode: dict[str, Any]) -> FirstMistake:
    """Where and how a failed probe episode (`greedy_pass_at_1(..., keep_episodes=True)`'s) first left `task`'s
    ground_truth_calls (`training.branch.first_mistake`). A task without ground_truth_calls cannot be placed: the
    error names it rather than guessing."""
    if not task.ground_truth_calls:
        raise ValueError(f"data.focus.mistake_from_turn: probe task {task.id} has no ground_truth_calls to place "
                         "its first mistake against: give the eval split's tasks ground_truth_calls, or set "
                         "data.focus.mistake_from_turn to 0")
    truth = [call_signature(c.name, c.arguments) for c in task.ground_truth_calls]
    return first_mistake([[tuple(sig) for sig in turn] for turn in episode["calls"]], truth)


def probe_mistakes(probe: Sequence[TaskRow], episodes: Sequence[dict[str, Any]]) -> dict[str, FirstMistake]:
    """Failed probe task id -> its episode's first mistake (`episode_mistake`): how many of its first replies were
    right, and what the next one got wrong."""
    by_id = {t.id: t for t in probe}
    return {e["task_id"]: episode_mistake(by_id[e["task_id"]], e) for e in episodes if not e["passed"]}


def probe_groups(probe: Sequence[TaskRow], passed_ids: Iterable[str], by: str,
                 mistakes: dict[str, FirstMistake] | None = None) -> dict[str, GroupProbe]:
    """Per-group pass counts of a greedy probe (and, given `mistakes` from `probe_mistakes`, the turn and kind of
    each failed task's first mistake), groups in first-seen order."""
    ok = set(passed_ids)
    groups: dict[str, GroupProbe] = {}
    for t in probe:
        p = groups.setdefault(group_of(t, by), GroupProbe(tasks=0, passed=0))
        p.tasks += 1
        p.passed += t.id in ok
        if mistakes and t.id in mistakes:
            p.mistake_turns.append(mistakes[t.id].turn)
            p.mistake_kinds.append(mistakes[t.id].kind)
    return groups


def choose_focus(train: Sequence[TaskRow], groups: dict[str, GroupProbe], focus: FocusSection,
                 start: str, probe_data: str = "") -> FocusChoice:
    """The groups to train on: probed at or below `max_pass_rate` (with `mistake_from_turn`, only those whose failed
    probe episodes all made that many right replies first; with `mistake_kind`, only those whose failed probe
    episodes all first went wrong that way), or never probed. When no group is left, the error says so rather than
    training on nothing."""
    weak = [g for g, p in groups.items() if p.pass_rate <= focus.max_pass_rate
            and (not focus.mistake_from_turn or min(p.mistake_turns, default=-1) >= focus.mistake_from_turn)
            and (focus.mistake_kind == "any" or (p.mistake_kinds and set(p.mistake_kinds) == {focus.mistake_kind}))]
    train_groups = list(dict.fromkeys(group_of(t, focus.by) for t in train))
    unprobed = [g for g in train_groups if g not in groups]
    kept = _in_groups(train, focus.by, set(weak) | set(unprobed))
    if not kept:
        where = (f" or fails some probe task within its first {focus.mistake_from_turn} replies"
                 if focus.mistake_from_turn else "")
        if focus.mistake_kind != "any":
            where += f" or fails some probe task other than in a call's {focus.mistake_kind}"
        raise ValueError(
            f"data.focus: the starting policy passes more than {focus.max_pass_rate:g} of the probe tasks{where} in "
            f"every {focus.by!r} group that the training tasks have ({len(groups)} groups probed), so no training "
            "task is left: raise data.focus.max_pass_rate"
            f"{', lower data.focus.mistake_from_turn' if focus.mistake_from_turn else ''}"
            f"{', set data.focus.mistake_kind: any' if focus.mistake_kind != 'any' else ''}, or unset data.focus")
    return FocusChoice(by=focus.by, max_pass_rate=focus.max_pass_rate, start=start,
                       probe_per_group=focus.probe_per_group, mistake_from_turn=focus.mistake_from_turn,
                       mistake_kind=focus.mistake_kind,
                       probe_data=probe_data,
                       probe_tasks=sum(p.tasks for p in groups.values()),
                       probe_passed=sum(p.passed for p in groups.values()), groups=groups,
                       trained_groups=[g for g in weak if g in train_groups], unprobed_groups=unprobed,
                       training_tasks=len(kept), training_tasks_before=len(train))


def focused_tasks(train: Sequence[TaskRow], choice: FocusChoice) -> list[TaskRow]:
    """The training tasks `choice` keeps, in their original order (the data stream's shuffle is over this list)."""
    return _in_groups(train, choice.by, set(choice.trained_groups) | set(choice.unprobed_groups))


def _in_groups(tasks: Sequence[TaskRow], by: str, groups: set[str]) -> list[TaskRow]:
    return [t for t in tasks if group_of(t, by) in groups]


def write_focus(folder: Path, choice: FocusChoice) -> Path:
    """`focus.json` in `folder`, replaced atomically (as the checkpoints' best.json is), so a kill never leaves half
    of one."""
    from generators.task_io import atomic_write_bytes

    return atomic_write_bytes(folder / FOCUS_FILE, (choice.model_dump_json(indent=1) + "\n").encode())


def read_focus(folder: Path) -> FocusChoice | None:
    path = folder / FOCUS_FILE
    if not path.exists():
        return None
    return FocusChoice.model_validate(json.loads(path.read_text()))
