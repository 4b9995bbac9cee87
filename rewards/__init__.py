"""Rewards: the protocol, built-in verifiers, shaping, versioning, sandboxed execution, adapters.

The API other packages call (the audit, the trainer, the CLI):

    from rewards import Reward, load_reward, score_batch, score_one, trajectory_reward

    reward = load_reward("examples/rewards/math.py:math_binary")   # or "pkg.module:fn", or a registered name
    results = score_batch(reward, completions, rows)                # -> list[RewardResult], one per completion
    results = score_batch(reward, completions, rows, sandbox=True)  # force the sandbox (default "auto")

- A reward is any callable `fn(completion, **row_fields)` returning float | bool | RewardResult | dict
  (`rewards.protocol.normalize_result` coerces it). It receives only the row fields its signature names, or all of
  them with `**kwargs`. Trajectory-aware rewards are `fn(trajectory, final_state=..., **row_fields)` (first
  parameter named `trajectory`, or `@trajectory_reward`); pass `final_states=` to `score_batch`.
- Failures are error results, never 0: an exception, a timeout, a crash of the worker, NaN/inf, a wrong return type
  or a missing row field gives `RewardResult(score=None, error=<traceback or reason>, reason=<one line>)`.
- `Reward(fn, name=, label=, config=)` carries `version` (a `RewardVersion`: name, label, SHA-256 of the module's
  source + config) and stamps `reward_version = "name@hash12"` on every result. `rewards.registry`:
  `register_reward`, `get_reward`, `list_rewards`, and `VersionLog` (SQLite history of versions).
- `score_batch(reward, completions, rows, *, final_states=None, sandbox="auto", progress=None)`: rows are TaskRow
  or dicts; "auto" runs the studio's own verifiers in-process and user code in the default `Sandbox`
  (`rewards.sandbox`: persistent workers, per-call time limit, RLIMIT_AS memory cap, no network).
- Verifiers (`rewards.verifiers`), shaping with enforced dominance (`rewards.shaping.ShapedReward`), and adapters
  (`rewards.adapters.trl_reward_func`, `nemo_gym_verify_response`) are described in their modules.

Attributes are imported lazily so that `rewards.environments`, `rewards.audit` and sandbox workers stay light.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Reward": "rewards.reward",
    "as_reward": "rewards.reward",
    "RewardKind": "rewards.protocol",
    "call_reward": "rewards.protocol",
    "error_result": "rewards.protocol",
    "normalize_result": "rewards.protocol",
    "reward_kind": "rewards.protocol",
    "trajectory_reward": "rewards.protocol",
    "RewardSpecError": "rewards.loading",
    "load_reward": "rewards.loading",
    "register_reward": "rewards.registry",
    "get_reward": "rewards.registry",
    "list_rewards": "rewards.registry",
    "VersionLog": "rewards.registry",
    "score_batch": "rewards.scoring",
    "score_one": "rewards.scoring",
    "row_fields": "rewards.scoring",
    "Sandbox": "rewards.sandbox",
    "SandboxLimits": "rewards.sandbox",
    "SandboxError": "rewards.sandbox",
    "default_sandbox": "rewards.sandbox",
    "ShapedReward": "rewards.shaping",
    "ShapingError": "rewards.shaping",
    "Signal": "rewards.shaping",
    "component_signal": "rewards.shaping",
    "overlong_signal": "rewards.shaping",
    "check_dominance": "rewards.shaping",
    "trl_reward_func": "rewards.adapters",
    "nemo_gym_verify_response": "rewards.adapters",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rewards' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
