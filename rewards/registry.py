"""Rewards registered by name (the studio's built-in verifiers and anything a user registers), plus a persistent
log of every version a name has had.

Why a log on disk: a checkpoint manifest or a scored record names `reward@hash`; the log maps that hash back to
the label, the configuration and the source that produced it, long after the file was edited.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any, Callable

from rewards.reward import Reward
from rewards.versioning import code_payload
from schemas.rewards import RewardVersion

_REGISTRY: dict[str, Reward] = {}
_BUILTINS_LOADED = False


def _ensure_builtins() -> None:
    global _BUILTINS_LOADED
    if not _BUILTINS_LOADED:
        _BUILTINS_LOADED = True
        from rewards.builtins import register_builtins

        register_builtins()


def register_reward(name: str, fn: Callable[..., Any] | None = None, *, label: str = "", config: Any = None,
                    replace: bool = False) -> Any:
    """Register `fn` under `name` (also usable as a decorator: `@register_reward("my_reward")`).

    Registering a different reward under a taken name raises unless `replace=True`; registering the same
    content again is a no-op.
    """
    def _do(f: Callable[..., Any]) -> Reward:
        reward = Reward(f, name=name, label=label, config=config)
        old = _REGISTRY.get(name)
        if old is not None and not replace and old.version.content_hash != reward.version.content_hash:
            raise ValueError(f"reward name {name!r} is already registered ({old.version}); pass replace=True")
        _REGISTRY[name] = reward
        return reward

    if fn is None:
        def decorator(f: Callable[..., Any]) -> Callable[..., Any]:
            _do(f)
            return f
        return decorator
    return _do(fn)


def get_reward(name: str) -> Reward:
    """The reward registered under `name`; RewardSpecError listing the known names otherwise."""
    _ensure_builtins()
    try:
        return _REGISTRY[name]
    except KeyError:
        from rewards.loading import RewardSpecError

        raise RewardSpecError(
            f"no reward registered as {name!r}; registered: {', '.join(sorted(_REGISTRY)) or 'none'} "
            f"(or give 'path/to/file.py:function' / 'module:function')"
        ) from None


def list_rewards() -> list[Reward]:
    _ensure_builtins()
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def default_log_path() -> Path:
    home = Path(os.environ.get("RLVR_HOME", Path.home() / ".cache" / "rlvr-studio")).expanduser()
    return home / "rewards" / "versions.sqlite"


class VersionLog:
    """An append-only SQLite table of (name, content_hash) -> label, ref, config, source, first/last seen."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else default_log_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as con:
            con.execute(
                "CREATE TABLE IF NOT EXISTS reward_versions (name TEXT, content_hash TEXT, label TEXT, ref TEXT, "
                "config TEXT, source TEXT, first_seen REAL, last_seen REAL, PRIMARY KEY (name, content_hash))"
            )

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=30)

    def record(self, reward: Reward) -> RewardVersion:
        """Remember this reward's version (idempotent; updates `last_seen` and a newer label)."""
        now = time.time()
        config = json.dumps(getattr(reward.config, "model_dump", lambda: reward.config)(), default=repr) \
            if reward.config is not None else None
        with self._connect() as con:
            con.execute(
                "INSERT INTO reward_versions VALUES (?,?,?,?,?,?,?,?) ON CONFLICT(name, content_hash) DO UPDATE "
                "SET last_seen=excluded.last_seen, label=CASE WHEN excluded.label != '' THEN excluded.label "
                "ELSE reward_versions.label END",
                (reward.name, reward.version.content_hash, reward.label, reward.ref, config,
                 code_payload(reward.fn), now, now),
            )
        return reward.version

    def versions(self, name: str | None = None) -> list[dict[str, Any]]:
        q = "SELECT name, content_hash, label, ref, first_seen, last_seen FROM reward_versions"
        args: tuple[Any, ...] = ()
        if name:
            q += " WHERE name = ?"
            args = (name,)
        with self._connect() as con:
            rows = con.execute(q + " ORDER BY first_seen", args).fetchall()
        keys = ("name", "content_hash", "label", "ref", "first_seen", "last_seen")
        return [dict(zip(keys, r)) for r in rows]

    def source(self, name: str, content_hash_prefix: str) -> str | None:
        with self._connect() as con:
            row = con.execute("SELECT source FROM reward_versions WHERE name = ? AND content_hash LIKE ?",
                              (name, content_hash_prefix + "%")).fetchone()
        return row[0] if row else None
