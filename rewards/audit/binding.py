"""How the audit calls a reward: through the rewards package's `Reward` wrapper and `score_batch`, nothing else.

Why here: the audit must call a reward exactly as training does (same argument binding, same coercion of floats
into RewardResult, same error results for crashes and NaN, same sandbox for user code), or it would certify a
different reward from the one being optimised. This module is the only place the audit touches that API.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from schemas.rewards import RewardResult


def as_reward(fn: Any):
    """The rewards package's `Reward` for a callable, a `Reward` or a spec string (`file.py:fn`, `module:fn`)."""
    from rewards.reward import as_reward as _as_reward

    return _as_reward(fn)


def batch_scorer(reward: Any, sandbox: Any = "auto") -> Callable[[Sequence[Any], Sequence[dict]], list[RewardResult]]:
    """A function scoring a batch of (item, row) pairs with `reward` via `rewards.scoring.score_batch`."""
    from rewards.scoring import score_batch

    def run(items: Sequence[Any], rows: Sequence[dict]) -> list[RewardResult]:
        return score_batch(reward, list(items), list(rows), sandbox=sandbox)

    return run
