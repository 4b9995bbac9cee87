"""Adapters that let any studio reward run inside other engines, unchanged.

- `trl_reward_func(reward)`: a TRL `reward_funcs` entry for `trl.GRPOTrainer`. TRL calls it with `prompts`,
  `completions` (text, or chat message lists), `completion_ids` and every dataset column as lists; each sample's
  column values become that sample's row fields. Per-component means and the error count are logged through
  TRL's `log_metric`. A reward error is never silently 0: by default (`on_error="raise"`) the step stops with the
  traceback; `on_error="none"` returns None for those samples, which TRL turns into NaN (note TRL then sums rewards
  with nansum, so the sample contributes nothing to the advantage; the count is still logged as `<name>/errors`).
- `nemo_gym_verify_response(result)`: the body of a NeMo Gym resources server's `/verify` response:
  `reward`, `reward_components` (as `BaseMultiRewardVerifyResponse`), plus our verdict, reason and version as extra
  fields (NeMo Gym allows extras). An error result sets `mask_sample: true` (NeMo Gym's flag for a reward that is
  not a valid measurement) with `reward` 0.0 and the `error` text, so it is excluded rather than counted as a 0.
"""

from __future__ import annotations

from typing import Any, Callable, Literal

from rewards.protocol import completion_text
from rewards.reward import Reward, as_reward
from rewards.scoring import SandboxArg, score_batch
from schemas.rewards import RewardResult

TRL_EXTRA_KWARGS = ("trainer_state", "log_extra", "log_metric", "environments")


class RewardError(RuntimeError):
    """A reward failed inside a training step (with `on_error="raise"`); the message holds the first traceback."""


def trl_reward_func(reward: Reward | Callable[..., Any] | str, *, sandbox: SandboxArg = "auto",
                    on_error: Literal["raise", "none"] = "raise", log_components: bool = True) -> Callable[..., list]:
    """A TRL `reward_funcs` entry scoring with `reward` through `score_batch` (see the module docstring).

    The returned function's `__name__` is the reward's name (TRL names its reward columns after it) and its
    `last_results` attribute holds the RewardResults of the latest batch (for logging or inspection).
    """
    rw = as_reward(reward)
    if rw.kind == "trajectory":
        raise ValueError(f"reward {rw.name} is trajectory-aware; TRL's reward_funcs receive text completions. Use "
                         f"the studio trainer's tool loop, or a completion reward, with TRL")

    def reward_func(prompts: list[Any], completions: list[Any], completion_ids: list[Any] | None = None,
                    **kwargs: Any) -> list[float | None]:
        n = len(completions)
        rows: list[dict[str, Any]] = []
        for i in range(n):
            row = {k: v[i] for k, v in kwargs.items()
                   if k not in TRL_EXTRA_KWARGS and isinstance(v, list) and len(v) == n}
            row["prompt"] = prompts[i]
            if completion_ids is not None:
                row["completion_ids"] = completion_ids[i]
            rows.append(row)
        items = [completion_text(c) for c in completions]
        results = score_batch(rw, items, rows, sandbox=sandbox)
        reward_func.last_results = results  # type: ignore[attr-defined]
        errors = [r for r in results if r.is_error]
        log_metric = kwargs.get("log_metric")
        if callable(log_metric):
            log_metric(f"{rw.name}/errors", float(len(errors)))
            if log_components:
                for name, mean in component_means(results).items():
                    log_metric(f"{rw.name}/{name}", mean)
        if errors and on_error == "raise":
            raise RewardError(f"reward {rw.version_id} failed on {len(errors)} of {n} completions; first: "
                              f"{errors[0].reason}\n{errors[0].error}")
        return [None if r.is_error else r.score for r in results]

    reward_func.__name__ = rw.name
    reward_func.__qualname__ = rw.name
    reward_func.reward = rw  # type: ignore[attr-defined]
    reward_func.last_results = []  # type: ignore[attr-defined]
    return reward_func


def component_means(results: list[RewardResult]) -> dict[str, float]:
    """Mean of each component over the non-error results (components missing from a result are skipped)."""
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for r in results:
        if r.is_error:
            continue
        for k, v in r.components.items():
            sums[k] = sums.get(k, 0.0) + v
            counts[k] = counts.get(k, 0) + 1
    return {k: sums[k] / counts[k] for k in sums}


def nemo_gym_verify_response(result: RewardResult, request: dict[str, Any] | None = None) -> dict[str, Any]:
    """A NeMo Gym `/verify` response body for one scored sample (see the module docstring).

    `request` (the verify request: `responses_create_params`, `response`) is echoed first, as NeMo Gym's
    `BaseVerifyResponse` extends the request.
    """
    body: dict[str, Any] = dict(request or {})
    body.update({
        "reward": 0.0 if result.score is None else float(result.score),
        "reward_components": dict(result.components),
        "mask_sample": result.is_error,
        "passed": result.passed,
        "reason": result.reason,
        "reward_version": result.reward_version,
    })
    if result.is_error:
        body["error"] = result.error
    return body


def nemo_gym_verify(reward: Reward | Callable[..., Any] | str, completion: Any, row: dict[str, Any], *,
                    request: dict[str, Any] | None = None, sandbox: SandboxArg = "auto") -> dict[str, Any]:
    """Score one sample and return the NeMo Gym verify response for it."""
    (res,) = score_batch(reward, [completion], [row], sandbox=sandbox)
    return nemo_gym_verify_response(res, request)
