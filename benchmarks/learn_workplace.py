"""Does the bundled trainer turn the embedded model into a better workplace agent? Held-out pass@1 of the base model,
after SFT on demonstrations, and after SFT + GRPO, with wall times; then the same with a strict binary reward, ours
(SFT warm start + DAPO dynamic sampling) next to TRL 1.16's GRPOTrainer (no warm start, no dynamic sampling).

    .venv/bin/python benchmarks/learn_workplace.py                      # both parts: ~60 + ~30 minutes on 2 cores
    .venv/bin/python benchmarks/learn_workplace.py --part main          # base / SFT / SFT+GRPO (--grpo-reward)
    .venv/bin/python benchmarks/learn_workplace.py --part strict        # binary reward, ours vs TRL (reuses main's SFT)

Everything runs through the library: `studio.workplace_dataset.build_dataset` (tasks, world, demonstrations),
`training.sft.run_sft` (TRL SFTTrainer), `training.grpo.GRPOTrainer` (multi-turn rollouts in the workplace
environment, DAPO loss, dynamic sampling) and `training.train_eval.greedy_pass_at_1` (greedy episodes through the
same tool loop, the verifier's binary verdict). The held-out tasks are a fixed random sample of the test split (which
also holds the templates no training task uses). The JSON is rewritten after every stage, so a run cut short still
says exactly what ran (`stages_completed`, `complete`). Each stage's passed test tasks are kept (`passed_ids`), and
`grpo_vs_sft_paired` compares SFT + GRPO with SFT on the same tasks: the tasks gained and lost, and the paired
bootstrap interval of the difference (one or two of 48 greedy passes move under weight changes of 1e-6).

TRL's side of the strict comparison: TRL 1.16 runs tools only through a chat template that renders tool calls, which
SmolLM2's does not, so its run is single-turn: the reward function runs the one reply's tool calls in the environment
and returns the verifier's binary verdict on the resulting state (the most a single reply can earn). Its held-out
pass@1 after training is measured with the same multi-turn evaluation as ours.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULT = ROOT / "benchmarks" / "results" / "learn_workplace.json"
PLOT = ROOT / "benchmarks" / "results" / "learn_workplace.png"
STAGES = ("base", "sft", "sft_grpo")


def test_sample(data: Path, n: int) -> list:
    """The held-out tasks every stage is evaluated on: a fixed random sample (seed 0) of the test split, sorted by
    category so that evaluation batches share prompt prefixes."""
    from generators.task_io import read_tasks

    test = read_tasks(data / "test.parquet")
    random.Random(0).shuffle(test)
    return sorted(test[:n], key=lambda t: (t.metadata["category"], t.id))


def _write(out: dict) -> None:
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    tmp = RESULT.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=1, default=str))
    os.replace(tmp, RESULT)


def _plot(out: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    strict = out.get("strict_binary") or {}
    fig, axes = plt.subplots(1, 4, figsize=(18, 3.8))
    bars = [(s, out["pass_at_1"][s]) for s in STAGES if s in out["pass_at_1"]]
    bars += [(f"strict:{k}", v) for k, v in (strict.get("pass_at_1") or {}).items()]
    colors = {"base": "#999", "sft": "#69c", "sft_grpo": "#2a7", "strict:ours_sft_grpo": "#2a7", "strict:trl_grpo": "#c63"}
    axes[0].bar([b[0] for b in bars], [100 * b[1] for b in bars], color=[colors.get(b[0], "#888") for b in bars])
    axes[0].set_ylabel("held-out pass@1 (%)")
    axes[0].set_title(f"workplace test tasks (n={out['eval_tasks']})", fontsize=9)
    axes[0].tick_params(axis="x", labelsize=7, rotation=20)
    m = out.get("grpo_metrics") or []
    if m:
        axes[1].plot([r["step"] for r in m], [r.get("reward_mean") or 0 for r in m], label="reward")
        axes[1].plot([r["step"] for r in m], [r.get("pass_rate") or 0 for r in m], label="pass rate")
        best = out.get("grpo_best")
        if best:  # --grpo-eval-tasks: the validation pass@1 the stage's result was chosen by, from the SFT model on
            xs, ys = zip(*best["history"])
            axes[1].plot(xs, ys, marker="o", color="#555", label=f"validation greedy pass@1 ({best['eval_tasks']} "
                         f"tasks; chosen: step {best['step']}{' = SFT' if best['checkpoint'] is None else ''})")
        axes[1].legend(fontsize=7)
    reward = "binary" if "binary" in out["setup"].get("train_reward", "") else "shaped"
    axes[1].set_title(f"GRPO ({out['setup'].get('loss')}) samples, {reward} reward", fontsize=9)
    axes[1].set_xlabel("step")
    for name, key, color in (("ours (SFT warm start + dynamic sampling)", "ours_metrics", "#2a7"),
                             ("TRL 1.16 (base model)", "trl_metrics", "#c63")):
        rows = strict.get(key) or []
        if rows:
            axes[2].plot([r["step"] for r in rows], [r.get("zero_variance_frac") or 0 for r in rows], color=color,
                         label=f"{name}: zero-variance groups")
            axes[2].plot([r["step"] for r in rows], [r.get("reward_mean") or 0 for r in rows], color=color,
                         linestyle="--", label=f"{name}: reward")
    if strict:
        axes[2].legend(fontsize=6)
    axes[2].set_title("strict binary reward", fontsize=9)
    axes[2].set_xlabel("step")
    _plot_attempts(axes[3], out)
    fig.tight_layout()
    tmp = PLOT.with_name(f".{PLOT.stem}.tmp.png")
    fig.savefig(tmp, dpi=90)
    plt.close(fig)
    os.replace(tmp, PLOT)


def _plot_attempts(ax: Any, out: dict) -> None:
    """Every GRPO stage on record (earlier attempts and the current one): test passes gained over the SFT model it
    started from, by learning rate, so the whole search reads at a glance."""
    stages = [a for a in out.get("earlier_grpo_attempts", []) if a.get("grpo_lr") and a.get("sft_pass_at_1") is not None]
    if "sft_grpo" in out.get("pass_at_1", {}) and out["setup"].get("grpo_lr"):
        stages.append({"grpo_lr": out["setup"]["grpo_lr"], "sft_pass_at_1": out["pass_at_1"]["sft"],
                       "pass_at_1": out["pass_at_1"]["sft_grpo"], "grpo_lora": out["setup"].get("grpo_lora"),
                       "current": True})
    n = out.get("eval_tasks") or 48
    for a in stages:  # LoRA stages as triangles: their learning rates are not comparable with full fine-tuning's
        ax.scatter(a["grpo_lr"], round((a["pass_at_1"] - a["sft_pass_at_1"]) * n), marker="^" if a.get("grpo_lora") else "o",
                   color="#2a7" if a.get("current") else "#888", s=40 if a.get("current") else 18, zorder=3)
    ax.axhline(0, color="#69c", linewidth=1, label="its SFT model")
    ax.axhspan(-2, 2, color="#69c", alpha=0.12, label="2 tasks either way")
    ax.set_xscale("log")
    ax.set_xlabel("GRPO learning rate")
    ax.set_ylabel(f"test passes gained (of {n})")
    ax.set_title(f"every GRPO stage on record ({len(stages)}; green: current, triangle: LoRA)", fontsize=9)
    ax.legend(fontsize=7)


TRAIN_REWARDS = {
    "env": ("workplace verifier, shaped (dominance: every pass >= 0.75 > every failure; a failure is credited only for "
            "progress: rows changed right, the needed write tools tried)"),
    "env:binary": "workplace verifier, binary (1 if the episode passes, else 0)",
}


LORA_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
DECODER_LAYERS = 30  # SmolLM2-135M
SFT_BETAS = [0.9, 0.999]  # TRL's SFTConfig AdamW betas (adam_beta1/2), which --grpo-sft-moments continues


def _grpo_lora(a: argparse.Namespace) -> dict | None:
    """GRPO through LoRA adapters on every linear module of the layers full fine-tuning would train (the ones
    above --freeze-layers), or None for full fine-tuning."""
    if not a.grpo_lora_r:
        return None
    return {"enabled": True, "r": a.grpo_lora_r, "alpha": a.grpo_lora_alpha, "target_modules": LORA_MODULES,
            "layers": list(range(a.freeze_layers, DECODER_LAYERS))}


def _grpo_setup(a: argparse.Namespace) -> str:
    lora = _grpo_lora(a)
    how = (f"LoRA r {lora['r']} alpha {lora['alpha']} on every linear module of layers {a.freeze_layers}-"
           f"{DECODER_LAYERS - 1}, " if lora else "")
    forks = f", trained on the top {a.grpo_top_entropy:g} of tokens by entropy" if a.grpo_top_entropy else ""
    if a.grpo_divergence:
        forks += (", trained only on the first token where each failed episode parts from a passed one of its group "
                  "(loss.divergence_tokens)")
        if a.grpo_divergence_within == "arguments":
            forks += (", and only where the two part inside the arguments of the same tool's call "
                      "(loss.divergence_within: arguments)")
    zvp = _grpo_zero_variance(a)
    zvp_text = (f", zero-variance groups trained (RL-ZVP, alpha {zvp['alpha']:g}, negative alpha "
                f"{zvp['negative_alpha']:g})" if zvp else "")
    optimizer = {"adamw-bf16": "AdamW bf16 moments", "adamw": "AdamW"}.get(a.grpo_optimizer,
                                                                        f"SGD (momentum {a.grpo_momentum:g})")
    if a.grpo_sft_moments != "none":
        optimizer += (f" continuing the SFT stage's {'moments' if a.grpo_sft_moments == 'both' else 'second moment'}"
                      f" (optim.sft_moments {a.grpo_sft_moments}, betas 0.9/0.999)")
    guided = (", each group's last member the task's demonstration replayed and verified (guidance.demonstrations)"
              if a.grpo_guidance else "")
    if a.grpo_guidance and a.grpo_branch == "first_mistake":
        guided += (", continuing the failed episode from its first call the demonstration does not make "
                   "(guidance.branch first_mistake)")
    decoding = ("greedy rollouts (the episode greedy evaluation runs)" if a.grpo_temperature == 0
                else f"sampling temperature {a.grpo_temperature}")
    policy = "" if a.grpo_policy_coef == 1 else f" (the policy-gradient term x{a.grpo_policy_coef:g})"
    sft = (f", plus {a.grpo_sft_coef:g} x the token-mean NLL of every drawn task's verified demonstration "
           "(guidance.sft_coef)" if a.grpo_sft_coef else "")
    best = (f"; the stage's result is its best policy by greedy pass@1 on the first {a.grpo_eval_tasks} validation "
            "tasks, the SFT model included (checkpoint.keep_best)" if a.grpo_eval_tasks else "")
    schedule = "" if a.grpo_scheduler == "constant" else f" ({a.grpo_scheduler} decay to 0 over {a.grpo_steps} steps)"
    kl = f", k3 KL to the SFT model x{a.grpo_beta:g} (loss.beta)" if a.grpo_beta else ""
    probed = (f"at most {a.grpo_focus_probe} validation tasks of each template" if a.grpo_focus_probe
              else "all validation tasks")
    focus = (f"; prompts drawn only from the templates where the SFT model's greedy pass@1 on {probed} is at most "
             f"{a.grpo_focus_max_pass:g} (data.focus, probed before the first update, inside the stage's time)"
             if a.grpo_focus_max_pass is not None else "")
    if a.grpo_focus_mistake_from and a.grpo_focus_max_pass is not None:
        focus += (f", and only those whose failed probe episodes all made their first {a.grpo_focus_mistake_from} "
                  "replies right (the calls among the task's ground-truth calls; data.focus.mistake_from_turn)")
    if a.grpo_focus_mistake_kind != "any" and a.grpo_focus_max_pass is not None:
        focus += (", and only those whose failed probe episodes all first went wrong inside a call's "
                  f"{a.grpo_focus_mistake_kind} (the tools the remaining ground-truth calls use; "
                  "data.focus.mistake_kind)")
    if a.grpo_retain and a.grpo_focus_max_pass is not None:
        where = "the templates above that bar" if a.grpo_retain_from == "solved" else "every template"
        focus += (f"; every step also {a.grpo_retain} verified demonstrations of {where}, "
                  f"{a.grpo_retain_coef:g} x the token-mean NLL of their tokens the policy gives below "
                  f"{a.grpo_retain_below:g} probability (data.focus.retain_per_step, the retain anchor)")
    guard = _grpo_guard(a)
    if guard:
        test = (f"still decode token for token (at most {guard['max_flips']} held decisions flipped)"
                if guard["keep"] == "decisions" else
                f"still pass (an episode with a flipped decision decoded again greedily and verified, at most "
                f"{guard['max_lost']} lost; the new passing episodes held from then on)")
        focus += (f"; every step kept only as far as the SFT model's passing greedy episodes on the first "
                  f"{guard['per_group']} training tasks of each template {test}; else the step halved, up to "
                  f"{guard['backtrack']} times, then dropped (guard, keep: {guard['keep']})")
    return (f"{a.grpo_batch} episodes per step ({a.grpo_group} per prompt), {how}lr {a.grpo_lr}{schedule}, {optimizer}, "
            f"loss {a.grpo_loss}{policy}{kl}, negative advantages x{a.grpo_negative_weight}, {decoding}{forks}{zvp_text}"
            f"{guided}{sft}{best}{focus}")


def _grpo_guard(a: argparse.Namespace) -> dict | None:
    """The GRPO stage's guard section (None: every step kept whole)."""
    if not a.grpo_guard_per_group:
        return None
    return {"by": "template", "per_group": a.grpo_guard_per_group, "keep": a.grpo_guard_keep,
            "max_lost": a.grpo_guard_max_lost, "max_flips": a.grpo_guard_max_flips, "backtrack": a.grpo_guard_backtrack}


