"""The best checkpoint of a run by its held-out pass rate (`checkpoint.keep_best`), as TRL users know it from
`load_best_model_at_end` with `metric_for_best_model`.

Why: RL updates can make a policy worse on held-out tasks while its training reward looks fine (learn_workplace's
GRPO stages mostly did), and the last checkpoint is then not the one to ship. With `keep_best` the trainer measures
the starting policy before the first update (the bar every checkpoint must clear), saves a checkpoint at every
evaluation so the measured weights exist, never prunes the best one, and names it in `checkpoints/best.json`. When no
checkpoint beats the start, the best is the starting policy itself (`checkpoint: null`), so a run never hands back
something worse on the evaluation tasks than what it began with.

A later evaluation replaces the best only when strictly higher: on a tie the earlier policy, with fewer updates away
from the start, is kept. The record travels in every checkpoint's trainer state (written atomically with it), so a
resumed run continues with the same best; `best.json` is a copy for people and tools.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, Field

BEST_FILE = "best.json"
METRIC = "eval_pass_at_1"


class BestCheckpoint(BaseModel):
    """Where the run's best policy is and how it was measured."""

    metric: str = METRIC
    step: int = Field(ge=0)
    value: float
    checkpoint: str | None  # folder name under checkpoints/, None when the starting policy is still the best
    path: str  # the best policy's folder (the starting model's when checkpoint is None)
    start_step: int = Field(ge=0)
    start_value: float
    eval_tasks: int = Field(ge=1)
    history: list[tuple[int, float]] = Field(default_factory=list)  # (step, value) of every evaluation


def start_best(step: int, value: float, path: str, eval_tasks: int, checkpoint: str | None = None) -> BestCheckpoint:
    """The record before any checkpoint competes: the policy training starts from (step 0, or the step resumed)."""
    return BestCheckpoint(step=step, value=value, checkpoint=checkpoint, path=path, start_step=step,
                          start_value=value, eval_tasks=eval_tasks, history=[(step, value)])


def after_evaluation(best: BestCheckpoint, step: int, value: float, checkpoint: str, path: str) -> BestCheckpoint:
    """The record once the checkpoint of `step` measured `value`: it becomes the best only when strictly higher."""
    history = [*best.history, (step, value)]
    if value > best.value:
        return best.model_copy(update={"step": step, "value": value, "checkpoint": checkpoint, "path": path,
                                       "history": history})
    return best.model_copy(update={"history": history})


def write_best(root: Path, best: BestCheckpoint) -> Path:
    """`best.json` in the checkpoints folder, replaced atomically."""
    from generators.task_io import atomic_write_bytes

    root.mkdir(parents=True, exist_ok=True)
    out = root / BEST_FILE
    atomic_write_bytes(out, (json.dumps(best.model_dump(mode="json"), indent=1) + "\n").encode())
    return out


def read_best(root: Path) -> BestCheckpoint | None:
    p = root / BEST_FILE
    return BestCheckpoint.model_validate_json(p.read_text()) if p.is_file() else None
