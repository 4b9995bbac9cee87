"""Demonstration-guided groups (`guidance.demonstrations`, see `schemas.train_config.GuidanceSection`): the
demonstrations file read into each task's assistant replies, which the environment collector replays turn by turn
through the real tool loop (`training.multiturn.EnvironmentCollector`), so a demonstration is tokenised, masked
and scored exactly like a sampled episode of the same task.

Why replies and not the stored tool results: the environment answers the replayed calls itself, so a demonstration
whose calls no longer fit the world (a stale file, another seed) fails the verifier and gets no positive
advantage, instead of teaching a transcript the environment would not produce.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


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