def _grpo_record(a: argparse.Namespace) -> dict:
    """The GRPO stage's settings as `setup` records them (replaced when a stage re-runs from a kept SFT model)."""
    return {"grpo": _grpo_setup(a), "loss": a.grpo_loss, "train_reward": TRAIN_REWARDS[a.grpo_reward],
            "negative_advantage_weight": a.grpo_negative_weight, "grpo_temperature": a.grpo_temperature,
            "grpo_lr": a.grpo_lr, "grpo_lora": _grpo_lora(a), "grpo_top_entropy": a.grpo_top_entropy,
            "grpo_zero_variance": _grpo_zero_variance(a), "grpo_optimizer": a.grpo_optimizer,
            "grpo_momentum": a.grpo_momentum, "grpo_guidance": a.grpo_guidance, "grpo_group": a.grpo_group,
            "grpo_sft_coef": a.grpo_sft_coef, "grpo_policy_coef": a.grpo_policy_coef, "seed": a.seed,
            "grpo_sft_moments": a.grpo_sft_moments, "grpo_eval_tasks": a.grpo_eval_tasks,
            "grpo_scheduler": a.grpo_scheduler, "grpo_beta": a.grpo_beta, "grpo_focus": _grpo_focus(a),
            "grpo_divergence": a.grpo_divergence, "grpo_branch": a.grpo_branch,
            "grpo_divergence_within": a.grpo_divergence_within, "grpo_guard": _grpo_guard(a)}


