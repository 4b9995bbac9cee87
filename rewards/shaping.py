"""Binary-to-shaped composition with the dominance invariant enforced by construction.

A shaped reward = a binary verifier + weighted intermediate signals:

    score = (pass_score if passed else fail_score) + sum_i w_i * s_i

Each signal declares its range [low, high] (a component of the verifier's result, another reward's score, or
DAPO's soft overlong penalty in [-1, 0]). From the ranges the worst case is computed exactly:

    max_fail = fail_score + max over failing samples of sum_i w_i s_i
    min_pass = pass_score + min over passing samples of sum_i w_i s_i

Dominance holds when max_fail < min_pass: every passing sample scores strictly above every failing one, whatever
the signals say, so the signals can only order samples *within* the pass and fail groups. With `scale="auto"`
(default) all weights are multiplied by one factor k <= 1 chosen so that the gap is at least `margin` of
(pass_score - fail_score); the declared and effective weights are both kept. With `scale="none"` a composition
that breaks dominance is refused with an explanation (`ShapingError`) unless `allow_dominance_violation=True`.

At call time a signal value outside its declared range is an *error result* (the guarantee would be void), unless
the signal declares `clip=True` (for counts such as wrong changes: the value saturates at the bound, by design).
Per-component values are always kept in the result.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import sys
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rewards.protocol import KIND_ATTR, error_result, normalize_result
from rewards.reward import Reward
from schemas.rewards import RewardResult


class ShapingError(ValueError):
    """A shaped reward's composition breaks dominance (or is malformed); the message explains by how much."""


class OverlongPenalty(BaseModel):
    """DAPO's soft overlong punishment: 0 up to `max_length - cache_length`, then falling linearly to -1 at
    `max_length`, and -1 beyond. Length in `unit`: `tokens` uses the `completion_ids` row field (TRL passes it) or
    the embedded tokenizer; `chars` and `words` need nothing."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    max_length: int = Field(gt=0)
    cache_length: int = Field(gt=0)
    unit: Literal["tokens", "chars", "words"] = "tokens"
    trusted: bool = True

    @model_validator(mode="after")
    def _cache_fits(self) -> "OverlongPenalty":
        if self.cache_length > self.max_length:
            raise ValueError(f"cache_length {self.cache_length} exceeds max_length {self.max_length}")
        return self

    def length(self, completion: Any, completion_ids: Any = None) -> int:
        if self.unit == "tokens":
            if completion_ids is not None:
                return len(completion_ids)
            return len(_tokenizer()(str(completion), add_special_tokens=False)["input_ids"])
        text = str(completion)
        return len(text) if self.unit == "chars" else len(text.split())

    def __call__(self, completion: Any, completion_ids: Any = None, **_: Any) -> float:
        return overlong_penalty(self.length(completion, completion_ids), self.max_length, self.cache_length)


def overlong_penalty(length: int, max_length: int, cache_length: int) -> float:
    """DAPO eq. 13 as a pure function."""
    soft_start = max_length - cache_length
    if length <= soft_start:
        return 0.0
    if length <= max_length:
        return (soft_start - length) / cache_length
    return -1.0


_TOKENIZER: Any = None


def _tokenizer() -> Any:
    global _TOKENIZER
    if _TOKENIZER is None:  # resolved at call time: importing rewards never imports training
        import importlib

        _TOKENIZER = importlib.import_module("training.model").load_tokenizer("default")
    return _TOKENIZER


class Signal(BaseModel):
    """One weighted signal. Exactly one source: `component` (a component of the verifier's result) or `reward`
    (a callable scored like any reward; its score is the signal). `applies_to` limits it to failing or passing
    samples (partial credit only for failures is the common choice)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)
    name: str
    weight: float
    component: str | None = None
    reward: Any = None
    low: float = 0.0
    high: float = 1.0
    clip: bool = False
    applies_to: Literal["all", "fail", "pass"] = "all"

    @model_validator(mode="after")
    def _check(self) -> "Signal":
        if (self.component is None) == (self.reward is None):
            raise ValueError(f"signal {self.name!r}: give exactly one of component= or reward=")
        if not (math.isfinite(self.low) and math.isfinite(self.high) and self.low <= self.high):
            raise ValueError(f"signal {self.name!r}: range [{self.low}, {self.high}] is not a finite interval")
        if not math.isfinite(self.weight):
            raise ValueError(f"signal {self.name!r}: weight must be finite")
        if self.reward is not None and not isinstance(self.reward, Reward):
            self.reward = Reward(self.reward, name=self.name)
        return self

    def contribution_range(self, weight: float) -> tuple[float, float]:
        a, b = weight * self.low, weight * self.high
        return min(a, b), max(a, b)


