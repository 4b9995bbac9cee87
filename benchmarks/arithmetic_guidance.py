"""Single-turn demonstration guidance, measured: DAPO from one SFT model, with and without `guidance.demonstrations`.

    .venv/bin/python benchmarks/arithmetic_guidance.py [--steps 12] [--seeds 0 1] [--result OUT.json]

The embedded model on the arithmetic example (examples/configs/arithmetic.yaml: strict tagged-answer reward, DAPO,
2 prompts x 4 completions per step, AdamW; its guidance section is set per arm here): one SFT warm start, then for
each seed two GRPO runs from it side by side -- plain groups of 4 sampled completions, and guided groups of 3
sampled + the task's demonstration scored by the same reward -- each evaluated by greedy pass@1 on all 100 held-out
test tasks. Why: a group whose 4 samples all fail is zero-variance and dropped; with guidance it holds the
demonstration and trains toward it. The JSON
(written after every run, atomically) holds the SFT model's pass@1, each run's pass@1, per-step metrics and wall
time, and the guided-minus-plain difference per seed; a plot sits beside it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CONFIG = ROOT / "examples" / "configs" / "arithmetic.yaml"
DEMOS = ROOT / "examples" / "arithmetic" / "demonstrations.jsonl"
RESULT = ROOT / "benchmarks" / "results" / "arithmetic_guidance.json"


def write(path: Path, out: dict) -> None:
    from generators.task_io import atomic_write_bytes

    atomic_write_bytes(path, (json.dumps(out, indent=1) + "\n").encode())


def plot(path: Path, out: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    names = ["SFT"] + [f"{r['arm']}\nseed {r['seed']}" for r in out["runs"]]
    values = [out["sft_pass_at_1"]] + [r["pass_at_1"] for r in out["runs"]]
    colors = ["#999999"] + ["#2a9d8f" if r["arm"] == "guided" else "#e76f51" for r in out["runs"]]
    ax.bar(names, [100 * v for v in values], color=colors)
    ax.set_ylabel("greedy pass@1 (%)")
    ax.set_title(f"arithmetic, {out['eval_tasks']} held-out tasks, {out['steps']} DAPO steps from one SFT model",
                 fontsize=9)
    ax.tick_params(axis="x", labelsize=7)
    fig.tight_layout()
    fig.savefig(path.with_suffix(".png"), dpi=110)
    plt.close(fig)


def grpo_run(cfg: Any, sft_dir: Path, out_dir: Path, seed: int, guided: bool) -> tuple[Any, list[dict], float]:
    from training.grpo import GRPOTrainer
    from training.model import load_model

    run_cfg = cfg.model_copy(update={
        "seed": seed, "output_dir": str(out_dir), "sft": None, "eval_every": None,
        "guidance": cfg.guidance.model_copy(update={"demonstrations": str(DEMOS) if guided else None}),
        "checkpoint": cfg.checkpoint.model_copy(update={"every": 1000}),
    })
    model, tok = load_model(str(sft_dir), threads=cfg.threads)
    steps: list[dict] = []

    def on_step(rec: dict) -> None:
        steps.append({k: rec[k] for k in ("step", "reward_mean", "pass_rate", "groups_kept", "groups_sampled",
                                          "zero_variance_frac", "step_time_s", "demo_pass_rate") if k in rec})
        print(f"  {'guided' if guided else 'plain'} seed {seed} step {rec['step']}: pass rate "
              f"{rec.get('pass_rate', 0):.2f}, kept {int(rec.get('groups_kept', 0))}/{int(rec.get('groups_sampled', 0))}"
              f", {rec['step_time_s']:.1f}s", flush=True)

    t0 = time.time()
    trainer = GRPOTrainer(run_cfg, model=model, tokenizer=tok, init_from=str(sft_dir), on_step=on_step)
    trainer.train()
    return trainer, steps, time.time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--work", type=Path, default=Path("/tmp/arithmetic_guidance"))
    ap.add_argument("--reuse-sft", action="store_true", help="keep WORK/sft when it is there")
    ap.add_argument("--result", type=Path, default=RESULT)
    a = ap.parse_args()

    from generators.task_io import read_tasks
    from training.config_io import load_train_config
    from training.model import load_model
    from training.policy import load_policy
    from training.scoring import load_reward
    from training.sft import run_sft
    from training.train_eval import greedy_pass_at_1

    cfg = load_train_config(CONFIG).model_copy(update={"steps": a.steps})
    test = [t for t in read_tasks(cfg.data.path) if t.split == (cfg.data.eval_split or "test")]
    strict = load_reward(str(ROOT / "examples" / "arithmetic" / "reward.py") + ":tagged_answer")
    out: dict[str, Any] = {
        "benchmark": "arithmetic_guidance",
        "command": ".venv/bin/python benchmarks/arithmetic_guidance.py " + " ".join(sys.argv[1:]),
        "config": str(CONFIG.relative_to(ROOT)), "steps": a.steps, "eval_tasks": len(test),
        "arms": {"plain": "4 sampled completions per prompt", "guided": "3 sampled + the task's demonstration "
                 "(guidance.demonstrations), scored by the same strict reward"},
        "runs": [],
    }
    sft_dir = a.work / "sft"
    t0 = time.time()
    if not (a.reuse_sft and (sft_dir / "sft_info.json").exists()):
        model, tok = load_policy(cfg.model, seed=cfg.seed, threads=cfg.threads)
        run_sft(cfg, model=model, tokenizer=tok, out_dir=sft_dir)
    out["sft_s"] = round(time.time() - t0, 1)
    model, tok = load_model(str(sft_dir), threads=cfg.threads)
    out["sft_pass_at_1"] = greedy_pass_at_1(model, tok, cfg, test, reward=strict)["pass_at_1"]
    print(f"SFT: pass@1 {out['sft_pass_at_1']:.3f} on {len(test)} tasks", flush=True)
    write(a.result, out)
    for seed in a.seeds:
        for arm in ("plain", "guided"):
            trainer, steps, secs = grpo_run(cfg, sft_dir, a.work / f"{arm}-{seed}", seed, arm == "guided")
            r = greedy_pass_at_1(trainer.model, trainer.tok, cfg, test, reward=strict)
            out["runs"].append({"arm": arm, "seed": seed, "pass_at_1": r["pass_at_1"], "passed": r["passed"],
                                "fail_reasons": r.get("fail_reasons"), "train_s": round(secs, 1), "metrics": steps})
            print(f"{arm} seed {seed}: pass@1 {r['pass_at_1']:.3f} ({secs:.0f}s)", flush=True)
            write(a.result, out)
    by = {(r["arm"], r["seed"]): r["pass_at_1"] for r in out["runs"]}
    out["guided_minus_plain_points"] = {str(s): round(100 * (by[("guided", s)] - by[("plain", s)]), 1)
                                        for s in a.seeds}
    mean = {arm: sum(by[(arm, s)] for s in a.seeds) / len(a.seeds) for arm in ("plain", "guided")}
    out["mean_pass_at_1"] = mean
    write(a.result, out)
    plot(a.result, out)
    print(json.dumps({k: out[k] for k in ("sft_pass_at_1", "mean_pass_at_1", "guided_minus_plain_points")}))


if __name__ == "__main__":
    main()
