"""The reward protocol: how a reward callable is called and how whatever it returns becomes a RewardResult.

A reward is any callable `fn(completion, **row_fields)` returning a float, a bool, a `RewardResult` or a dict with
the same keys. A trajectory-aware reward takes `fn(trajectory, final_state=..., **row_fields)` instead (its first
parameter is named `trajectory`, or it is decorated with `@trajectory_reward`).

Why one module: the trainer, the audit, the CLI and the sandbox workers must all bind row fields and coerce return
values identically, or the audit would attack a different reward than the one training optimises. Every failure
(an exception, a NaN/inf, a wrong return type, a missing row field) becomes an *error result*: `score=None`,
`error` holding the traceback or the reason. Nothing is ever silently scored 0.
"""

from __future__ import annotations

import inspect
import math
import numbers
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Literal

from schemas.rewards import RewardResult
from schemas.trajectory import Trajectory

RewardKind = Literal["completion", "trajectory"]
KIND_ATTR = "__rlvr_kind__"


def trajectory_reward(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark `fn(trajectory, final_state=..., **row_fields)` as trajectory-aware (naming the first parameter
    `trajectory` does the same)."""
    setattr(fn, KIND_ATTR, "trajectory")
    return fn


def reward_kind(fn: Any) -> RewardKind:
    """'trajectory' when marked so or when the first parameter is named `trajectory`, else 'completion'."""
    explicit = getattr(fn, KIND_ATTR, None)
    if explicit in ("completion", "trajectory"):
        return explicit
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return "completion"
    return "trajectory" if params and params[0].name == "trajectory" else "completion"


@dataclass(frozen=True)
class Binding:
    """Which row fields a reward accepts, read once from its signature.

    Why filter: datasets carry many columns (id, prompt, tools, metadata...) and TRL passes all of them; a reward
    written as `def r(completion, answer)` should get only `answer`, the way TRL users write them with `**kwargs`.
    """

    accepts_all: bool
    names: frozenset[str]
    required: frozenset[str]

    @classmethod
    def of(cls, fn: Any) -> "Binding":
        try:
            params = list(inspect.signature(fn).parameters.values())
        except (TypeError, ValueError):
            return cls(True, frozenset(), frozenset())
        rest = params[1:]  # the first parameter receives the completion (or the trajectory)
        accepts_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in rest)
        names = frozenset(p.name for p in rest if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        required = frozenset(
            p.name for p in rest
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is inspect.Parameter.empty
        )
        return cls(accepts_all, names, required)

    def select(self, fields: dict[str, Any]) -> dict[str, Any]:
        if self.accepts_all:
            return fields
        return {k: v for k, v in fields.items() if k in self.names}

    def missing(self, fields: dict[str, Any]) -> list[str]:
        return sorted(n for n in self.required if n not in fields)


def error_result(reason: str, detail: str | None = None, *, version: str | None = None) -> RewardResult:
    """An error result: no score, the reason in one line, the traceback (or the reason again) in `error`."""
    return RewardResult(score=None, passed=None, reason=reason, error=detail or reason, reward_version=version)


def exception_result(exc: BaseException, *, skip_frames: int = 0, version: str | None = None) -> RewardResult:
    """The error result for an exception raised by reward code, with its traceback (our own frames trimmed)."""
    tb = exc.__traceback__
    for _ in range(skip_frames):
        if tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
    detail = "".join(traceback.format_exception(type(exc), exc, tb)).rstrip()
    first = f"{type(exc).__name__}: {exc}".strip().splitlines()[0] if str(exc) else type(exc).__name__
    return error_result(f"reward raised {first}", detail, version=version)


def _as_number(value: Any) -> float | None:
    """A plain float from Python/numpy/torch scalars; None when `value` is not a real number."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if getattr(value, "shape", None) == () and hasattr(value, "item"):  # numpy / torch 0-d scalars
        item = value.item()
        if isinstance(item, (bool, int, float)):
            return float(item)
    return None


def _clean_components(raw: Any) -> tuple[dict[str, float] | None, str | None]:
    if raw is None:
        return {}, None
    if not isinstance(raw, dict):
        return None, f"components must be a dict of name -> number, got {type(raw).__name__}"
    out: dict[str, float] = {}
    for key, val in raw.items():
        num = _as_number(val)
        if num is None:
            return None, f"component {key!r} is {type(val).__name__} {val!r:.60}, expected a number"
        if not math.isfinite(num):
            return None, f"component {key!r} is {num} (not finite)"
        out[str(key)] = num
    return out, None


def normalize_result(value: Any, *, version: str | None = None) -> RewardResult:
    """Coerce a reward's return value into a RewardResult (see the module docstring for the accepted forms).

    A bool is a binary verdict (score 1.0/0.0, `passed` set); a number is a score with `passed` unknown (None);
    a dict may use the RewardResult keys or NeMo Gym's `reward` / `reward_components`.
    """
    if isinstance(value, RewardResult):
        comps, problem = _clean_components(value.components)
        if problem:
            return error_result(f"reward returned a RewardResult whose {problem}", version=version)
        if value.score is not None and not math.isfinite(value.score):  # possible via model_construct
            return error_result(f"reward returned a non-finite score {value.score}", version=version)
        if value.score is None and value.error is None:
            return error_result("reward returned a RewardResult with score None and no error", version=version)
        return value.model_copy(update={"components": comps, "reward_version": value.reward_version or version})
    if isinstance(value, bool) or (type(value).__module__ == "numpy" and type(value).__name__ in ("bool_", "bool")):
        return RewardResult(score=float(bool(value)), passed=bool(value), reward_version=version)
    num = _as_number(value)
    if num is not None:
        if not math.isfinite(num):
            return error_result(f"reward returned a non-finite score ({num})", version=version)
        return RewardResult(score=num, reward_version=version)
    if isinstance(value, dict):
        data = dict(value)
        if "score" not in data and "reward" in data:  # NeMo Gym's verify response
            data["score"] = data.pop("reward")
            if "reward_components" in data:
                data["components"] = data.pop("reward_components")
        unknown = set(data) - {"score", "passed", "components", "reason", "error", "reward_version"}
        if "score" not in data:
            return error_result(f"reward returned a dict without 'score' (keys: {sorted(value)})", version=version)
        if unknown:
            return error_result(f"reward returned a dict with unknown keys {sorted(unknown)}", version=version)
        score = data["score"]
        num = None if score is None else _as_number(score)
        if score is not None and num is None:
            return error_result(f"reward returned score {score!r:.60} ({type(score).__name__}), expected a number",
                                version=version)
        if num is not None and not math.isfinite(num):
            return error_result(f"reward returned a non-finite score ({num})", version=version)
        comps, problem = _clean_components(data.get("components"))
        if problem:
            return error_result(f"reward returned a dict whose {problem}", version=version)
        passed = data.get("passed")
        if passed is not None and not isinstance(passed, bool):
            return error_result(f"reward returned passed={passed!r:.40}, expected true/false/null", version=version)
        if num is None and not data.get("error"):
            return error_result("reward returned score None without an error", version=version)
        return RewardResult(score=num, passed=passed, components=comps, reason=str(data.get("reason") or ""),
                            error=data.get("error"), reward_version=data.get("reward_version") or version)
    if value is None:
        return error_result("reward returned None, expected a float, a bool, a RewardResult or a dict",
                            version=version)
    return error_result(
        f"reward returned {type(value).__name__} {value!r:.60}, expected a float, a bool, a RewardResult or a dict",
        version=version,
    )


def completion_text(item: Any) -> Any:
    """What a completion reward receives for an item: a Trajectory's final answer (else its last assistant
    message), the content of the last assistant message of a chat-format completion list, or the item as is."""
    if isinstance(item, Trajectory):
        if item.final_answer is not None:
            return item.final_answer
        for m in reversed(item.messages):
            if m.role == "assistant":
                return m.content
        return ""
    if isinstance(item, list) and item and all(isinstance(m, dict) and "role" in m for m in item):
        for m in reversed(item):
            if m.get("role") == "assistant":
                return m.get("content") or ""
    return item


def call_reward(fn: Callable[..., Any], binding: Binding, kind: RewardKind, item: Any, fields: dict[str, Any],
                *, version: str | None = None) -> RewardResult:
    """Call one reward on one item with the row's fields and return a RewardResult, never raising for reward code.

    `fields` for a trajectory reward include `final_state` when the caller knows it.
    """
    missing = binding.missing(fields)
    if missing:
        return error_result(
            f"reward needs row field(s) {missing} that this row lacks (row has {sorted(fields)[:12]})",
            version=version,
        )
    first = item if kind == "trajectory" else completion_text(item)
    try:
        value = fn(first, **binding.select(fields))
    except Exception as exc:  # noqa: BLE001 - any crash in reward code is an error result, never a silent 0
        return exception_result(exc, skip_frames=1, version=version)
    except SystemExit as exc:
        return error_result(f"reward called sys.exit({exc.code!r})", version=version)
    return normalize_result(value, version=version)


def __getattr__(name: str) -> Any:
    """`rewards.protocol.load_reward` / `score_batch`: the protocol's entry points, re-exported lazily (they live in
    `rewards.loading` and `rewards.scoring`, which import this module) for callers that look for them here."""
    if name == "load_reward":
        from rewards.loading import load_reward

        return load_reward
    if name == "score_batch":
        from rewards.scoring import score_batch

        return score_batch
    raise AttributeError(f"module 'rewards.protocol' has no attribute {name!r}")
