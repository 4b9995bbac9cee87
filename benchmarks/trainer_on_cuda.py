"""The trainer on a CUDA device: SFT, then demonstration-guided GRPO through the workplace tool loop, killed
after its first steps and resumed, all on the GPU.

Why: the CPU is the default and CI's machine, but `model.device: auto` puts the same config on a GPU when torch
sees one. Nothing in CI can check that path, so this runs the whole loop there and records what a user would
look at: where the policy lived at each stage (a fresh model, the SFT model, a resumed checkpoint), that the
trained log-probs still match the ones recorded at generation (`logprob_gen_gap`), pass rates, and speed.

Only the tokenizer travels (a folder with tokenizer.json and config.json): the policy is a random-initialised
model of SmolLM2-135M's shape, so the timings are the real model's size. Writes the JSON atomically.

    python benchmarks/trainer_on_cuda.py --tokenizer TOKENIZER_FOLDER --out benchmarks/results/trainer_on_cuda.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# SmolLM2-135M-Instruct's shape (its config.json), so that step times are those of the embedded model's size
SMOLLM2_135M = {"hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30, "num_attention_heads": 9,
                "num_key_value_heads": 3, "max_position_embeddings": 8192, "rope_theta": 100000.0}


def workplace_config(work: Path, tokenizer: str, a: argparse.Namespace) -> dict[str, Any]:
    """SFT + guided GRPO on the workplace tasks, learn_workplace's recipe at a GPU's batch size."""
    data = work / "data"
    return {
        "name": "workplace-cuda", "seed": 0, "output_dir": str(work / "run"), "steps": a.steps,
        "batch_size": a.batch, "threads": 4,
        "model": {"init": "random", "tokenizer": tokenizer, "architecture": a.architecture,
                  "precision": "bf16-autocast", "device": a.device, "freeze_embeddings": True,
                  "freeze_layers": a.freeze_layers},
        "data": {"path": str(data), "split": "train"},
        "reward": {"function": "env:binary", "allow_unaudited": True},
        "rollout": {"environment": "workplace", "num_generations": 2, "max_turns": 6, "max_new_tokens": 128,
                    "max_total_tokens": 2600, "temperature": 1.0},
        "guidance": {"demonstrations": str(data / "demonstrations.jsonl")},
        "loss": {"type": "dapo"},
        "dynamic_sampling": {"enabled": True, "max_rounds": 2},
        "optim": {"lr": 0.1 if a.optimizer == "sgd" else 1e-5, "optimizer": a.optimizer,
                  "micro_batch_size": min(16, a.batch)},
        "sft": {"data_path": str(data / "demonstrations.jsonl"), "max_steps": a.sft_steps, "lr": 1e-3,
                "batch_size": 8, "max_length": 2600, "shared_prefix": True},
        "checkpoint": {"every": 1, "keep": 2},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", required=True, help="a folder with the SmolLM2 tokenizer and a config.json")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "trainer_on_cuda.json"))
    ap.add_argument("--work", default="/tmp/trainer_on_cuda")
    ap.add_argument("--tasks", type=int, default=300)
    ap.add_argument("--sft-steps", type=int, default=60)
    ap.add_argument("--steps", type=int, default=4, help="GRPO steps: all but the last in a first run, then resumed")
    ap.add_argument("--batch", type=int, default=32, help="episodes per GRPO step (2 per prompt)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: a quick look at the script itself")
    ap.add_argument("--freeze-layers", type=int, default=10, help="as learn_workplace: the lower 10 of 30 fixed")
    ap.add_argument("--optimizer", choices=("sgd", "adamw-bf16", "adamw"), default="sgd",
                    help="GRPO's optimizer (optim.optimizer): sgd as learn_workplace's guided stage, or the default "
                    "adamw-bf16, whose moments and rounding noise must live on the GPU too")
    ap.add_argument("--architecture", type=json.loads, default=SMOLLM2_135M, help="the random model's shape (JSON)")
    a = ap.parse_args()

    import torch
    import transformers

    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("trainer_on_cuda: torch sees no CUDA device here; run it on a machine with a GPU")
    from generators.task_io import atomic_write_bytes
    from studio.workplace_dataset import build_dataset
    from training.config_io import parse_train_config
    from training.grpo import GRPOTrainer
    from training.policy import load_policy
    from training.sft import run_sft

    work = Path(a.work)
    t0 = time.perf_counter()
    manifest = build_dataset(work / "data", n=a.tasks, tools="relevant")
    out: dict[str, Any] = {
        "benchmark": "trainer_on_cuda", "command": " ".join(["python"] + sys.argv),
        "device": torch.cuda.get_device_name(0) if a.device == "cuda" else platform.processor() or "cpu",
        "torch": torch.__version__, "transformers": transformers.__version__,
        "python": platform.python_version(), "policy": "random-initialised, SmolLM2-135M's shape, SmolLM2 tokenizer",
        "optimizer": a.optimizer, "tasks": manifest["n_tasks"], "dataset_s": round(time.perf_counter() - t0, 1),
    }
    cfg = parse_train_config(workplace_config(work, a.tokenizer, a), where="trainer_on_cuda")
    fresh, _ = load_policy(cfg.model, seed=cfg.seed)
    out["fresh_policy_device"] = str(next(fresh.parameters()).device)
    del fresh

    logs: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    sft_dir = run_sft(cfg, on_log=logs.append)
    out["sft"] = {"steps": a.sft_steps, "wall_s": round(time.perf_counter() - t0, 1),
                  "first_loss": next((x["loss"] for x in logs if "loss" in x), None),
                  "last_loss": next((x["loss"] for x in reversed(logs) if "loss" in x), None)}

    steps: list[dict[str, Any]] = []
    keys = ("step", "step_time_s", "tokens_per_s", "pass_rate", "demo_pass_rate", "groups_kept", "groups_sampled",
            "logprob_gen_gap", "entropy", "grad_norm", "loss")

    def keep(record: dict[str, Any]) -> None:
        steps.append({k: record[k] for k in keys if k in record})

    first = GRPOTrainer(cfg, init_from=str(sft_dir), on_step=keep, stop_after=a.steps - 1)
    first.train()
    out["grpo_policy_device"] = str(next(first.model.parameters()).device)
    del first
    if a.device == "cuda":
        torch.cuda.empty_cache()
    second = GRPOTrainer(cfg, init_from=str(sft_dir), on_step=keep)  # a restart: resumes from the last checkpoint
    result = second.train()
    out["resumed_from"] = str(result.resumed_from) if result.resumed_from else None
    out["resumed_policy_device"] = str(next(second.model.parameters()).device)
    out["grpo_steps"] = steps
    if a.device == "cuda":
        out["peak_gpu_memory_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    gaps = [s["logprob_gen_gap"] for s in steps if "logprob_gen_gap" in s]
    out["checks"] = {
        "every_stage_on_the_device": all(out[k].startswith(a.device) for k in
                                   ("fresh_policy_device", "grpo_policy_device", "resumed_policy_device")),
        "resumed_from_checkpoint": out["resumed_from"] is not None and [s["step"] for s in steps] == list(range(1, a.steps + 1)),
        "sft_loss_fell": (out["sft"]["last_loss"] or 1e9) < (out["sft"]["first_loss"] or 0),
        "logprob_gen_gap_max": max(gaps) if gaps else None,
        "demonstrations_pass": all(s.get("demo_pass_rate", 0) == 1.0 for s in steps),
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(Path(a.out), (json.dumps(out, indent=1) + "\n").encode())
    print(json.dumps(out["checks"]), json.dumps(steps), sep="\n")


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
