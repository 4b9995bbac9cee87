"""The audit's one seam to the reward: score a batch of (completion or trajectory, row) pairs.

Why a seam: every probe, baseline and inspection step goes through `AuditScorer.score`, so the audit attacks the
reward exactly as training would call it (the rewards package's loading, argument binding, normalisation and
error handling) and batches all probe inputs into a few calls (fast even when the reward runs in a sandbox).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from schemas.rewards import RewardResult
from schemas.trajectory import Trajectory

Item = Any  # a completion string, or a Trajectory for trajectory-aware rewards
BatchFn = Callable[[Sequence[Item], Sequence[dict[str, Any]]], list[RewardResult]]


@dataclass
class AuditScorer:
    """A reward as the audit sees it.

    `batch` scores completions (or trajectories) against rows and returns one RewardResult each, with `error` set
    for a crash or a non-finite score (never a silent 0). `kind` says which input the reward takes. `weights`
    are the declared component weights of a shaped reward, when known (used by the composition probes).
    """

    name: str
    batch: BatchFn
    kind: str = "text"  # "text" | "trajectory"
    weights: dict[str, float] | None = None
    calls: int = field(default=0)

    def score(self, items: Sequence[Item], rows: Sequence[dict[str, Any]]) -> list[RewardResult]:
        if len(items) != len(rows):
            raise ValueError(f"score: {len(items)} items but {len(rows)} rows")
        if not items:
            return []
        self.calls += len(items)
        results = self.batch(items, rows)
        if len(results) != len(items):
            raise RuntimeError(f"reward {self.name} returned {len(results)} results for {len(items)} inputs")
        return results


def takes_trajectory(fn: Callable[..., Any]) -> bool:
    """A reward is trajectory-aware when its first parameter is named `trajectory` (the rewards protocol's form)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    return bool(params) and params[0].name == "trajectory"


def declared_weights(fn: Any) -> dict[str, float] | None:
    """Component weights a shaped reward declares (`weights` attribute or `spec.weights`), if any."""
    for holder in (fn, getattr(fn, "spec", None), getattr(fn, "composition", None)):
        w = getattr(holder, "weights", None) if holder is not None else None
        if isinstance(w, dict) and all(isinstance(v, (int, float)) for v in w.values()):
            return {str(k): float(v) for k, v in w.items()}
    return None


def scorer_from_callable(fn: Callable[..., Any], name: str | None = None, kind: str | None = None) -> AuditScorer:
    """Wrap a reward callable through the rewards package's own batch scoring (its normalisation and errors)."""
    from rewards.audit.binding import batch_scorer

    kind = kind or ("trajectory" if takes_trajectory(fn) else "text")
    label = name or getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    return AuditScorer(name=label, batch=batch_scorer(fn, kind), kind=kind, weights=declared_weights(fn))


def is_trajectory(item: Item) -> bool:
    return isinstance(item, Trajectory)
