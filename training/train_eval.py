"""Greedy pass@1 of a policy on held-out tasks, batched with the trainer's own rollout code.

Why next to the trainer (and not only `training.evaluation`): the before/after numbers of a training run (the demo
stage, benchmarks/learn_workplace.py, `eval_every`) must come from exactly the generation path that training used
(same prompt rendering, same tool loop, same token limits), batched so that evaluating a few hundred tasks on a CPU
takes minutes rather than an hour. `training.evaluation` remains the full report (pass@k, bootstrap, categories).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable

from schemas.task import TaskRow
from schemas.train_config import TrainConfig
from training.rollout import SamplingParams, TransformersBackend
from training.samples import samples_from_batch
from training.scoring import passed, row_fields


def greedy_pass_at_1(
    model: Any,
    tok: Any,
    cfg: TrainConfig,
    tasks: list[TaskRow],
    *,
    reward: Any = None,
    batch: int = 16,
    progress: Callable[[int, int], None] | None = None,
    keep_episodes: bool = False,
    keep_samples: bool = False,
) -> dict[str, Any]:
    """Pass rate of one greedy sample per task, with the mean reward and why samples failed. `keep_episodes` (tool
    environments) adds each task's episode text and first tool call, for comparing two policies task by task;
    `keep_samples` adds the token-level `Sample`s, scored (what training.guard holds)."""
    tok.padding_side = "left"
    greedy = SamplingParams(max_new_tokens=cfg.rollout.max_new_tokens, temperature=0.0, seed=0)
    autocast = cfg.model.precision == "bf16-autocast"
    results = []
    episodes: list[dict[str, Any]] = []
    kept: list[Any] = []
    if cfg.rollout.environment:
        from training.multiturn import EnvironmentCollector

        ecfg = cfg.model_copy(update={"reward": cfg.reward.model_copy(update={"function": "env:binary"})})
        collector = EnvironmentCollector(ecfg, model, tok, None, autocast_bf16=autocast)
        for s in range(0, len(tasks), batch):
            for smp in collector(tasks[s:s + batch], 1, greedy):
                results.append((smp.task_id, smp.result))
                if keep_samples:
                    smp.passed = passed(smp.result)
                    kept.append(smp)
                if keep_episodes:
                    episodes.append(_episode(tok, smp))
            if progress:
                progress(min(s + batch, len(tasks)), len(tasks))
    else:
        from training.grpo import task_messages

        backend = TransformersBackend(model, tok, autocast_bf16=autocast)
        for s in range(0, len(tasks), batch):
            part = tasks[s:s + batch]
            rb = backend.generate([task_messages(t, cfg.rollout.system_prompt) for t in part], 1, greedy)
            scored = reward.score_batch(rb.texts, [row_fields(t) for t in part])
            for t, r in zip(part, scored):
                results.append((t.id, r))
            if keep_samples:
                for smp, r in zip(samples_from_batch(rb, [t.id for t in part]), scored):
                    smp.result, smp.passed = r, passed(r)
                    kept.append(smp)
            if progress:
                progress(min(s + batch, len(tasks)), len(tasks))
    ok = [passed(r) for _, r in results]
    scores = [r.score for _, r in results if r.score is not None]
    reasons = Counter((r.reason or "").split(":", 1)[0][:40] for _, r in results if not passed(r))
    out = {
        "pass_at_1": sum(ok) / len(ok) if ok else 0.0,
        "n": len(ok),
        "passed": int(sum(ok)),
        "reward_mean": sum(scores) / len(scores) if scores else None,
        "errors": sum(1 for _, r in results if r.score is None),
        "fail_reasons": dict(reasons.most_common(8)),
        "passed_ids": [tid for (tid, _), ok_ in zip(results, ok) if ok_],
    }
    if keep_episodes:
        out["episodes"] = episodes
    if keep_samples:
        out["samples"] = kept
    return out


def _episode(tok: Any, smp: Any) -> dict[str, Any]:
    """One greedy episode as text: what the verifier said, the tool the first reply called (None: no call), and
    each reply's calls as signatures (training.branch; what data.focus.mistake_from_turn compares)."""
    from rewards.environments.toolcalls import parse_reply

    mask = smp.loss_mask
    first_len = mask.index(0) if 0 in mask else len(mask)  # the first reply ends where the first tool result starts
    calls = parse_reply(tok.decode(smp.completion_ids[:first_len], skip_special_tokens=True)).calls
    return {"task_id": smp.task_id, "passed": bool(passed(smp.result)), "reason": smp.result.reason,
            "first_call": calls[0].name if calls else None, "text": tok.decode(smp.completion_ids),
            "calls": smp.extras.get("calls", [])}
