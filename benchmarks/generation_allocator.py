"""Generation inside the GRPO trainer's process, with and without the generation settings of
`training.generation_amp.generating`, side by side.

    RLVR_THREADS=2 .venv/bin/python benchmarks/generation_allocator.py [--model DIR] [--tasks 16]
    # writes benchmarks/results/generation_allocator.json

Why: the trainer fixes glibc's mmap threshold at 1 MiB to keep the update's resident memory lean
(`training.memory.lean_allocator`); it also freezes the embeddings and lower layers on the workplace benchmark. A
decode loop under those settings maps, faults in and unmaps its few-MB tensors at every token, and autocast casts
the frozen weights again at every token (its cache keeps only casts of weights that require grad). The learn_workplace
run showed the symptom: the trained model's evaluation took 400 s where the same tasks took 210 s on a freshly
loaded model.

Each arm runs in its own process, the workplace trainer set up as learn_workplace sets it up (bf16 autocast,
embeddings and 10 layers frozen, DAPO, 8 episodes per step): a greedy evaluation of `--tasks` test episodes through
`training.train_eval.greedy_pass_at_1`, one GRPO step (its rollout time), and the evaluation again. "stock" is what
ran before: the lean allocator throughout and plain `torch.autocast`. The two arms must reach the same verdicts.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULT = ROOT / "benchmarks" / "results" / "generation_allocator.json"


def _usage() -> tuple[float, float, int]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime, r.ru_minflt


def arm(name: str, model: str, data: Path, work: Path, n_tasks: int, threads: int) -> dict:
    """One arm, in this process: evaluation, one GRPO step, evaluation."""
    import torch

    import training.multiturn as mt
    from generators.task_io import read_tasks
    from training.config_io import parse_train_config
    from training.grpo import GRPOTrainer
    from training.model import configure_threads
    from training.train_eval import greedy_pass_at_1

    if name == "stock":
        @contextmanager
        def stock(model_: torch.nn.Module, bf16: bool):  # what the sampling loops ran before
            was_training = model_.training
            model_.eval()
            try:
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                    yield
            finally:
                model_.train(was_training)

        mt.generating = stock
    configure_threads(threads)
    cfg = parse_train_config({
        "name": f"gen-alloc-{name}", "seed": 0, "output_dir": str(work / name), "threads": threads, "steps": 1,
        "batch_size": 8, "model": {"name": "default", "precision": "bf16-autocast", "freeze_embeddings": True,
                                   "freeze_layers": 10},
        "data": {"path": str(data), "split": "train"}, "reward": {"function": "env", "allow_unaudited": True},
        "rollout": {"environment": "workplace", "num_generations": 4, "max_turns": 6, "max_new_tokens": 128,
                    "max_total_tokens": 3072, "temperature": 1.0},
        "loss": {"type": "dapo"}, "dynamic_sampling": {"enabled": True, "max_rounds": 2},
        "optim": {"lr": 5e-6, "optimizer": "adamw-bf16", "micro_batch_size": 4},
        "checkpoint": {"every": 1000, "keep": 1},
    })
    test = read_tasks(data / "test.parquet")
    random.Random(0).shuffle(test)
    test = sorted(test[:n_tasks], key=lambda t: (t.metadata["category"], t.id))
    trainer = GRPOTrainer(cfg, init_from=model)
    trainer._setup()
    out: dict = {"arm": name}

    def evaluate(label: str) -> None:
        u0, s0, f0 = _usage()
        t0 = time.perf_counter()
        r = greedy_pass_at_1(trainer.model, trainer.tok, cfg, test, batch=len(test))
        u1, s1, f1 = _usage()
        out[label] = {"wall_s": round(time.perf_counter() - t0, 2), "user_s": round(u1 - u0, 1),
                      "sys_s": round(s1 - s0, 1), "minor_faults": f1 - f0, "passed_ids": sorted(r["passed_ids"]),
                      "fail_reasons": r["fail_reasons"]}
        print(name, label, {k: v for k, v in out[label].items() if k != "passed_ids"}, flush=True)

    evaluate("eval_before_step")
    rec = trainer.train_step()
    out["grpo_step"] = {k: rec.get(k) for k in ("gen_time_s", "train_time_s", "step_time_s", "peak_rss_mb",
                                                "rss_after_rollout_mb", "reward_mean", "completion_len_mean")}
    print(name, "grpo step", out["grpo_step"], flush=True)
    evaluate("eval_after_step")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="default", help="the policy to start from (learn_workplace's SFT model: "
                    "<work>/sft)")
    ap.add_argument("--data", type=Path, default=None, help="a workplace dataset folder (default: build 300 tasks)")
    ap.add_argument("--tasks", type=int, default=16)
    ap.add_argument("--work", type=Path, default=ROOT / "runs" / "generation_allocator")
    ap.add_argument("--arm", choices=["stock", "ours"], help=argparse.SUPPRESS)
    a = ap.parse_args()
    threads = int(os.environ.get("RLVR_THREADS", "2"))
    data = a.data or a.work / "data"
    if a.arm:
        res = arm(a.arm, a.model, data, a.work, a.tasks, threads)
        (a.work / f"{a.arm}.json").write_text(json.dumps(res))
        return
    if not (data / "manifest.json").exists():
        from studio.workplace_dataset import build_dataset

        build_dataset(data, n=300, tools="relevant")
    runs = {}
    for name in ("stock", "ours"):  # separate processes: the allocator's state is per process
        subprocess.run([sys.executable, __file__, "--arm", name, "--model", a.model, "--data", str(data),
                        "--tasks", str(a.tasks), "--work", str(a.work)], check=True)
        runs[name] = json.loads((a.work / f"{name}.json").read_text())
    s, o = runs["stock"], runs["ours"]
    result = {
        "benchmark": "generation_allocator",
        "command": "RLVR_THREADS=%d .venv/bin/python benchmarks/generation_allocator.py %s" % (threads, " ".join(sys.argv[1:])),
        "setup": {"model": a.model, "episodes": a.tasks, "threads": threads, "precision": "bf16-autocast",
                  "frozen": "embeddings (tied head) and 10 of 30 layers", "machine": platform.processor() or platform.machine(),
                  "cpu_count": os.cpu_count()},
        "runs": runs,
        "same_verdicts": all(s[k]["passed_ids"] == o[k]["passed_ids"] for k in ("eval_before_step", "eval_after_step")),
        "eval_time_ratio_before_step": round(o["eval_before_step"]["wall_s"] / s["eval_before_step"]["wall_s"], 3),
        "eval_time_ratio_after_step": round(o["eval_after_step"]["wall_s"] / s["eval_after_step"]["wall_s"], 3),
        "rollout_time_ratio": round(o["grpo_step"]["gen_time_s"] / s["grpo_step"]["gen_time_s"], 3),
        "peak_rss_ratio": round(o["grpo_step"]["peak_rss_mb"] / s["grpo_step"]["peak_rss_mb"], 3),
    }
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    tmp = RESULT.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1))
    os.replace(tmp, RESULT)
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=1))


if __name__ == "__main__":
    main()