# what a setup recorded before a key existed meant (the GRPO stage's settings of the sessions before it)
_SETUP_DEFAULTS = {"negative_advantage_weight": 1.0, "grpo_temperature": 1.0, "grpo_optimizer": "adamw-bf16",
                   "grpo_momentum": 0.0, "grpo_guidance": False, "grpo_group": 4, "grpo_sft_coef": 0.0,
                   "grpo_policy_coef": 1.0, "seed": 0, "grpo_sft_moments": "none", "grpo_eval_tasks": 0,
                   "grpo_scheduler": "constant", "grpo_beta": 0.0, "grpo_focus": None, "grpo_divergence": False,
                   "grpo_branch": "start", "grpo_divergence_within": "anywhere", "grpo_guard": None}


def _attempt_settings(setup: dict, a: argparse.Namespace) -> dict:
    """A finished GRPO stage's settings for `earlier_grpo_attempts`: every key `_grpo_record` writes (the older
    setups' missing ones at what they meant then), `grpo_temperature` under the attempts' name `temperature`."""
    out = {k: setup.get(k, _SETUP_DEFAULTS.get(k)) for k in _grpo_record(a)}
    out["temperature"] = out.pop("grpo_temperature")
    return out


def _grpo_focus(a: argparse.Namespace) -> dict | None:
    """The GRPO stage's data.focus (None: prompts from every training task)."""
    if a.grpo_focus_max_pass is None:
        return None
    focus = {"by": "template", "max_pass_rate": a.grpo_focus_max_pass, "probe_per_group": a.grpo_focus_probe}
    if a.grpo_retain:
        focus.update(retain_per_step=a.grpo_retain, retain_coef=a.grpo_retain_coef, retain_below=a.grpo_retain_below,
                     retain_from=a.grpo_retain_from)
    if a.grpo_focus_mistake_from:
        focus["mistake_from_turn"] = a.grpo_focus_mistake_from
    if a.grpo_focus_mistake_kind != "any":
        focus["mistake_kind"] = a.grpo_focus_mistake_kind
    return focus


def _grpo_zero_variance(a: argparse.Namespace) -> dict | None:
    """The RL-ZVP coefficients of the GRPO stage (loss.zero_variance_alpha / _negative_alpha), or None when off."""
    if a.grpo_zvp_alpha is None:
        return None
    neg = a.grpo_zvp_alpha if a.grpo_zvp_negative_alpha is None else a.grpo_zvp_negative_alpha
    return {"alpha": a.grpo_zvp_alpha, "negative_alpha": neg}


def _config(a: argparse.Namespace, data: Path, threads: int, run: str, reward: str, steps: int,
            grpo_stage: bool = False) -> Any:
    """The run's config. SFT (and the evaluations) use full fine-tuning with the frozen lower layers; with
    `grpo_stage` and --grpo-lora-r, GRPO trains LoRA adapters instead (the two are exclusive in a TrainConfig)."""
    from training.config_io import parse_train_config

    lora = _grpo_lora(a) if grpo_stage else None
    return parse_train_config({
        "name": f"learn-workplace-{run}", "seed": a.seed, "output_dir": str(a.work / run), "threads": threads,
        "steps": steps, "batch_size": a.grpo_batch,
        "model": {"name": "default", "precision": a.precision, "freeze_embeddings": a.freeze_embeddings and not lora,
                  "freeze_layers": 0 if lora else a.freeze_layers},
        "lora": lora or {"enabled": False},
        "data": {"path": str(data), "split": "train", "eval_split": "validation",
                 "focus": _grpo_focus(a) if grpo_stage else None},
        "reward": {"function": reward, "allow_unaudited": True},
        "rollout": {"environment": "workplace", "num_generations": a.grpo_group, "max_turns": a.max_turns,
                    "max_new_tokens": a.max_new_tokens, "max_total_tokens": 3072,
                    # the GRPO runs' (this part's GRPO stage, the strict part); the SFT / evaluation-only configs
                    # sample nothing, and a greedy temperature there would be refused for their unguided groups
                    "temperature": a.grpo_temperature if grpo_stage or run == "strict" else 1.0},
        "guidance": {"demonstrations": str(data / "demonstrations.jsonl") if grpo_stage and a.grpo_guidance else None,
                     "sft_coef": a.grpo_sft_coef if grpo_stage and a.grpo_guidance else 0.0,
                     "branch": a.grpo_branch if grpo_stage and a.grpo_guidance else "start"},
        "loss": {"type": a.grpo_loss, "negative_advantage_weight": a.grpo_negative_weight,
                 "top_entropy_fraction": a.grpo_top_entropy, "zero_variance_alpha": a.grpo_zvp_alpha,
                 "divergence_tokens": a.grpo_divergence and grpo_stage,
                 "divergence_within": a.grpo_divergence_within if a.grpo_divergence and grpo_stage else "anywhere",
                 "zero_variance_negative_alpha": a.grpo_zvp_negative_alpha,
                 "policy_coef": a.grpo_policy_coef if grpo_stage else 1.0,
                 "beta": a.grpo_beta if grpo_stage else 0.0},
        "dynamic_sampling": {"enabled": True, "max_rounds": a.ds_rounds},
        "optim": {"lr": a.grpo_lr, "optimizer": a.grpo_optimizer, "momentum": a.grpo_momentum,
                  "micro_batch_size": 4, "sft_moments": a.grpo_sft_moments if grpo_stage else "none",
                  "scheduler": a.grpo_scheduler if grpo_stage else "constant",
                  **({"betas": SFT_BETAS} if a.grpo_sft_moments != "none" and grpo_stage else {})},
        "sft": {"data_path": str(data / "demonstrations.jsonl"), "max_steps": a.sft_steps, "epochs": a.sft_epochs,
                "lr": a.sft_lr, "batch_size": a.sft_batch, "gradient_accumulation_steps": a.sft_accum,
                "max_length": 3072, "shared_prefix": True, "pack_length_window": a.sft_length_window,
                "scheduler": "cosine", "warmup_ratio": 0.05, "max_minutes": a.sft_minutes,
                "save_optimizer": True},
        "checkpoint": {"every": 1000, "keep": 1, "keep_best": bool(grpo_stage and a.grpo_eval_tasks)},
        "guard": _grpo_guard(a) if grpo_stage else None,
        # the GRPO stage's model selection (--grpo-eval-tasks) reads the validation split, never the test tasks
        **({"eval_every": 1, "eval_tasks": a.grpo_eval_tasks} if grpo_stage and a.grpo_eval_tasks else {}),
    })


