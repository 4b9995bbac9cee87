"""benchmarks/batch_noise.py: the same policy's episodes in two batchings, compared task by task."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from batch_noise import flips  # noqa: E402
from schemas.task import TaskRow  # noqa: E402


def _task(i: int, template: str) -> TaskRow:
    return TaskRow(id=f"t{i}", split="test", prompt=[{"role": "user", "content": "x"}], metadata={"template": template})


def test_flips_count_verdicts_and_changed_episodes_against_the_reference():
    tasks = [_task(i, tpl) for i, tpl in enumerate(["a", "a", "b", "c"])]
    first = {"t0": {"passed": True, "text": "x"}, "t1": {"passed": False, "text": "y"},
             "t2": {"passed": True, "text": "z"}, "t3": {"passed": True, "text": "w"}}
    other = {"t0": {"passed": True, "text": "x2"}, "t1": {"passed": True, "text": "y2"},
             "t2": {"passed": False, "text": "z2"}, "t3": {"passed": True, "text": "w"}}
    f = flips(tasks, first, other)
    assert (f["passed"], f["lost"], f["gained"], f["verdict_flips"], f["episodes_changed"]) == (3, ["t2"], ["t1"], 2, 3)
    assert f["lost_templates"] == ["b"] and f["gained_templates"] == ["a"]
