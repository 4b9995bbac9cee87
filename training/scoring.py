"""Scoring completions with the configured reward during training, with errors reported as errors.

Why here and not a bare call: the trainer must never turn a crashing reward into a silent 0 (that is a bug in the
reward, not a failing sample). When the `rewards` package provides its protocol (`rewards.protocol.load_reward`,
`score_batch`), that is used -- sandbox, timeouts and versioning included; until then, and for any plain callable,
a local loader runs `fn(completion, **row)` and wraps each failure as an error `RewardResult`. The trainer counts
error results, excludes them from advantages (their group is treated like a zero-variance group) and stops the run
when more than half of a batch errors, naming the reward and the first error.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from schemas.rewards import RewardResult
from schemas.task import TaskRow

RewardFn = Callable[..., Any]
PASS_THRESHOLD = 1.0  # a float reward passes when it reaches this (binary rewards return 1.0 / 0.0)


class RewardLoadError(ValueError):
    """The reward reference could not be loaded; the message names the file or module and the function."""


@dataclass
class LoadedReward:
    fn: RewardFn
    ref: str
    version: str

    def score_batch(self, completions: list[str], rows: list[dict[str, Any]]) -> list[RewardResult]:
        return [score_one(self.fn, c, r, self.version) for c, r in zip(completions, rows)]


def load_reward_ref(ref: str, base: Path | None = None) -> LoadedReward:
    """`path/to/file.py:name` or `package.module:name` -> the callable, with a content-hash version."""
    if ":" not in ref:
        raise RewardLoadError(f"reward {ref!r}: expected 'file.py:function' or 'module:function'")
    target, name = ref.rsplit(":", 1)
    if target.endswith(".py"):
        path = Path(target)
        if not path.is_absolute() and base is not None and not path.exists():
            path = base / path
        if not path.is_file():
            raise RewardLoadError(f"reward file not found: {path}")
        mod_name = f"_rlvr_reward_{hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:10]}"
        spec = importlib.util.spec_from_file_location(mod_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = module
        try:
            spec.loader.exec_module(module)  # type: ignore[union-attr]
        except Exception as exc:  # noqa: BLE001 - a crash in user code is reported as such
            raise RewardLoadError(f"reward file {path} raised while loading: {exc!r}") from exc
        source = path.read_bytes()
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as exc:
            raise RewardLoadError(f"reward module {target!r} cannot be imported: {exc}") from exc
        try:
            source = inspect.getsource(module).encode()
        except (OSError, TypeError):
            source = target.encode()
    fn = getattr(module, name, None)
    if fn is None or not callable(fn):
        raise RewardLoadError(f"reward {ref!r}: {target} has no callable named {name!r}")
    version = f"{name}@{hashlib.sha256(source).hexdigest()[:12]}"
    return LoadedReward(fn=fn, ref=ref, version=version)


def load_reward(ref: str, base: Path | None = None, kwargs: dict[str, Any] | None = None) -> LoadedReward:
    """Prefer the rewards package's loader (sandbox, versions) when it exists; fall back to the local loader."""
    loaded = None
    try:
        from rewards import protocol  # type: ignore[attr-defined]  # noqa: PLC0415 - optional until it lands

        if hasattr(protocol, "load_reward"):
            loaded = _from_protocol(protocol, ref, base)
    except ImportError:
        loaded = None
    if loaded is None:
        loaded = load_reward_ref(ref, base)
    if kwargs:
        fn = loaded.fn
        loaded = LoadedReward(fn=lambda c, **row: fn(c, **{**row, **kwargs}), ref=loaded.ref, version=loaded.version)
    return loaded


def _from_protocol(protocol: Any, ref: str, base: Path | None) -> LoadedReward | None:
    target, name = ref.rsplit(":", 1) if ":" in ref else (ref, "")
    if target.endswith(".py") and base is not None and not Path(target).exists() and (base / target).exists():
        ref = f"{base / target}:{name}"
    try:
        obj = protocol.load_reward(ref)
    except Exception as exc:  # noqa: BLE001
        raise RewardLoadError(f"reward {ref!r}: {exc}") from exc
    fn = getattr(obj, "fn", None) or getattr(obj, "func", None) or (obj if callable(obj) else None)
    version = str(getattr(obj, "version", "") or getattr(obj, "reward_version", "") or "")
    if fn is None:
        return None
    if not version:
        version = load_reward_ref(ref, base).version
    loaded = LoadedReward(fn=fn, ref=ref, version=version)
    batch = getattr(protocol, "score_batch", None)
    if batch is not None:
        def score_batch(completions: list[str], rows: list[dict[str, Any]], _obj=obj) -> list[RewardResult]:
            try:
                return list(batch(_obj, completions, rows))
            except TypeError:
                return [score_one(fn, c, r, version) for c, r in zip(completions, rows)]

        loaded.score_batch = score_batch  # type: ignore[method-assign]
    return loaded


def score_one(fn: RewardFn, completion: str, row: dict[str, Any], version: str | None = None) -> RewardResult:
    """Call the reward; a raise, a non-number or a NaN is an error result (score None), never a 0."""
    try:
        value = fn(completion, **row)
    except Exception as exc:  # noqa: BLE001 - the point is to report any failure of user code
        tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return RewardResult(score=None, error=f"reward raised {tb}", reward_version=version)
    if isinstance(value, RewardResult):
        return value if value.reward_version else value.model_copy(update={"reward_version": version})
    if isinstance(value, bool):
        return RewardResult(score=float(value), passed=value, reward_version=version)
    if isinstance(value, (int, float)):
        try:
            return RewardResult(score=float(value), passed=float(value) >= PASS_THRESHOLD, reward_version=version)
        except ValueError:
            return RewardResult(score=None, error=f"reward returned a non-finite number {value!r}", reward_version=version)
    return RewardResult(score=None, error=f"reward returned {type(value).__name__}, expected float or RewardResult",
                        reward_version=version)


def passed(result: RewardResult) -> bool:
    if result.passed is not None:
        return bool(result.passed)
    return result.score is not None and result.score >= PASS_THRESHOLD


def row_fields(task: TaskRow) -> dict[str, Any]:
    """The keyword arguments a reward receives for a task: its reference fields and its metadata, flattened (a
    plain dataset's extra columns land in metadata when read, and rewards name them directly)."""
    d: dict[str, Any] = dict(task.metadata)
    d.update({
        "id": task.id,
        "answer": task.answer,
        "prompt": [m.model_dump(exclude_none=True) for m in task.prompt],
        "tools": [t.model_dump() for t in task.tools] if task.tools else None,
        "ground_truth_calls": [c.model_dump() for c in task.ground_truth_calls] if task.ground_truth_calls else None,
    })
    return d
