"""Evaluation of tool-using tasks: the model plays whole episodes in the workplace environment through the shared
tool loop, and the environment's verifier judges each final state (reason codes become failure reasons).

Why through `rewards.environments.loop.run_episode` and not a local loop: the trainer, evaluation and triage must
parse tool calls and stop episodes identically, or an evaluation would measure a different agent than the one
trained. The world is the seed company the tasks were generated over (`generators.workplace.world`), built once
per (seed, today) and forked per episode by the environment.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from schemas.evaluation import SampleResult
from schemas.task import TaskRow

WorldResolver = Callable[[TaskRow], Any]


@lru_cache(maxsize=4)
def workplace_world(seed: int | None = None, today: str | None = None, source: str | None = None) -> Any:
    """The workplace world: from a NeMo Gym CSV folder (`source`), else generated from the world spec and `seed`."""
    from rewards.environments.workplace import WorkplaceWorld

    if source:
        return WorkplaceWorld.from_nemo_gym(Path(source))
    from generators.workplace.world import CONTEXT, TODAY, generate_world_tables

    return WorkplaceWorld.from_tables(generate_world_tables(seed), today=today or TODAY, context=CONTEXT)


def dataset_world(data_path: str | Path) -> Any | None:
    """The world stored beside a workplace dataset (`DIR/world/*.parquet`, as `rlvr env tasks` writes it), or None."""
    folder = Path(data_path)
    folder = folder if folder.is_dir() else folder.parent
    if not any((folder / "world").glob("*.parquet")):
        return None
    from training.multiturn import load_workplace_world

    return load_workplace_world(folder)


def default_world_resolver(seed: int | None = None, source: str | None = None,
                           data_path: str | Path | None = None) -> WorldResolver:
    """Resolve each task's world: the one stored beside the dataset when there is one (exactly what the tasks were
    generated over), else generated from `metadata.world_seed` / `metadata.world_today` or `seed`."""
    stored = dataset_world(data_path) if data_path is not None and source is None and seed is None else None
    if stored is not None:
        return lambda task: stored

    def resolve(task: TaskRow) -> Any:
        md = task.metadata or {}
        s = md.get("world_seed", seed)
        return workplace_world(None if s is None else int(s), md.get("world_today"), source)

    return resolve


def sample_from_trajectory(traj: Any, keep_messages: bool = True) -> SampleResult:
    """A SampleResult from a verified trajectory: reason code on failure, the shaping components, turns, calls."""
    from training.evaluation import ERROR_REASON
    from training.signatures import reason_label

    res = traj.reward
    assistant = [m for m in traj.messages if m.role == "assistant"]
    completion = traj.final_answer if traj.final_answer is not None else (assistant[-1].content if assistant else "")
    calls = sum(len(m.tool_calls or []) for m in assistant)
    msgs = [m.to_openai() for m in traj.messages] if keep_messages else None
    if res is None:
        return SampleResult(completion=completion, passed=False, reason="unverified", turns=traj.turns,
                            tool_calls=calls, messages=msgs)
    if res.is_error:
        return SampleResult(completion=completion, passed=False, reason=ERROR_REASON, error=res.error,
                            turns=traj.turns, tool_calls=calls, messages=msgs)
    passed = bool(res.passed)
    reason = "" if passed else (reason_label(res.reason) if res.reason.strip() else "failed")
    return SampleResult(completion=completion, score=res.score, passed=passed, reason=reason,
                        components=dict(res.components), turns=traj.turns, tool_calls=calls, messages=msgs)


class EnvironmentRunner:
    """Multi-turn tool tasks: `n` episodes per task with the model as the policy, each judged by the verifier."""

    def __init__(self, model: Any, tokenizer: Any, *, temperature: float = 0.0, max_new_tokens: int = 128,
                 max_turns: int = 6, max_calls: int = 16, world_resolver: WorldResolver | None = None,
                 keep_messages: bool = True) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.temperature, self.max_new_tokens = temperature, max_new_tokens
        self.max_turns, self.max_calls = max_turns, max_calls
        self.world_resolver = world_resolver or default_world_resolver()
        self.keep_messages = keep_messages

    def __call__(self, task: TaskRow, n: int, seed: int) -> list[SampleResult]:
        from rewards.environments.loop import run_episode
        from rewards.environments.workplace import WorkplaceEnv
        from training.chat import generate_reply

        world = self.world_resolver(task)
        out = []
        for j in range(n):
            turn = [0]

            def policy(messages: list[dict[str, Any]], _j: int = j) -> str:
                turn[0] += 1
                return generate_reply(self.model, self.tokenizer, messages, max_new_tokens=self.max_new_tokens,
                                      temperature=self.temperature, seed=seed * 1000 + _j * 50 + turn[0])

            traj = run_episode(task, WorkplaceEnv(world), policy, max_turns=self.max_turns, max_calls=self.max_calls)
            out.append(sample_from_trajectory(traj, self.keep_messages))
        return out
