"""Demo stage: a short SFT warm start and DAPO run on the embedded model, with greedy pass@1 before and after.

The task is the single-turn arithmetic example (examples/configs/arithmetic.yaml, strict tagged-answer reward, each
group 3 samples + the task's demonstration: `guidance.demonstrations`),
because a multi-turn workplace run does not fit a demo's minutes on a CPU; `rlvr train
examples/configs/workplace.yaml` is the same trainer on the workplace environment. With `--quick` the model is
the tiny random-initialised one (the CI config), so the stage only proves the plumbing.
"""

from __future__ import annotations

from pathlib import Path

ORDER = 40
TITLE = "training (SFT + DAPO)"

ROOT = Path(__file__).resolve().parents[2]


def run(ctx) -> dict:
    from generators.task_io import read_tasks
    from studio.demo import StageFailed
    from training.config_io import ConfigError, load_train_config
    from training.grpo import GRPOTrainer, TrainingError
    from training.model import load_model
    from training.policy import load_policy
    from training.scoring import load_reward
    from training.sft import run_sft
    from training.train_eval import greedy_pass_at_1

    import shutil

    out = ctx.out / "train"
    shutil.rmtree(out / "checkpoints", ignore_errors=True)  # a demo run starts fresh (no resume of an old demo)
    (out / "metrics.jsonl").unlink(missing_ok=True)
    cfg_path = ROOT / "examples" / "configs" / ("tiny.yaml" if ctx.quick else "arithmetic.yaml")
    try:
        cfg = load_train_config(cfg_path)
    except ConfigError as exc:
        raise StageFailed(str(exc)) from exc
    demos = str(ROOT / "examples" / "arithmetic" / "demonstrations.jsonl")
    sft = (cfg.sft or None)
    if sft is None:
        from schemas.train_config import SFTSection

        sft = SFTSection(data_path=demos, max_steps=2, batch_size=4, max_length=128, lr=1e-3)
    cfg = cfg.model_copy(update={
        "output_dir": str(out), "steps": 2 if ctx.quick else 6, "sft": sft,
        "eval_every": None, "checkpoint": cfg.checkpoint.model_copy(update={"every": 1000}),
    })
    tasks = [t for t in read_tasks(cfg.data.path) if t.split == (cfg.data.eval_split or "test")]
    tasks = tasks[: 4 if ctx.quick else 32]
    reward = load_reward(cfg.reward.function)
    ans_reward = load_reward(str(ROOT / "examples" / "arithmetic" / "reward.py") + ":tagged_answer")

    model, tok = load_policy(cfg.model, seed=cfg.seed, threads=cfg.threads)
    with ctx.console.status(f"pass@1 of the starting model on {len(tasks)} held-out tasks"):
        before = greedy_pass_at_1(model, tok, cfg, tasks, reward=ans_reward)
    with ctx.console.status(f"SFT warm start ({cfg.sft.max_steps} steps on demonstrations)"):
        sft_dir = run_sft(cfg, model=model, tokenizer=tok)
    model, tok = load_model(str(sft_dir), threads=cfg.threads)
    with ctx.console.status(f"pass@1 after SFT"):
        after_sft = greedy_pass_at_1(model, tok, cfg, tasks, reward=ans_reward)
    steps: list[dict] = []

    def on_step(rec: dict) -> None:
        steps.append(rec)
        ctx.console.print(f"  step {rec['step']}: reward {rec.get('reward_mean', 0):.3f}, pass rate "
                          f"{rec.get('pass_rate', 0):.2f}, groups kept {int(rec.get('groups_kept', 0))}/"
                          f"{int(rec.get('groups_sampled', 0))}, {rec['step_time_s']:.1f}s", highlight=False)

    try:
        trainer = GRPOTrainer(cfg, model=model, tokenizer=tok, reward=reward, init_from=str(sft_dir), on_step=on_step)
        result = trainer.train()
    except TrainingError as exc:
        raise StageFailed(f"training stopped: {exc}") from exc
    with ctx.console.status("pass@1 after SFT + DAPO"):
        after = greedy_pass_at_1(trainer.model, trainer.tok, cfg, tasks, reward=ans_reward)
    ctx.console.print(f"pass@1: base {before['pass_at_1']:.2f} -> SFT {after_sft['pass_at_1']:.2f} -> "
                      f"SFT+DAPO {after['pass_at_1']:.2f} on {len(tasks)} held-out tasks", highlight=False)
    ctx.state["checkpoint"] = str(result.final_checkpoint) if result.final_checkpoint else str(sft_dir)
    return {
        "config": str(cfg_path.relative_to(ROOT)),
        "pass@1 before": round(before["pass_at_1"], 3),
        "pass@1 after SFT": round(after_sft["pass_at_1"], 3),
        "pass@1 after SFT + DAPO": round(after["pass_at_1"], 3),
        "held-out tasks": len(tasks),
        "GRPO steps": result.steps,
        "checkpoint": ctx.state["checkpoint"],
        "metrics": str(result.metrics_path),
        "plot": str(result.plot_path),
    }