def overlong_signal(max_length: int, cache_length: int, *, weight: float = 1.0, unit: str = "tokens",
                    name: str = "overlong") -> Signal:
    """DAPO's soft overlong penalty as a signal (range [-1, 0])."""
    return Signal(name=name, weight=weight, reward=OverlongPenalty(max_length=max_length, cache_length=cache_length,
                                                                   unit=unit), low=-1.0, high=0.0)


def component_signal(component: str, weight: float, *, low: float = 0.0, high: float = 1.0, clip: bool = False,
                     applies_to: str = "all", name: str | None = None) -> Signal:
    return Signal(name=name or component, weight=weight, component=component, low=low, high=high, clip=clip,
                  applies_to=applies_to)


class DominanceBounds(BaseModel):
    """The worst cases of a composition: `max_fail < min_pass` is the invariant."""

    max_fail: float
    min_pass: float
    scale: float

    @property
    def holds(self) -> bool:
        return self.max_fail < self.min_pass


def dominance_bounds(signals: list[Signal], weights: dict[str, float], pass_score: float, fail_score: float,
                     scale: float = 1.0) -> DominanceBounds:
    max_fail, min_pass = fail_score, pass_score
    for s in signals:
        lo, hi = s.contribution_range(weights[s.name] * scale)
        if s.applies_to in ("all", "fail"):
            max_fail += hi
        if s.applies_to in ("all", "pass"):
            min_pass += lo
    return DominanceBounds(max_fail=max_fail, min_pass=min_pass, scale=scale)


def _explain(name: str, signals: list[Signal], weights: dict[str, float], b: DominanceBounds, pass_score: float,
             fail_score: float, k_max: float | None) -> str:
    fail_terms = " + ".join(f"{s.name} {weights[s.name]:g}*{s.high if weights[s.name] >= 0 else s.low:g}"
                            for s in signals if s.applies_to in ("all", "fail"))
    pass_terms = " + ".join(f"{s.name} {weights[s.name]:g}*{s.low if weights[s.name] >= 0 else s.high:g}"
                            for s in signals if s.applies_to in ("all", "pass"))
    msg = (f"shaped reward {name!r} breaks dominance: a failing sample can score up to {b.max_fail:.4g} "
           f"(fail {fail_score:g}{' + ' + fail_terms if fail_terms else ''}) but a passing one as little as "
           f"{b.min_pass:.4g} (pass {pass_score:g}{' + ' + pass_terms if pass_terms else ''}), so a wrong answer could "
           f"outscore a right one. Lower the weights")
    if k_max is not None:
        msg += f" (all multiplied by less than {k_max:.4g} would do), use scale='auto'"
    return msg + ", or pass allow_dominance_violation=True to accept it knowingly."


