"""Our GRPO trainer vs TRL 1.16's GRPOTrainer on the same run, side by side, each in its own subprocess.

Same run: SmolLM2-135M-Instruct (the embedded model), the same arithmetic prompts in the same order, the same
reward (examples/arithmetic/reward.py:tagged_answer_shaped), seed 0, num_generations 4, 2 prompts per step,
max completion 48 tokens, beta 0, DAPO loss (token-mean, clip 0.2/0.28), learning rate 1e-6, temperature 1.0,
1 torch thread, 10 steps each, no dynamic sampling (TRL has none), TRL otherwise at its defaults.

Step time is wall time per optimizer step including generation and scoring (TRL: a callback's begin/end; ours:
the trainer's `step_time_s`); peak RSS is the subprocess's own `ru_maxrss`. Writes
benchmarks/results/grpo_vs_trl.json (atomically) with `step_time_ratio` and `peak_rss_ratio` (ours / TRL).

    .venv/bin/python benchmarks/grpo_vs_trl.py            # both engines, ~5 minutes on one core
    .venv/bin/python benchmarks/grpo_vs_trl.py --steps 3  # quicker look
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULT = ROOT / "benchmarks" / "results" / "grpo_vs_trl.json"
TASKS = ROOT / "examples" / "arithmetic" / "tasks.jsonl"
REWARD = f"{ROOT / 'examples' / 'arithmetic' / 'reward.py'}:tagged_answer_shaped"
G, PROMPTS, MAX_TOKENS, LR, SEED = 4, 2, 48, 1e-6, 0


def _prompts(n: int) -> list[dict]:
    """The first n train tasks in a fixed order (both engines see exactly these, in this order)."""
    from generators.task_io import read_tasks

    tasks = [t for t in read_tasks(TASKS) if t.split == "train"][:n]
    return [{"prompt": [m.model_dump(exclude_none=True) for m in t.prompt], "answer": t.answer, "id": t.id}
            for t in tasks]


def run_ours(steps: int, out: Path, precision: str = "fp32") -> dict:
    from training.config_io import parse_train_config
    from training.grpo import GRPOTrainer
    from training.model import configure_threads

    configure_threads(1)
    work = Path(tempfile.mkdtemp(prefix="bench-ours-"))
    rows = _prompts(steps * PROMPTS)
    from generators.task_io import write_tasks
    from schemas.task import TaskRow

    data = work / "tasks.jsonl"
    write_tasks([TaskRow(id=r["id"], prompt=r["prompt"], answer=r["answer"]) for r in rows], data)
    cfg = parse_train_config({
        "name": "bench-ours", "seed": SEED, "output_dir": str(work / "run"), "threads": 1, "steps": steps,
        "batch_size": G * PROMPTS, "model": {"precision": "bf16-autocast" if precision != "fp32" else "fp32"}, "data": {"path": str(data), "split": "train", "shuffle": False},
        "reward": {"function": REWARD, "allow_unaudited": True},
        "rollout": {"num_generations": G, "max_new_tokens": MAX_TOKENS, "temperature": 1.0},
        "loss": {"type": "dapo", "epsilon_low": 0.2, "epsilon_high": 0.28, "beta": 0.0},
        "dynamic_sampling": {"enabled": False}, "optim": {"lr": LR, "betas": [0.9, 0.999], "weight_decay": 0.0,
                  "optimizer": "adamw-bf16" if precision == "lean" else "adamw"},
        "checkpoint": {"every": 10_000, "save_optimizer": False},
    })
    from training.scoring import load_reward

    times, lens, rewards = [], [], []

    def on_step(rec: dict) -> None:
        times.append(rec["step_time_s"])
        lens.append(rec.get("completion_len_mean", 0.0))
        rewards.append(rec.get("reward_mean", 0.0))
        print(f"ours step {rec['step']}: {rec['step_time_s']:.2f}s", flush=True)

    trainer = GRPOTrainer(cfg, reward=load_reward(REWARD), on_step=on_step)
    trainer.save = lambda: None  # no checkpoint writes inside the timed run (TRL's save_strategy is "no")
    t0 = time.time()
    trainer.train()
    return {"engine": "ours", "precision": precision, "step_times_s": times, "completion_len_mean": lens, "reward_mean": rewards,
            "wall_s": time.time() - t0, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def run_trl(steps: int, out: Path, precision: str = "fp32") -> dict:
    import torch

    torch.set_num_threads(1)
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from training.model import ensure_embedded_cache
    from training.scoring import load_reward, score_one

    reward = load_reward(REWARD)
    rows = _prompts(steps * PROMPTS)

    def reward_fn(completions, answer, **_):
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        return [score_one(reward.fn, t, {"answer": a}).score for t, a in zip(texts, answer)]

    times, lens, rewards = [], [], []

    class Timer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            self.t = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            times.append(time.perf_counter() - self.t)
            print(f"trl step {state.global_step}: {times[-1]:.2f}s", flush=True)

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "completions/mean_length" in logs:
                lens.append(logs["completions/mean_length"])
                rewards.append(logs.get("reward", 0.0))

    work = Path(tempfile.mkdtemp(prefix="bench-trl-"))
    args = GRPOConfig(
        output_dir=str(work), seed=SEED, num_generations=G, per_device_train_batch_size=G * PROMPTS,
        max_completion_length=MAX_TOKENS, beta=0.0, loss_type="dapo", epsilon=0.2, epsilon_high=0.28,
        learning_rate=LR, temperature=1.0, max_steps=steps, logging_steps=1, report_to=[], save_strategy="no",
        use_cpu=True, bf16=precision != "fp32", shuffle_dataset=False, dataloader_num_workers=0,
    )
    model_dir = str(ensure_embedded_cache(full_hash=False))
    trainer = GRPOTrainer(model=model_dir, reward_funcs=reward_fn, args=args, callbacks=[Timer()],
                          train_dataset=Dataset.from_list([{"prompt": r["prompt"], "answer": r["answer"]} for r in rows]))
    t0 = time.time()
    trainer.train()
    return {"engine": "trl", "precision": precision, "step_times_s": times, "completion_len_mean": lens, "reward_mean": rewards,
            "wall_s": time.time() - t0, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "trl_gradient_checkpointing": bool(args.gradient_checkpointing)}


def _summary(r: dict) -> dict:
    t = r["step_times_s"]
    return {
        **r,
        "step_time_mean_s": statistics.mean(t),
        "step_time_median_s": statistics.median(t),
        "step_time_mean_after_first_s": statistics.mean(t[1:]) if len(t) > 1 else t[0],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--engine", choices=["ours", "trl"], help="(internal) run one engine and print its JSON")
    ap.add_argument("--out", type=Path, default=RESULT)
    ap.add_argument("--precision", choices=["fp32", "bf16-autocast", "lean"], default="fp32")
    ap.add_argument("--ours-precisions", default="lean,fp32", help="our variants, each run side by side with TRL")
    a = ap.parse_args()
    if a.engine:
        res = (run_ours if a.engine == "ours" else run_trl)(a.steps, a.out, a.precision)
        print("RESULT " + json.dumps(res), flush=True)
        return
    env = {**os.environ, "RLVR_THREADS": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}

    def run_pair(ours_precision: str) -> dict:
        """Ours and TRL at the same time, one process each (one torch thread each): whatever else loads the
        machine loads both alike."""
        t0 = time.time()
        procs = {}
        for engine, prec in (("ours", ours_precision), ("trl", "fp32")):
            procs[engine] = subprocess.Popen(
                [sys.executable, __file__, "--engine", engine, "--steps", str(a.steps), "--precision", prec],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        res = {}
        for engine, proc in procs.items():
            out, err = proc.communicate()
            lines = [l for l in out.splitlines() if l.startswith("RESULT ")]
            if proc.returncode != 0 or not lines:
                sys.stderr.write(out[-4000:] + err[-4000:])
                raise SystemExit(f"{engine} run failed with exit code {proc.returncode}")
            res[engine] = _summary(json.loads(lines[-1][7:]))
            print(f"{engine} ({res[engine]['precision']}): {res[engine]['step_time_mean_s']:.2f} s/step, "
                  f"peak RSS {res[engine]['peak_rss_mb']:.0f} MB ({time.time() - t0:.0f} s)", flush=True)
        return res

    pairs: dict = {}
    for prec in a.ours_precisions.split(","):
        pairs[prec] = run_pair(prec)
        _write_result(a, pairs)  # after every pair, so a run cut short keeps what it measured


def _write_result(a: argparse.Namespace, pairs: dict) -> None:
    head = pairs[a.ours_precisions.split(",")[0]]
    ours, trl = head["ours"], head["trl"]
    out = {
        "benchmark": "grpo_vs_trl",
        "command": f".venv/bin/python benchmarks/grpo_vs_trl.py --steps {a.steps} --ours-precisions {a.ours_precisions}",
        "setup": {"model": "SmolLM2-135M-Instruct (embedded)", "num_generations": G, "prompts_per_step": PROMPTS,
                  "max_completion_tokens": MAX_TOKENS, "beta": 0.0, "loss": "dapo", "epsilon": [0.2, 0.28],
                  "lr": LR, "steps": a.steps, "torch_threads": 1, "reward": "tagged_answer_shaped",
                  "cpu_count": os.cpu_count(), "run": "ours and TRL concurrently, one process and one thread each",
                  "ours_headline": ("lean = bf16 autocast compute + bf16 Adam moments (fp32 weights); "
                                    "fp32 = everything fp32" ),
                  "trl": "TRL 1.16 GRPOTrainer at its defaults otherwise (fp32 on CPU, gradient checkpointing on)"},
        "step_time_ratio": ours["step_time_mean_s"] / trl["step_time_mean_s"],
        "step_time_ratio_median": ours["step_time_median_s"] / trl["step_time_median_s"],
        "peak_rss_ratio": ours["peak_rss_mb"] / trl["peak_rss_mb"],
        "ours": ours,
        "trl": trl,
        "pairs": {p: {"step_time_ratio": v["ours"]["step_time_mean_s"] / v["trl"]["step_time_mean_s"],
                      "peak_rss_ratio": v["ours"]["peak_rss_mb"] / v["trl"]["peak_rss_mb"],
                      "ours": v["ours"], "trl": v["trl"]} for p, v in pairs.items()},
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "pairs_completed": list(pairs),
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = a.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=1))
    os.replace(tmp, a.out)
    print(json.dumps({k: out[k] for k in ("step_time_ratio", "step_time_ratio_median", "peak_rss_ratio")}))


if __name__ == "__main__":
    main()
