"""The workplace environment's final-state verifier as a trajectory-aware reward.

The environment's `verify_trajectory(task, trajectory, world)` replays the calls the model wrote on the task's
initial world and compares the resulting rows with what the ground-truth calls produce, so the "final state" is
recomputed from the trajectory rather than trusted from a loop's record (the `final_state` argument of the
protocol is accepted and ignored for that reason). The world comes from `world` (one world for every task) or
`world_resolver(task)` (per task), else the studio's generated world for `metadata.world_seed` (resolved through
`training.eval_environment` at call time, so importing `rewards` never imports `training`). World objects are
runtime state, kept out of the config hash.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar

from pydantic import PrivateAttr

from rewards.protocol import KIND_ATTR
from rewards.verifiers.base import Verifier
from schemas.rewards import RewardResult
from schemas.task import TaskRow
from schemas.trajectory import Trajectory

WORLD_FIELD = "world"


def task_from_fields(fields: dict[str, Any]) -> TaskRow:
    """The TaskRow behind a row's fields (extra columns are folded into metadata, as the dataset reader does)."""
    known = set(TaskRow.model_fields)
    data = {k: v for k, v in fields.items() if k in known}
    meta = dict(data.get("metadata") or {})
    data["metadata"] = meta
    if isinstance(data.get("prompt"), str):
        data["prompt"] = [{"role": "user", "content": data["prompt"]}]
    return TaskRow.model_validate(data)


class WorkplaceState(Verifier):
    """Binary workplace verdict with the environment's reason code and shaping components (`required_changes`,
    `wrong_changes`, `failed_writes`, `valid_call_rate`, `call_efficiency`, ...)."""

    name: ClassVar[str] = "workplace_state"
    max_calls: int = 64
    _world: Any = PrivateAttr(default=None)
    _resolver: Callable[[TaskRow], Any] | None = PrivateAttr(default=None)

    def __init__(self, world: Any = None, world_resolver: Callable[[TaskRow], Any] | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        self._world = world
        self._resolver = world_resolver

    def __call__(self, trajectory: Trajectory, final_state: Any = None, **fields: Any) -> RewardResult:
        return self.verify(trajectory, fields)

    def verify(self, trajectory: Any, fields: dict[str, Any]) -> RewardResult:
        from rewards.environments.workplace import verify_trajectory

        if isinstance(trajectory, dict):
            trajectory = Trajectory.model_validate(trajectory)
        if not isinstance(trajectory, Trajectory):
            raise TypeError(f"workplace_state needs a Trajectory, got {type(trajectory).__name__}")
        task = task_from_fields(fields)
        world = fields.get(WORLD_FIELD) or self._world
        if world is None and self._resolver is not None:
            world = self._resolver(task)
        if world is None:  # the studio's generated world (metadata.world_seed), resolved at call time
            import importlib

            resolver = importlib.import_module("training.eval_environment").default_world_resolver()
            self._resolver = resolver
            world = resolver(task)
        if world is None:
            raise ValueError("workplace_state has no world: construct it with world= or world_resolver=, or pass a "
                             "'world' row field")
        res = verify_trajectory(task, trajectory, world, max_calls=self.max_calls)
        return res


setattr(WorkplaceState, KIND_ATTR, "trajectory")