class ShapedReward:
    """A versioned composition of a binary verifier and weighted signals (see the module docstring).

    `weights` are the effective weights (after auto-scaling); `declared_weights` what was asked for;
    `bounds` the worst-case pass/fail scores. Calling it returns a RewardResult with `passed` from the verifier,
    the shaped `score`, and every component kept.
    """

    def __init__(self, verifier: Any, signals: list[Signal] | tuple[Signal, ...] = (), *, name: str = "shaped",
                 pass_score: float = 1.0, fail_score: float = 0.0, pass_threshold: float = 1.0,
                 scale: Literal["auto", "none"] = "auto", margin: float = 0.1,
                 allow_dominance_violation: bool = False) -> None:
        if not pass_score > fail_score:
            raise ShapingError(f"pass_score ({pass_score}) must be above fail_score ({fail_score})")
        if not 0 < margin < 1:
            raise ShapingError(f"margin must be in (0, 1), got {margin}")
        names = [s.name for s in signals]
        if len(set(names)) != len(names):
            raise ShapingError(f"signal names must be unique, got {names}")
        self.verifier = verifier if isinstance(verifier, Reward) else Reward(verifier)
        self.signals = list(signals)
        self.name = name
        self.pass_score, self.fail_score, self.pass_threshold = pass_score, fail_score, pass_threshold
        self.scale_mode, self.margin = scale, margin
        self.allow_dominance_violation = allow_dominance_violation
        self.declared_weights = {s.name: s.weight for s in self.signals}
        setattr(self, KIND_ATTR, self.verifier.kind)
        self.trusted = self.verifier.trusted and all(s.reward is None or s.reward.trusted for s in self.signals)

        raw = dominance_bounds(self.signals, self.declared_weights, pass_score, fail_score)
        gap = pass_score - fail_score
        # max_fail(k) - min_pass(k) = (fail - pass) + k * spread, spread = raw.max_fail - fail - (raw.min_pass - pass)
        spread = (raw.max_fail - fail_score) - (raw.min_pass - pass_score)
        k_max = gap / spread if spread > 0 else None
        k = 1.0
        if not raw.holds:
            if scale == "auto":
                k = k_max * (1 - margin)  # type: ignore[operator]
            elif not allow_dominance_violation:
                raise ShapingError(_explain(name, self.signals, self.declared_weights, raw, pass_score, fail_score,
                                            k_max))
        elif scale == "auto" and k_max is not None and raw.min_pass - raw.max_fail < margin * gap:
            k = k_max * (1 - margin)  # holds, but by less than the margin: widen the gap
        self.weights = {n: w * k for n, w in self.declared_weights.items()}
        self.bounds = dominance_bounds(self.signals, self.declared_weights, pass_score, fail_score, scale=k)

    # ---- versioning: the verifier's version, the signals and the numbers
    def __rlvr_version_payload__(self) -> str:
        module_src = inspect.getsource(sys.modules[__name__])
        sigs = []
        for s in self.signals:
            d = s.model_dump(exclude={"reward"})
            d["reward"] = s.reward.version.content_hash if s.reward is not None else None
            sigs.append(d)
        return json.dumps({
            "shaping_module": hashlib.sha256(module_src.encode()).hexdigest(),
            "verifier": self.verifier.version.content_hash, "signals": sigs, "pass": self.pass_score,
            "fail": self.fail_score, "threshold": self.pass_threshold, "scale": self.scale_mode,
            "margin": self.margin, "allow": self.allow_dominance_violation, "weights": self.weights,
        }, sort_keys=True)

    def describe(self) -> dict[str, Any]:
        """What the composition is: for reports, the studio page and the CLI."""
        return {"name": self.name, "verifier": str(self.verifier.version), "pass_score": self.pass_score,
                "fail_score": self.fail_score, "declared_weights": self.declared_weights, "weights": self.weights,
                "scale": self.bounds.scale, "max_fail": self.bounds.max_fail, "min_pass": self.bounds.min_pass,
                "dominance": self.bounds.holds,
                "signals": [{"name": s.name, "source": s.component or s.reward.name, "range": [s.low, s.high],
                             "applies_to": s.applies_to, "clip": s.clip} for s in self.signals]}

    def __call__(self, item: Any, **fields: Any) -> RewardResult:
        base = self.verifier(item, **fields)
        if base.is_error:
            return base.model_copy(update={"reason": f"verifier {self.verifier.name}: {base.reason}",
                                           "reward_version": None})
        passed = base.passed if base.passed is not None else (base.score or 0.0) >= self.pass_threshold
        comps = dict(base.components)
        comps["passed"] = float(passed)
        total = self.pass_score if passed else self.fail_score
        for s in self.signals:
            if s.component is not None:
                if s.component not in base.components:
                    return error_result(f"signal {s.name!r}: the verifier's result has no component {s.component!r} "
                                        f"(it has {sorted(base.components)})")
                value = base.components[s.component]
            else:
                sub = s.reward(item, **fields)
                if sub.is_error:
                    return sub.model_copy(update={"reason": f"signal {s.name!r}: {sub.reason}", "reward_version": None})
                value = float(sub.score)  # type: ignore[arg-type]
            if not (s.low <= value <= s.high):
                if not s.clip:
                    return error_result(f"signal {s.name!r} = {value:g} is outside its declared range "
                                        f"[{s.low:g}, {s.high:g}]; dominance cannot be guaranteed (declare the true "
                                        f"range or clip=True)")
                value = min(max(value, s.low), s.high)
            comps[s.name] = value
            if s.applies_to == "all" or (s.applies_to == "pass") == passed:
                total += self.weights[s.name] * value
        return normalize_result(RewardResult(score=total, passed=passed, components=comps, reason=base.reason))


def check_dominance(results: list[RewardResult]) -> DominanceBounds | None:
    """Empirical check over scored samples: the observed max failing and min passing scores (None when one group
    is empty). `holds` is False when some failing sample scored at or above some passing one."""
    fails = [r.score for r in results if r.passed is False and r.score is not None]
    passes = [r.score for r in results if r.passed is True and r.score is not None]
    if not fails or not passes:
        return None
    return DominanceBounds(max_fail=max(fails), min_pass=min(passes), scale=1.0)


def shape(verifier: Any, *signals: Signal, **kw: Any) -> ShapedReward:
    """`ShapedReward(verifier, signals, **kw)` written inline."""
    return ShapedReward(verifier, list(signals), **kw)