class Stage:
    """Evaluation and bookkeeping shared by both parts."""

    def __init__(self, out: dict, test: list, cfg: Any, eval_batch: int):
        self.out, self.test, self.cfg, self.eval_batch = out, test, cfg, eval_batch

    def evaluate(self, name: str, model: Any, tok: Any, into: dict | None = None) -> float:
        from training.train_eval import greedy_pass_at_1

        t0 = time.time()
        r = greedy_pass_at_1(model, tok, self.cfg, self.test, batch=self.eval_batch)
        box = self.out if into is None else into
        passed = set(r.pop("passed_ids"))
        box.setdefault("passed_ids", {})[name] = sorted(passed)  # the paired comparison of two stages reads them
        for subset, flag in (("seen_templates", False), ("held_out_templates", True)):
            ids = [t.id for t in self.test if bool(t.metadata.get("held_out_template")) == flag]
            if ids:
                box.setdefault(f"pass_at_1_{subset}", {})[name] = round(sum(i in passed for i in ids) / len(ids), 4)
                r[f"n_{subset}"] = len(ids)
        box.setdefault("pass_at_1", {})[name] = r["pass_at_1"]
        box.setdefault("eval", {})[name] = r
        box.setdefault("wall_s", {})[f"eval_{name}"] = round(time.time() - t0, 1)
        self.out["stages_completed"].append(f"eval_{name}")
        print(f"{name}: pass@1 {r['pass_at_1']:.3f} ({r['passed']}/{r['n']}) seen-template "
              f"{box.get('pass_at_1_seen_templates', {}).get(name)} {r['fail_reasons']} "
              f"in {time.time() - t0:.0f}s", flush=True)
        _write(self.out)
        _plot(self.out)
        return r["pass_at_1"]


def paired_stages(task_ids: list[str], passed_ids: dict[str, list[str]], a: str, b: str) -> dict | None:
    """Stage `b` against stage `a` on the same test tasks: the tasks `b` gained and lost, and the paired bootstrap
    of the pass-rate difference (training.bootstrap). None unless both stages' passed tasks are recorded. Why: on 48
    tasks a difference of one or two passes is within what a weight change of 1e-6 can flip, and a reader needs the
    interval, not only the two rates."""
    from training.bootstrap import paired_bootstrap

    if a not in passed_ids or b not in passed_ids:
        return None
    pa, pb = set(passed_ids[a]), set(passed_ids[b])
    boot = paired_bootstrap([float(t in pa) for t in task_ids], [float(t in pb) for t in task_ids], confidence=0.95)
    return {"stages": f"{b} - {a}", "n_tasks": len(task_ids), "gained": sorted(pb - pa), "lost": sorted(pa - pb),
            "delta_points": round(100 * boot.delta, 1),
            "ci95_points": [round(100 * boot.ci_low, 1), round(100 * boot.ci_high, 1)],
            "p_not_better": round(boot.p_not_better, 4), "significant": boot.significant}


def grpo(cfg: Any, init_from: str, deadline: float, eval_s: float) -> tuple[Any, list[dict]]:
    """Our GRPO from `init_from`, starting no step that would not finish (with the final evaluation) by `deadline`."""
    from training.grpo import GRPOTrainer

    metrics: list[dict] = []

    def on_step(rec: dict) -> None:
        metrics.append(rec)
        print(f"grpo {rec['step']}: reward {rec.get('reward_mean')} pass {rec.get('pass_rate')} "
              f"kept {rec.get('groups_kept')}/{rec.get('groups_sampled')} {rec['step_time_s']:.0f}s"
              + (f" guard: kept {rec['guard_scale']:g} of the step ({rec['guard_flips_whole_step']:g} held decisions "
                 f"the whole step flipped; {rec.get('guard_redecoded', 0):g} episodes decoded again at the kept part, "
                 f"{rec.get('guard_lost', 0):g} lost; {rec['guard_s']:.0f}s)" if "guard_scale" in rec else ""),
              flush=True)

    class Budget(GRPOTrainer):
        def train_step(self):
            rec = super().train_step()
            slowest = max(m["step_time_s"] + m.get("eval_time_s", 0) for m in metrics) if metrics else 0
            if time.time() + slowest + eval_s > deadline:
                self.stop_after = len(metrics)
            return rec

    shutil.rmtree(Path(cfg.output_dir), ignore_errors=True)
    trainer = Budget(cfg, init_from=init_from, on_step=on_step)
    trainer.train()
    if cfg.lora.enabled:  # evaluate the merged weights: the same function, no adapter arithmetic per token
        trainer.model = trainer.model.merge_and_unload()
    keep = ("step", "reward_mean", "pass_rate", "groups_kept", "groups_sampled", "zero_variance_frac", "ds_rounds",
            "step_time_s", "completion_len_mean", "tokens_per_s", "demo_pass_rate", "sft_nll", "grad_norm",
            "eval_pass_at_1", "eval_time_s", "divergence_tokens", "entropy", "retain_demos", "retain_tokens",
            "retain_nll", "guided_from_mistake", "divergence_pairs", "divergence_pairs_kept", "guard_scale", "guard_flips",
            "guard_flips_whole_step", "guard_redecoded", "guard_lost", "guard_checks", "guard_s")
    return trainer, [{k: m.get(k) for k in keep if k in m} for m in metrics]


def _keep_model(model: Any, tok: Any, folder: Path) -> Path:
    """The evaluated SFT + GRPO policy saved (safetensors + tokenizer) to `folder`, replacing an earlier stage's
    whole: the stage can stop between checkpoints (the budget), and `greedy_episode_diff.py --after` or a larger
    evaluation needs the exact weights the test numbers came from."""
    from generators.task_io import atomic_folder

    with atomic_folder(folder) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
    return folder


