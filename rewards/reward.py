"""`Reward`: a reward callable with its name, human label, configuration, kind and content-hash version.

Why a wrapper and not bare functions: every scored record must carry the version of the reward that scored it, and
the sandbox needs to know how to re-create the callable in a worker process (by its `file.py:function` or
`module:function` reference, else by pickling it). Calling a `Reward` never raises for reward code: it returns an
error result (see `rewards.protocol`).
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from rewards.protocol import Binding, RewardKind, call_reward, reward_kind
from rewards.versioning import content_hash
from schemas.rewards import RewardResult, RewardVersion


class Reward:
    """A named, versioned reward.

    `fn` is the user's callable (a function or a configured verifier object); `ref` is the spec it was loaded from
    (`/abs/path.py:function` or `module:function`), used by sandbox workers to load it the same way; `trusted`
    marks the studio's own verifiers, which `score_batch(sandbox="auto")` runs in-process.
    """

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None, label: str = "", config: Any = None,
                 kind: RewardKind | None = None, ref: str | None = None, trusted: bool | None = None) -> None:
        if isinstance(fn, Reward):
            ref = ref or fn.ref
            trusted = fn.trusted if trusted is None else trusted
            kind = kind or fn.kind
            label = label or fn.label
            config = config if config is not None else fn.config
            name = name or fn.name
            fn = fn.fn
        if not callable(fn):
            raise TypeError(f"a reward must be callable, got {type(fn).__name__}")
        self.fn = fn
        self.name = name or getattr(fn, "name", None) or getattr(fn, "__name__", None) or type(fn).__name__
        self.label = label
        self.config = config
        self.kind: RewardKind = kind or reward_kind(fn)
        self.ref = ref
        self.trusted = bool(getattr(fn, "trusted", False)) if trusted is None else trusted
        self.binding = Binding.of(fn)
        self.version = RewardVersion(name=self.name, label=label, content_hash=content_hash(fn, config))
        try:  # so inspect.signature(reward) shows the user's signature (the audit reads the first parameter)
            self.__signature__ = inspect.signature(fn)
        except (TypeError, ValueError):
            pass

    @property
    def version_id(self) -> str:
        """`name@hash12`, the string stored in every RewardResult this reward produces."""
        return f"{self.name}@{self.version.content_hash[:12]}"

    @property
    def weights(self) -> dict[str, float] | None:
        """The effective component weights of a shaped reward (None for a plain reward)."""
        w = getattr(self.fn, "weights", None)
        return dict(w) if isinstance(w, dict) else None

    def __call__(self, item: Any, **fields: Any) -> RewardResult:
        """Score one completion (or trajectory) in this process; reward errors come back as error results."""
        return call_reward(self.fn, self.binding, self.kind, item, fields, version=self.version_id)

    def __repr__(self) -> str:
        return f"Reward({self.version}, kind={self.kind}{', ref=' + self.ref if self.ref else ''})"


def as_reward(obj: Any) -> Reward:
    """A `Reward` from a Reward, a registered name or spec string (see `rewards.loading.load_reward`), or a callable."""
    if isinstance(obj, Reward):
        return obj
    if isinstance(obj, str):
        from rewards.loading import load_reward

        return load_reward(obj)
    return Reward(obj)
