"""Demonstration-guided groups (`guidance.demonstrations`, see `schemas.train_config.GuidanceSection`): the
demonstrations file read into each task's assistant replies. With an environment, the collector replays them turn
by turn through the real tool loop (`training.multiturn.EnvironmentCollector`), so a demonstration is tokenised,
masked and scored exactly like a sampled episode of the same task. Without one (single-turn tasks), the task's one
reply becomes one more member of its group (`append_demonstrations`): the group's prompt tokens, the reply's tokens
and the end token, scored by the run's reward like the sampled completions.

Why replies and not the stored tool results: the environment answers the replayed calls itself, so a demonstration
whose calls no longer fit the world (a stale file, another seed) fails the verifier and gets no positive
advantage, instead of teaching a transcript the environment would not produce. In the single-turn case the same
holds through the reward: a demonstration with a wrong answer scores as a fail.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from schemas.task import TaskRow
    from training.samples import Sample


class GuidanceError(ValueError):
    """The demonstrations file cannot guide training; the message names the file and row."""


def demonstration_replies(path: str | Path) -> dict[str, list[str]]:
    """task id -> the assistant replies of its demonstration, in order (the first line of a task id wins)."""
    from generators.task_io import DatasetError, read_records

    try:
        rows = read_records(path)
    except DatasetError as exc:
        raise GuidanceError(f"guidance.demonstrations: {exc}") from exc
    out: dict[str, list[str]] = {}
    for i, row in enumerate(rows):
        task_id = row.get("task_id")
        if not isinstance(task_id, str) or not task_id:
            raise GuidanceError(f"{path}: row {i}: expected `task_id` (the task the demonstration solves)")
        msgs: Any = row.get("messages")
        if isinstance(msgs, str):  # Parquet stores nested messages as a JSON string
            try:
                msgs = json.loads(msgs)
            except json.JSONDecodeError as exc:
                raise GuidanceError(f"{path}: row {i} (task {task_id}): `messages` is not JSON ({exc})") from exc
        if not isinstance(msgs, list):
            raise GuidanceError(f"{path}: row {i} (task {task_id}): expected `messages`, a list of chat messages")
        replies = [str(m.get("content") or "") for m in msgs if isinstance(m, dict) and m.get("role") == "assistant"]
        if not replies:
            raise GuidanceError(f"{path}: row {i} (task {task_id}): no assistant message to replay")
        out.setdefault(task_id, replies)
    return out


def append_demonstrations(samples: list[Sample], tasks: list[TaskRow], replies: dict[str, list[str]], tok: Any,
                          max_new_tokens: int) -> list[Sample]:
    """Each group's sampled members followed by its task's demonstration as one more member: the group's prompt
    tokens, the reply's tokens and the end token, all trained on, with generation log-probs 0 (nothing sampled them;
    `Sample.extras["demonstration"]` tells the loss), cut at `max_new_tokens` like a sample (then truncated).

    Single-turn only: a demonstration with several assistant replies is refused, since there is no environment to
    answer between them."""
    by_group: dict[int, list[Sample]] = {}
    for s in samples:
        by_group.setdefault(s.group, []).append(s)
    out: list[Sample] = []
    for gi, task in enumerate(tasks):
        members = by_group.get(gi, [])
        if not members:
            raise GuidanceError(f"task {task.id}: no sampled member to take the prompt tokens from")
        for m in members:  # as the environment collector marks them
            m.extras.setdefault("demonstration", False)
        out += members + [demonstration_sample(gi, task, list(members[0].prompt_ids), replies, tok, max_new_tokens)]
    return out


def demonstration_sample(group: int, task: TaskRow, prompt_ids: list[int], replies: dict[str, list[str]], tok: Any,
                         max_new_tokens: int) -> Sample:
    """A single-turn task's demonstration as a sample of `group`: the prompt's tokens, the one reply's tokens and
    the end token, all trained on, generation log-probs 0, cut at `max_new_tokens` (then truncated); unscored."""
    from training.samples import Sample

    if task.id not in replies:
        raise GuidanceError(f"guidance.demonstrations: no demonstration for task {task.id}")
    if len(replies[task.id]) != 1:
        raise GuidanceError(f"guidance.demonstrations: task {task.id} has {len(replies[task.id])} assistant "
                            "replies; a single-turn task (no rollout.environment) takes exactly one")
    eos = tok.eos_token_id
    text = replies[task.id][0]
    ids = list(tok(text, add_special_tokens=False)["input_ids"]) + ([eos] if eos is not None else [])
    cut = len(ids) > max_new_tokens
    if cut:  # the reward scores what is trained on: the cut reply
        ids = ids[:max_new_tokens]
        text = tok.decode(ids, skip_special_tokens=True)
    return Sample(group=group, task_id=task.id, prompt_ids=prompt_ids, completion_ids=ids, loss_mask=[1] * len(ids),
                  logprobs=[0.0] * len(ids), truncated=cut, text=text, extras={"demonstration": True})