def part_main(a: argparse.Namespace, out: dict, data: Path, test: list, threads: int) -> None:
    from training.model import load_model
    from training.sft import run_sft

    t_start = time.time()
    deadline = t_start + a.budget_min * 60
    cfg = _config(a, data, threads, "main", a.grpo_reward, a.grpo_steps)
    st = Stage(out, test, cfg, a.eval_batch)
    sft_dir = a.work / "sft"
    reuse = a.reuse_sft and (sft_dir / "sft_info.json").exists() and "sft" in out["pass_at_1"]
    if reuse:  # recovering a run cut after its SFT evaluation: the recorded stages stand, the clock includes them
        spent = sum(out["wall_s"].get(k, 0) for k in ("eval_base", "sft", "eval_sft"))
        deadline = time.time() + a.budget_min * 60 - spent
        out["reused_sft_stage"] = True
        if "sft_grpo" in out["pass_at_1"]:  # a GRPO stage already ran from this SFT model: it stays on record
            seen, held = out.get("pass_at_1_seen_templates", {}), out.get("pass_at_1_held_out_templates", {})
            out.setdefault("earlier_grpo_attempts", []).append({
                "command": out.get("command_grpo", out["command"]), **_attempt_settings(out["setup"], a),
                "sft_pass_at_1": out["pass_at_1"]["sft"],
                "steps": out.get("grpo_steps_run"), "pass_at_1": out["pass_at_1"]["sft_grpo"],
                "pass_at_1_seen_templates": seen.get("sft_grpo"), "pass_at_1_held_out_templates": held.get("sft_grpo"),
                "grpo_metrics": out.get("grpo_metrics"),
                **({"grpo_best": out["grpo_best"]} if out.get("grpo_best") else {}),
                **({"grpo_vs_sft_paired": out["grpo_vs_sft_paired"]} if out.get("grpo_vs_sft_paired") else {}),
                **({"grpo_focus_choice": out["grpo_focus_choice"]} if out.get("grpo_focus_choice") else {})})
        out["setup"].update(_grpo_record(a))
        out["command_grpo"] = a.command
        out["stages_completed"] = [s for s in out["stages_completed"] if s not in ("grpo", "eval_sft_grpo")]
    else:
        model, tok = load_model("default", threads=threads)
        st.evaluate("base", model, tok)
        t0 = time.time()
        sft_dir = run_sft(cfg, model=model, tokenizer=tok, out_dir=sft_dir,
                          on_log=lambda r: print(f"sft {r.get('step')}/{r.get('max_steps')}: loss {r.get('loss', '')}",
                                                 flush=True) if "loss" in r else None)
        out["wall_s"]["sft"] = round(time.time() - t0, 1)
        out["stages_completed"].append("sft")
        out["sft_info"] = json.loads((sft_dir / "sft_info.json").read_text())
        _write(out)
        del model
        model, tok = load_model(str(sft_dir), threads=threads)
        st.evaluate("sft", model, tok)
        del model

    t0 = time.time()
    out["grpo_budget_left_min_at_start"] = round((deadline - time.time()) / 60, 1)
    gcfg = _config(a, data, threads, "main", a.grpo_reward, a.grpo_steps, grpo_stage=True)
    trainer, metrics = grpo(gcfg, str(sft_dir), deadline, out["wall_s"]["eval_sft"] * 1.2)
    out["grpo_steps_run"] = len(metrics)
    out.pop("grpo_focus_choice", None)
    if trainer.focus is not None:  # data.focus: the SFT model's validation pass rate per template, what GRPO drew from
        out["grpo_focus_choice"] = trainer.focus.model_dump(mode="json")
    out["grpo_metrics"] = metrics
    out["wall_s"]["grpo"] = round(time.time() - t0, 1)
    out["stages_completed"].append("grpo")
    model, tok = trainer.model, trainer.tok
    out.pop("grpo_best", None)
    if trainer.best is not None:  # the policy chosen on validation: a checkpoint, or the SFT model when none beat it
        out["grpo_best"] = trainer.best.model_dump(mode="json", exclude={"path"})
        if trainer.best.step != trainer.step:
            del model
            model, tok = load_model(trainer.best.path, threads=threads)
    out["sft_grpo_model"] = str(_keep_model(model, tok, a.work / "sft_grpo"))
    _write(out)
    st.evaluate("sft_grpo", model, tok)
    p = out["pass_at_1"]
    paired = paired_stages([t.id for t in test], out.get("passed_ids", {}), "sft", "sft_grpo")
    if paired:
        out["grpo_vs_sft_paired"] = paired
    else:  # a reused SFT stage recorded before its passed tasks were: no pairing, and no stale one
        out.pop("grpo_vs_sft_paired", None)
    out["gain_points"] = round(100 * (p["sft_grpo"] - p["base"]), 1)
    out["grpo_over_sft_points"] = round(100 * (p["sft_grpo"] - p["sft"]), 1)
    seen = out.get("pass_at_1_seen_templates") or {}
    if "sft_grpo" in seen:  # test tasks of templates that training saw (new instances) vs templates it never saw
        out["gain_points_seen_templates"] = round(100 * (seen["sft_grpo"] - seen["base"]), 1)
        out["grpo_over_sft_points_seen_templates"] = round(100 * (seen["sft_grpo"] - seen["sft"]), 1)
    out["wall_s"]["total_main"] = round(sum(v for k, v in out["wall_s"].items() if k in (
        "eval_base", "sft", "eval_sft", "grpo", "eval_sft_grpo")) if reuse else time.time() - t_start, 1)
    out["within_60_min"] = out["wall_s"]["total_main"] <= 3600
    out["targets_met"] = {"gain_at_least_20_points": out["gain_points"] >= 20,
                          "sft_grpo_above_sft": p["sft_grpo"] > p["sft"], "within_60_min": out["within_60_min"]}
    out["complete_main"] = True
    _write(out)
    _plot(out)


