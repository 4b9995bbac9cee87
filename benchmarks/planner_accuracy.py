"""The cost planner's estimate against real GRPO runs on this machine (the issue's check: within 2x).

For each case: `rlvr plan`'s library call (with its ~10 s measured probe) estimates seconds per step; then the
trainer runs the same config for a few steps and the mean step time (steps 2.., step 1 pays warm-up) is compared.
Cases: the tiny CI config (random 2-layer model), the same model as a multi-turn agent in the workplace environment
(1,500-token tool prompt; the estimate is an upper bound: it assumes every episode uses all its turns), and the
embedded SmolLM2-135M on the arithmetic tasks.

    .venv/bin/python benchmarks/planner_accuracy.py            # writes benchmarks/results/planner_accuracy.json
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("RLVR_THREADS", "1")

CASES = {
    "tiny (random 2-layer, 3.2M params)": {"steps": 4, "dynamic_sampling": {"enabled": False}},
    "tiny, workplace environment, 2 turns x 16 tokens": {
        "steps": 4, "batch_size": 4, "data": {"path": "<workplace>", "split": "train"},
        "reward": {"function": "env", "allow_unaudited": True},
        "rollout": {"environment": "workplace", "num_generations": 2, "max_turns": 2, "max_new_tokens": 16,
                    "max_total_tokens": 4096},
        "dynamic_sampling": {"enabled": False}, "overlong": {"mode": "none"}},
    "smollm2-135m, arithmetic, 4 completions x 32 tokens": {
        "steps": 3, "batch_size": 4, "model": {"name": "default", "init": "pretrained"},
        "rollout": {"num_generations": 2, "max_new_tokens": 32}, "dynamic_sampling": {"enabled": False},
        "overlong": {"mode": "none"}, "optim": {"lr": 1e-6}},
}


def run_case(name: str, overrides: dict, probe_s: float) -> dict:
    from training.config_io import load_train_config
    from training.grpo import GRPOTrainer
    from training.planner import plan

    with tempfile.TemporaryDirectory() as tmp:
        ov = {**overrides, "output_dir": str(Path(tmp) / "run"), "checkpoint": {"every": 1000, "save_optimizer": False}}
        if ov.get("data", {}).get("path") == "<workplace>":
            from studio.workplace_dataset import build_dataset

            build_dataset(Path(tmp) / "wp", n=60)
            ov["data"] = {**ov["data"], "path": str(Path(tmp) / "wp")}
        cfg = load_train_config(ROOT / "examples" / "configs" / "tiny.yaml", overrides=ov)
        t0 = time.perf_counter()
        rep = plan(cfg, probe_s=probe_s, gpus=["H100"])
        plan_s = time.perf_counter() - t0
        est = rep.estimate.time[0]
        records: list[dict] = []
        t0 = time.perf_counter()
        GRPOTrainer(cfg, on_step=records.append).train()
        run_s = time.perf_counter() - t0
    steps = records[1:] or records
    measured = statistics.mean(r["step_time_s"] for r in steps)
    gen = statistics.mean(r["gen_time_s"] for r in steps)
    train = statistics.mean(r["train_time_s"] for r in steps)
    return {
        "case": name, "params": rep.estimate.model.params, "steps_run": len(records),
        "estimated_step_s": round(est.step_s, 3), "measured_step_s": round(measured, 3),
        "ratio_measured_over_estimate": round(measured / est.step_s, 3),
        "within_2x": 0.5 <= measured / est.step_s <= 2.0,
        "estimated_generation_s": round(est.generation_s_per_step, 3), "measured_generation_s": round(gen, 3),
        "estimated_training_s": round(est.training_s_per_step, 3), "measured_training_s": round(train, 3),
        "probe_s": rep.probe.seconds if rep.probe else None, "plan_wall_s": round(plan_s, 1),
        "run_wall_s": round(run_s, 1), "h100_estimated_step_s": round(rep.estimate.time[1].step_s, 4),
        "step_times_s": [round(r["step_time_s"], 3) for r in records],
    }


def main() -> None:
    probe_s = float(os.environ.get("PLANNER_PROBE_S", "10"))
    results = [run_case(name, ov, probe_s) for name, ov in CASES.items()]
    for r in results:
        print(f"{r['case']}: estimated {r['estimated_step_s']} s/step, measured {r['measured_step_s']} s/step "
              f"(ratio {r['ratio_measured_over_estimate']}, within 2x: {r['within_2x']})")
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    out = {"benchmark": "planner_accuracy", "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                                        "threads": os.environ.get("RLVR_THREADS"), "loadavg": load},
           "probe_budget_s": probe_s, "cases": results, "created": time.time()}
    path = ROOT / "benchmarks" / "results" / "planner_accuracy.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(out, indent=1))
    os.replace(tmp, path)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
