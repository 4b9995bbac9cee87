"""`score_batch`: the one function the trainer, the audit and the CLI call to score many samples with a reward.

Why one entry point: batching, sandboxing, row-field preparation and version stamping must be the same for
training and for the audit, or the audit would certify a reward different from the one being optimised.
"""

from __future__ import annotations

from typing import Any, Callable, Literal, Sequence

from rewards.reward import Reward, as_reward
from schemas.rewards import RewardResult
from schemas.task import TaskRow

SandboxArg = Literal["auto"] | bool | Any  # "auto" | True | False | a rewards.sandbox.Sandbox


def row_fields(row: TaskRow | dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments a reward receives for a dataset row.

    A TaskRow becomes its JSON-shaped fields (prompt and calls as dicts, as TRL and stored datasets give them)
    with `metadata` kept as a dict *and* its keys flattened in where they do not clash, so `def r(completion,
    difficulty)` works on a dataset whose extra columns were folded into metadata.
    """
    if isinstance(row, TaskRow):
        fields = row.model_dump(mode="json")
    elif isinstance(row, dict):
        fields = dict(row)
    else:
        raise TypeError(f"a row must be a TaskRow or a dict, got {type(row).__name__}")
    meta = fields.get("metadata")
    if isinstance(meta, dict):
        for k, v in meta.items():
            fields.setdefault(k, v)
    return fields


def _use_sandbox(reward: Reward, sandbox: SandboxArg) -> Any:
    """The Sandbox to use, or None for in-process."""
    from rewards.sandbox import Sandbox, default_sandbox

    if isinstance(sandbox, Sandbox):
        return sandbox
    if sandbox is True:
        return default_sandbox()
    if sandbox is False or sandbox is None:
        return None
    if sandbox == "auto":
        return None if reward.trusted else default_sandbox()
    raise ValueError(f"sandbox must be 'auto', True, False or a Sandbox, got {sandbox!r}")


def score_batch(reward: Reward | Callable[..., Any] | str, completions: Sequence[Any],
                rows: Sequence[TaskRow | dict[str, Any]], *, final_states: Sequence[Any] | None = None,
                sandbox: SandboxArg = "auto", progress: Callable[[int], None] | None = None) -> list[RewardResult]:
    """Score `completions[i]` against `rows[i]` with `reward`; one RewardResult each, in order.

    - `reward`: a Reward, any callable following the protocol, a `file.py:fn` / `module:fn` spec or a registered
      name.
    - `completions`: strings (or chat-format message lists) for a completion reward; `Trajectory` objects for a
      trajectory-aware reward (a completion reward given a Trajectory receives its final answer).
    - `final_states`: for trajectory rewards, the environment's final state per sample (passed as `final_state`).
    - `sandbox`: "auto" (user code in the default sandbox, the studio's own verifiers in-process), True (default
      sandbox), False (in-process, no time/memory limit), or a `rewards.sandbox.Sandbox`.
    - `progress`: called with the number of newly finished samples (for progress bars).

    Every result carries `reward_version` (`name@hash12`). Reward failures are error results (score None);
    only misuse (mismatched lengths, a bad spec, a sandbox that cannot start) raises.
    """
    rw = as_reward(reward)
    if len(completions) != len(rows):
        raise ValueError(f"score_batch: {len(completions)} completions but {len(rows)} rows")
    if final_states is not None and len(final_states) != len(rows):
        raise ValueError(f"score_batch: {len(final_states)} final states but {len(rows)} rows")
    fields = [row_fields(r) for r in rows]
    if final_states is not None:
        for f, state in zip(fields, final_states):
            f["final_state"] = state
    box = _use_sandbox(rw, sandbox)
    if box is not None:
        return box.score(rw, list(completions), fields, progress=progress)
    out = []
    for item, f in zip(completions, fields):
        out.append(rw(item, **f))
        if progress is not None:
            progress(1)
    return out


def score_one(reward: Reward | Callable[..., Any] | str, completion: Any, row: TaskRow | dict[str, Any], *,
              final_state: Any = None, sandbox: SandboxArg = "auto") -> RewardResult:
    """`score_batch` for a single sample."""
    states = None if final_state is None else [final_state]
    return score_batch(reward, [completion], [row], final_states=states, sandbox=sandbox)[0]
