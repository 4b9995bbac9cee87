"""How the audit calls a reward callable: through the rewards package's `score_batch` when it is available.

Why here: the audit must call a reward exactly as training does (same argument binding, same coercion of floats
into RewardResult, same error results for crashes and NaN). This module is the only place that knows how.
"""

from __future__ import annotations

import inspect
import math
import traceback
from typing import Any, Callable, Sequence

from schemas.rewards import RewardResult


def _fallback_call(fn: Callable[..., Any], first: Any, row: dict[str, Any], first_name: str) -> RewardResult:
    """One call with the protocol's semantics: floats become results; raises and NaN become error results."""
    try:
        params = inspect.signature(fn).parameters
        takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        names = [n for n in params if n != first_name]
        kwargs = dict(row) if takes_all else {k: v for k, v in row.items() if k in names}
        kwargs.pop(first_name, None)
        out = fn(first, **kwargs)
    except Exception as exc:  # noqa: BLE001 - a crash in user code is an error result, never a silent 0
        return RewardResult(score=None, error=f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}")
    if isinstance(out, RewardResult):
        bad = [k for k, v in out.components.items() if not math.isfinite(v)]
        if bad:
            return out.model_copy(update={"error": f"non-finite component(s) {bad}"})
        return out
    if isinstance(out, dict) and "score" in out:
        try:
            return RewardResult.model_validate(out)
        except Exception as exc:  # noqa: BLE001
            return RewardResult(score=None, error=f"invalid result {out!r:.120}: {exc}")
    if isinstance(out, bool) or isinstance(out, (int, float)):
        value = float(out)
        if not math.isfinite(value):
            return RewardResult(score=None, error=f"non-finite score {value}")
        return RewardResult(score=value)
    if out is None:
        return RewardResult(score=None, error="reward returned None")
    return RewardResult(score=None, error=f"reward returned {type(out).__name__}, expected float or RewardResult")


def batch_scorer(fn: Callable[..., Any], kind: str) -> Callable[[Sequence[Any], Sequence[dict]], list[RewardResult]]:
    """A function scoring a batch of (item, row) pairs with `fn`."""
    first_name = "trajectory" if kind == "trajectory" else "completion"
    try:
        params = list(inspect.signature(fn).parameters)
        if params:
            first_name = params[0]
    except (TypeError, ValueError):
        pass

    def run(items: Sequence[Any], rows: Sequence[dict]) -> list[RewardResult]:
        return [_fallback_call(fn, item, row, first_name) for item, row in zip(items, rows)]

    return run
