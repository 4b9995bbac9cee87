"""The audit's one seam to the reward: score a batch of (completion or trajectory, row) pairs.

Why a seam: every probe, baseline and inspection step goes through `AuditScorer.score`, so the audit attacks the
reward exactly as training would call it (the rewards package's loading, argument binding, normalisation and
error handling) and batches all probe inputs into a few calls (fast even when the reward runs in a sandbox).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from schemas.rewards import RewardResult

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
    episode: Any = None  # a live environment for tool probes (`audit_episode` on the reward), if it has one
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


def declared_weights(fn: Any) -> dict[str, float] | None:
    """Component weights a shaped reward declares (`weights` attribute, also on `spec`/`composition`), if any."""
    for holder in (fn, getattr(fn, "fn", None), getattr(fn, "spec", None), getattr(fn, "composition", None)):
        w = getattr(holder, "weights", None) if holder is not None else None
        if isinstance(w, dict) and w and all(isinstance(v, (int, float)) for v in w.values()):
            return {str(k): float(v) for k, v in w.items()}
    return None


def scorer_from_callable(fn: Any, name: str | None = None, sandbox: Any = "auto") -> AuditScorer:
    """An AuditScorer for a reward callable, `Reward` or spec string, scored through `rewards.score_batch`.

    `sandbox` is passed on: "auto" runs user code in the rewards sandbox and the studio's own verifiers
    in-process (as training does); False runs everything in-process.
    """
    from rewards.audit.binding import as_reward, batch_scorer

    reward = as_reward(fn)
    kind = "trajectory" if reward.kind == "trajectory" else "text"
    return AuditScorer(name=name or reward.version_id, batch=batch_scorer(reward, sandbox), kind=kind,
                       weights=declared_weights(reward),
                       episode=getattr(reward.fn, "audit_episode", None) or getattr(fn, "audit_episode", None))