def trl_binary_run(a: argparse.Namespace, data: Path, train: list, steps: int) -> tuple[Path, list[dict], float]:
    """TRL 1.16 GRPOTrainer from the base model with the strict binary verdict (single-turn, see the docstring)."""
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from rewards.environments.loop import ToolLoop
    from rewards.environments.workplace import WorkplaceEnv
    from training.model import ensure_embedded_cache
    from training.multiturn import load_workplace_world

    world = load_workplace_world(data)
    by_id = {t.id: t for t in train}

    def binary_verdict(completions, task_id, **_):
        scores = []
        for c, tid in zip(completions, task_id):
            text = c[-1]["content"] if isinstance(c, list) else c
            env = WorkplaceEnv(world)
            loop = ToolLoop(by_id[tid], env, max_turns=1)
            loop.step(text)
            traj = loop.trajectory()
            traj.stopped = "answer" if traj.stopped == "answer" else "length"  # judge the state the reply left
            scores.append(float(bool(env.verify(traj).passed)))
        return scores

    metrics: list[dict] = []

    class Log(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            self.t = time.time()

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "reward" in logs:
                metrics.append({"step": state.global_step, "reward_mean": logs.get("reward"),
                                "zero_variance_frac": logs.get("frac_reward_zero_std"),
                                "completion_len_mean": logs.get("completions/mean_length"),
                                "step_time_s": round(time.time() - self.t, 1)})
                print(f"trl {state.global_step}: reward {logs.get('reward')} "
                      f"zero-std groups {logs.get('frac_reward_zero_std')}", flush=True)

    rows = [{"prompt": [{"role": m.role, "content": m.content} for m in ToolLoop(t, WorkplaceEnv(world)).messages],
             "task_id": t.id} for t in train]
    random.Random(0).shuffle(rows)
    work = a.work / "trl"
    shutil.rmtree(work, ignore_errors=True)
    args = GRPOConfig(
        output_dir=str(work / "out"), seed=0, num_generations=4, per_device_train_batch_size=a.grpo_batch,
        max_completion_length=a.max_new_tokens, beta=0.0, loss_type="dapo", epsilon=0.2, epsilon_high=0.28,
        learning_rate=a.grpo_lr, temperature=1.0, max_steps=steps, logging_steps=1, report_to=[], save_strategy="no",
        use_cpu=True, bf16=a.precision == "bf16-autocast", dataloader_num_workers=0,
    )
    t0 = time.time()
    trainer = GRPOTrainer(model=str(ensure_embedded_cache(full_hash=False)), reward_funcs=binary_verdict, args=args,
                          callbacks=[Log()], train_dataset=Dataset.from_list(rows[: steps * a.grpo_batch]))
    trainer.train()
    wall = time.time() - t0
    trainer.model.save_pretrained(work / "final", safe_serialization=True)
    trainer.processing_class.save_pretrained(work / "final")
    return work / "final", metrics, wall


def part_strict(a: argparse.Namespace, out: dict, data: Path, test: list, threads: int) -> None:
    from generators.task_io import read_tasks
    from training.model import load_model

    sft_dir = a.work / "sft"
    if not (sft_dir / "sft_info.json").exists():
        raise SystemExit(f"{sft_dir}: no SFT model; run --part main first")
    t_start = time.time()
    strict: dict = {"reward": "env:binary (1 if the verifier passes the episode, else 0)", "steps": a.strict_steps,
                    "pass_at_1": {}, "eval": {}, "wall_s": {}}
    out["strict_binary"] = strict
    cfg = _config(a, data, threads, "strict", "env:binary", a.strict_steps)
    st = Stage(out, test, cfg, a.eval_batch)
    t0 = time.time()
    trainer, metrics = grpo(cfg, str(sft_dir), time.time() + a.strict_ours_min * 60, 0)
    strict["ours_metrics"] = metrics
    strict["wall_s"]["ours_grpo"] = round(time.time() - t0, 1)
    strict["ours_steps_run"] = len(metrics)
    st.evaluate("ours_sft_grpo", trainer.model, trainer.tok, into=strict)
    del trainer
    train = [t for t in read_tasks(data / "train.parquet")]
    final, trl_metrics, wall = trl_binary_run(a, data, train, a.strict_steps)
    strict["trl_metrics"] = trl_metrics
    strict["wall_s"]["trl_grpo"] = round(wall, 1)
    model, tok = load_model(str(final), threads=threads)
    st.evaluate("trl_grpo", model, tok, into=strict)
    p, base = strict["pass_at_1"], out["pass_at_1"].get("base")
    zv = [m["zero_variance_frac"] for m in trl_metrics if m.get("zero_variance_frac") is not None]
    strict["trl_zero_variance_frac_mean"] = sum(zv) / len(zv) if zv else None
    strict["trl_all_groups_zero_variance"] = bool(zv) and all(z == 1.0 for z in zv)
    if base is not None:
        strict["ours_gain_points"] = round(100 * (p["ours_sft_grpo"] - base), 1)
        strict["trl_gain_points"] = round(100 * (p["trl_grpo"] - base), 1)
    strict["wall_s"]["total_strict"] = round(time.time() - t_start, 1)
    out["complete_strict"] = True
    _write(out)
    _plot(out)


def part_noise(a: argparse.Namespace, out: dict, data: Path, test: list, threads: int) -> None:
    """How far does the greedy evaluation move when the SFT model is nudged in a random direction by about what
    one Adam step moves it? Each trained weight (the layers above --freeze-layers) gets +-sigma with a random sign,
    the shape of an Adam update at learning rate sigma that carries no information, and the same 48 test tasks
    are evaluated. The spread of those scores is the resolution of this evaluation for a GRPO stage."""
    import torch

    from training.model import load_model

    sft_dir = a.work / "sft"
    if not (sft_dir / "sft_info.json").exists():
        raise SystemExit(f"{sft_dir}: no SFT model; run --part main first")
    cfg = _config(a, data, threads, "noise", "env:binary", 1)
    noise = {"sigma": a.noise_sigma, "trained_layers_from": a.freeze_layers, "sft_passed": None, "passed": {},
             "command": a.command}
    out["sft_noise_floor"] = [r for r in out.get("sft_noise_floor", []) if r["sigma"] != a.noise_sigma]
    out["sft_noise_floor"].append(noise)  # one entry per sigma
    box: dict = {}
    noise["eval"] = box
    st = Stage(out, test, cfg, a.eval_batch)
    n = len(test)
    for seed in range(1, a.noise_seeds + 1):
        model, tok = load_model(str(sft_dir), threads=threads)
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for i, layer in enumerate(model.model.layers):
                if i < a.freeze_layers:
                    continue
                for p in layer.parameters():
                    sign = torch.randint(0, 2, p.shape, generator=g, dtype=torch.int8).to(p.dtype) * 2 - 1
                    p.add_(sign, alpha=a.noise_sigma)
        st.evaluate(f"noise_seed{seed}", model, tok, into=box)
        noise["passed"][str(seed)] = round(box["pass_at_1"][f"noise_seed{seed}"] * n)
        del model
        _write(out)
    noise["sft_passed"] = round(out["pass_at_1"]["sft"] * n)
    diffs = [v - noise["sft_passed"] for v in noise["passed"].values()]
    noise["change_vs_sft"] = diffs
    noise["max_abs_change"] = max(abs(d) for d in diffs)
    _write(out)


def build_parser() -> argparse.ArgumentParser:
    """The benchmark's flags; `greedy_episode_diff.py` parses its evaluation flags with it too, so both build the
    same evaluation config from the same defaults."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=["all", "main", "strict", "noise"], default="all",
                    help="noise: the SFT model nudged by +-sigma per weight (--noise-sigma), evaluated per seed")
    ap.add_argument("--noise-sigma", type=float, default=1e-6)
    ap.add_argument("--noise-seeds", type=int, default=3)
    ap.add_argument("--work", type=Path, default=ROOT / "runs" / "learn_workplace")
    ap.add_argument("--tasks", type=int, default=600, help="tasks generated (train/validation/test split by template)")
    ap.add_argument("--tools", choices=["relevant", "all"], default="relevant",
                    help="tools in each task's prompt: its toolkits + the directory, or all 27 (WorkBench's setting)")
    ap.add_argument("--eval-tasks", type=int, default=48)
    ap.add_argument("--eval-batch", type=int, default=16)
    ap.add_argument("--sft-epochs", type=float, default=1.0)
    ap.add_argument("--sft-steps", type=int, default=None, help="optimizer steps (overrides --sft-epochs)")
    ap.add_argument("--sft-batch", type=int, default=4, help="demonstrations per batch (sharing their system prompt)")
    ap.add_argument("--sft-accum", type=int, default=2)
    ap.add_argument("--sft-lr", type=float, default=1e-4)
    ap.add_argument("--sft-minutes", type=float, default=22.0, help="SFT wall-time cap")
    ap.add_argument("--sft-length-window", type=int, default=0,
                    help="sft.pack_length_window: each run of this many packs' rows sorted by length before cutting "
                         "(less padding, so more SFT steps in the same minutes); 0: rows in shuffled order")
    ap.add_argument("--grpo-steps", type=int, default=40, help="at most; the time budget decides")
    ap.add_argument("--grpo-batch", type=int, default=8, help="episodes per step (--grpo-group per prompt)")
    ap.add_argument("--grpo-group", type=int, default=4, help="rollout.num_generations: episodes per prompt")
    ap.add_argument("--grpo-lr", type=float, default=1e-5)
    ap.add_argument("--grpo-loss", default="dapo", help="loss preset (training.losses): dapo (token-mean), grpo "
                    "(each episode weighs the same whatever its length), dr_grpo, gspo")
    ap.add_argument("--grpo-reward", choices=sorted(TRAIN_REWARDS), default="env", help="the main part's GRPO reward")
    ap.add_argument("--grpo-negative-weight", type=float, default=1.0, help="loss.negative_advantage_weight: 1 is "
                    "GRPO, 0 reinforces only the better-than-the-group samples (training.losses.weight_negative_advantages)")
    ap.add_argument("--grpo-temperature", type=float, default=1.0, help="rollout sampling temperature (the log-probs "
                    "and the loss use the same one); below 1, fewer incidental low-probability tokens are reinforced; 0 "
                    "decodes greedily (with --grpo-guidance --grpo-group 2: the greedy reply against the demonstration)")
    ap.add_argument("--grpo-lora-r", type=int, default=0, help="GRPO through LoRA adapters of this rank on every "
                    "linear module of the layers above --freeze-layers (0: full fine-tuning, as SFT)")
    ap.add_argument("--grpo-lora-alpha", type=int, default=32)
    ap.add_argument("--grpo-top-entropy", type=float, default=None, help="loss.top_entropy_fraction: train on the "
                    "highest-entropy (forking) tokens only, e.g. 0.2")
    ap.add_argument("--grpo-divergence", action="store_true", help="loss.divergence_tokens: train only on the first "
                    "token where each failed episode parts from a passed one of its group (the demonstration, with "
                    "--grpo-guidance), on both sides")
    ap.add_argument("--grpo-divergence-within", choices=["anywhere", "arguments"], default="anywhere",
                    help="loss.divergence_within (with --grpo-divergence): 'arguments' trains only the pairs whose "
                    "members part inside the arguments of the same tool's call, so no tool-name token is trained")
    ap.add_argument("--grpo-guard-per-group", type=int, default=0,
                    help="guard.per_group: hold the SFT model's passing greedy episodes on this many training tasks of "
                    "each template and keep every step only as far as they still pass (--grpo-guard-keep; 0: off)")
    ap.add_argument("--grpo-guard-keep", choices=["passes", "decisions"], default="passes",
                    help="guard.keep: 'passes' decodes an episode with a flipped decision again and keeps the step "
                    "when it still passes; 'decisions' keeps a step only when no more than --grpo-guard-max-flips "
                    "held decisions flipped")
    ap.add_argument("--grpo-guard-max-lost", type=int, default=0, help="guard.max_lost: held passes a kept step may "
                    "lose (keep: passes)")
    ap.add_argument("--grpo-guard-max-flips", type=int, default=0, help="guard.max_flips: held decisions a kept "
                    "step may flip (keep: decisions)")
    ap.add_argument("--grpo-guard-backtrack", type=int, default=3, help="guard.backtrack: halvings of a step that "
                    "flips more before it is dropped")
    ap.add_argument("--grpo-zvp-alpha", type=float, default=None, help="loss.zero_variance_alpha (RL-ZVP): train on "
                    "the zero-variance groups too, all-pass ones with +alpha x token entropy")
    ap.add_argument("--grpo-zvp-negative-alpha", type=float, default=None, help="loss.zero_variance_negative_alpha: "
                    "the all-fail groups' coefficient (default alpha; 0 trains the all-pass groups only)")
    ap.add_argument("--grpo-optimizer", choices=["adamw", "adamw-bf16", "sgd"], default="adamw-bf16",
                    help="optim.optimizer of the GRPO stage: Adam's first steps move every trained weight by lr "
                         "(sign descent), SGD's in proportion to its gradient (lr on SGD's scale)")
    ap.add_argument("--grpo-scheduler", choices=["constant", "cosine", "linear"], default="constant",
                    help="optim.scheduler of the GRPO stage: decay to 0 over --grpo-steps (set --grpo-steps to what "
                    "the budget fits, or the stage stops before its small steps)")
    ap.add_argument("--grpo-beta", type=float, default=0.0, help="loss.beta: the k3 KL penalty to the SFT model "
                    "(a frozen copy of it is loaded and run on every update's tokens when above 0)")
    ap.add_argument("--grpo-momentum", type=float, default=0.0, help="optim.momentum (sgd only)")
    ap.add_argument("--grpo-focus-max-pass", type=float, default=None,
                    help="data.focus: before the first update, greedy pass@1 of the SFT model per template on the "
                    "validation split; GRPO draws its prompts only from the templates at or below this pass rate "
                    "(off when not given)")
    ap.add_argument("--grpo-focus-probe", type=int, default=None,
                    help="data.focus.probe_per_group: probe at most N validation tasks of each template (default: "
                    "all of them)")
    ap.add_argument("--grpo-focus-mistake-from", type=int, default=0,
                    help="data.focus.mistake_from_turn (with --grpo-focus-max-pass): of the templates at or below the "
                    "bar, train only those whose failed probe episodes all made their first N replies right, so the "
                    "mistake trained comes after a correct tool call (0: every template at or below the bar)")
    ap.add_argument("--grpo-focus-mistake-kind", choices=["any", "arguments"], default="any",
                    help="data.focus.mistake_kind (with --grpo-focus-max-pass): 'arguments' trains only the templates "
                    "whose failed probe episodes all first called the right tools with other arguments")
    ap.add_argument("--grpo-retain", type=int, default=0,
                    help="data.focus.retain_per_step (with --grpo-focus-max-pass and --grpo-guidance): every step also "
                    "replays N demonstrations of the templates above the focus bar and trains the NLL of their tokens "
                    "the policy gives below --grpo-retain-below probability (0: off)")
    ap.add_argument("--grpo-retain-coef", type=float, default=1.0, help="data.focus.retain_coef")
    ap.add_argument("--grpo-retain-below", type=float, default=0.9, help="data.focus.retain_below")
    ap.add_argument("--grpo-retain-from", choices=["solved", "all"], default="solved",
                    help="data.focus.retain_from: anchor the templates above the focus bar, or every template")
    ap.add_argument("--grpo-eval-tasks", type=int, default=0,
                    help="model selection on validation (checkpoint.keep_best): greedy pass@1 of the SFT model and "
                    "of every GRPO step on the first N validation tasks; the test evaluation runs on the best of them "
                    "(a checkpoint must beat the SFT model strictly). 0: off, the last step is evaluated")
    ap.add_argument("--grpo-sft-moments", choices=["none", "both", "second"], default="none",
                    help="optim.sft_moments: AdamW starts from the moments the SFT stage ended with (saved beside the "
                    "SFT model; both, or the second only), with SFT's betas, so GRPO's updates keep SFT's per-weight "
                    "scaling; needs --grpo-optimizer adamw or adamw-bf16")
    ap.add_argument("--grpo-guidance", action="store_true", help="guidance.demonstrations: one member of each "
                    "group is the task's demonstration (demonstrations.jsonl) replayed through the environment")
    ap.add_argument("--grpo-branch", choices=["start", "first_mistake"], default="start",
                    help="guidance.branch (with --grpo-guidance): first_mistake keeps the failed episode's turns while "
                    "its calls are ones the demonstration makes, then continues with the demonstration, so the "
                    "group's two members part at the policy's first wrong call")
    ap.add_argument("--grpo-sft-coef", type=float, default=0.0, help="guidance.sft_coef (with --grpo-guidance): "
                    "add this times the token-mean NLL of every drawn task's verified demonstration to each update")
    ap.add_argument("--grpo-policy-coef", type=float, default=1.0, help="loss.policy_coef: 0 with --grpo-sft-coef "
                    "trains the supervised term alone on the same drawn tasks (the ablation of the policy gradient)")
    ap.add_argument("--ds-rounds", type=int, default=2, help="dynamic-sampling rounds per step at most")
    ap.add_argument("--freeze-layers", type=int, default=0, help="first decoder layers kept fixed (SFT and GRPO)")
    ap.add_argument("--freeze-embeddings", action="store_true", help="keep the token embeddings (tied head) fixed")
    ap.add_argument("--max-turns", type=int, default=6)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--precision", default="bf16-autocast", choices=["fp32", "bf16-autocast"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reuse-sft", action="store_true", help="main part: keep the recorded base/SFT stages and the "
                    "saved SFT model (recovering a run cut after them), run GRPO and its evaluation again; a GRPO stage already "
                    "recorded moves to `earlier_grpo_attempts`, so every attempt on the test tasks stays on record")
    ap.add_argument("--budget-min", type=float, default=58.0, help="the main part stops starting GRPO steps past this")
    ap.add_argument("--strict-steps", type=int, default=8)
    ap.add_argument("--strict-ours-min", type=float, default=12.0)
    ap.add_argument("--seed", type=int, default=0, help="the run's seed (data order and sampling; with --reuse-sft "
                    "only the GRPO stage's)")
    ap.add_argument("--result", type=Path, default=RESULT, help="the JSON written (the plot beside it, .png); "
                    "another path keeps the committed result untouched, e.g. for a sweep's runs")
    return ap


def main() -> None:
    global RESULT, PLOT
    ap = build_parser()
    a = ap.parse_args()
    if a.grpo_branch != "start" and not a.grpo_guidance:
        ap.error("--grpo-branch chooses where the demonstration that --grpo-guidance replays starts: add --grpo-guidance")
    if a.grpo_sft_coef and not a.grpo_guidance:
        ap.error("--grpo-sft-coef trains on the demonstrations that --grpo-guidance replays: add --grpo-guidance")
    if not a.grpo_policy_coef and not a.grpo_sft_coef:
        ap.error("--grpo-policy-coef 0 leaves the GRPO stage nothing to train: add --grpo-sft-coef (a supervised-only "
                 "stage) or set --grpo-policy-coef above 0")
    if a.grpo_retain and (a.grpo_focus_max_pass is None or not a.grpo_guidance):
        ap.error("--grpo-retain anchors the demonstrations (--grpo-guidance) of the templates above the focus bar "
                 "(--grpo-focus-max-pass): add both")
    if a.grpo_divergence_within != "anywhere" and not a.grpo_divergence:
        ap.error("--grpo-divergence-within narrows the tokens that --grpo-divergence trains: add --grpo-divergence")
    if a.grpo_focus_mistake_kind != "any" and a.grpo_focus_max_pass is None:
        ap.error("--grpo-focus-mistake-kind narrows the templates that --grpo-focus-max-pass chooses: add "
                 "--grpo-focus-max-pass")
    if a.grpo_focus_mistake_from and a.grpo_focus_max_pass is None:
        ap.error("--grpo-focus-mistake-from narrows the templates that --grpo-focus-max-pass chooses: add "
                 "--grpo-focus-max-pass")
    if a.grpo_eval_tasks and a.grpo_lora_r:
        ap.error("--grpo-eval-tasks evaluates the chosen checkpoint as a full model; a LoRA stage's checkpoints are "
                 "adapters: drop --grpo-lora-r or --grpo-eval-tasks")
    RESULT, PLOT = a.result, a.result.with_suffix(".png")
    os.environ["RLVR_THREADS"] = str(a.threads)

    from studio.workplace_dataset import build_dataset
    from training.model import configure_threads

    threads = configure_threads(a.threads)
    data = a.work / f"data-{a.tools}"
    if not (data / "manifest.json").exists():
        build_dataset(data, n=a.tasks, tools=a.tools)
    test = test_sample(data, a.eval_tasks)
    cmd = "RLVR_THREADS=%d .venv/bin/python benchmarks/learn_workplace.py %s" % (threads, " ".join(sys.argv[1:]))
    a.command = cmd
    if (a.part in ("strict", "noise") or a.reuse_sft) and RESULT.exists():
        out = json.loads(RESULT.read_text())
        if a.part == "strict":  # this part's stages run again
            out["command_strict"] = cmd
            out["stages_completed"] = [s for s in out.get("stages_completed", []) if not s.startswith("eval_ours")
                                       and not s.startswith("eval_trl")]
    else:
        out = {
            "benchmark": "learn_workplace", "command": cmd,
            "setup": {"model": "SmolLM2-135M-Instruct (embedded)", "tools_in_prompt": a.tools,
                      "eval": "greedy, one episode per task, the verifier's binary verdict",
                      "eval_sample": "fixed random sample (seed 0) of the test split",
                      "dynamic_sampling": True,
                      "frozen": f"embeddings {'fixed' if a.freeze_embeddings else 'trained'}, first {a.freeze_layers} "
                                "decoder layers fixed (SFT and GRPO)",
                      "sft": f"full fine-tune, shared-prefix batches of "
                      f"{a.sft_batch} x {a.sft_accum} accumulation, lr {a.sft_lr} cosine, {a.sft_epochs} epochs "
                      f"(or {a.sft_steps} steps), at most {a.sft_minutes} min"
                      + (f", rows sorted by length in windows of {a.sft_length_window} packs" if a.sft_length_window else ""),
                      **_grpo_record(a),
                      "max_turns": a.max_turns, "max_new_tokens": a.max_new_tokens, "precision": a.precision,
                      "torch_threads": threads, "cpu_count": os.cpu_count()},
            "eval_tasks": len(test), "eval_categories": {}, "pass_at_1": {}, "eval": {}, "wall_s": {},
            "stages_completed": [], "complete_main": False,
        }
        for t in test:
            out["eval_categories"][t.metadata["category"]] = out["eval_categories"].get(t.metadata["category"], 0) + 1
    _write(out)
    if a.part in ("all", "main"):
        part_main(a, out, data, test, threads)
    if a.part in ("all", "strict"):
        part_strict(a, out, data, test, threads)
    if a.part == "noise":
        part_noise(a, out, data, test, threads)
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    _write(out)
    print(json.dumps({k: out.get(k) for k in ("pass_at_1", "gain_points", "grpo_over_sft_points", "wall_s")}, indent=1))


if __name__ == "__main__":
    main()
