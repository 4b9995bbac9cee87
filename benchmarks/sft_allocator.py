"""The SFT stage's step time and resident memory under three allocator settings, side by side.

    RLVR_THREADS=2 .venv/bin/python benchmarks/sft_allocator.py [--model DIR] [--data DIR] [--steps 24]
    # writes benchmarks/results/sft_allocator.json

Why: a 198-step SFT run on the workplace demonstrations (learn_workplace's SFT settings: packs of 8 sharing their
system prompt, up to 3072 tokens, bf16 autocast, embeddings and 10 of 30 layers frozen) slowed from 7.7 to
10.9 s a step as it went, with 16 GB resident for a 135M-parameter model. The data does not get longer, so the
suspect was glibc's heap: every pack has its own length, so every step allocates activation and logit tensors of
new sizes, and the freed blocks stay resident and fragment. The GRPO trainer manages its heap (`training.memory`);
this measures whether `run_sft` should too, before it does. The arms, each in its own process from the same model,
data and seed (`training.sft.run_sft` as it is, the arm's allocator work done from its per-step log callback):
- "glibc": nothing done (what `run_sft` does);
- "trim": `malloc_trim` after every optimizer step (`release_free_memory`);
- "lean": the GRPO trainer's 1 MiB mmap threshold as well, so each large tensor is its own mapping.
The losses should agree to rounding: the allocator moves memory, not numbers (bf16 kernels may round differently
on buffers placed differently, so `max_loss_difference` is reported rather than demanded to be 0).

Measured (session 35, 24 steps from the base, `sft_allocator.json`): trimming cost 1.16x the step time for 0.95x the
peak, the lean threshold 1.57x for 0.77x, with the same losses. The peak is each step's own, not leftover heap, so
`run_sft` leaves glibc alone; the slowdown of the long run is not explained by the heap.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
RESULT = ROOT / "benchmarks" / "results" / "sft_allocator.json"
ARMS = ("glibc", "trim", "lean")
# learn_workplace's record command's SFT flags (the SFT section of its TrainConfig comes from them)
SFT_FLAGS = ("--part main --tasks 1200 --sft-batch 8 --sft-accum 1 --sft-lr 2e-4 --freeze-layers 10 "
             "--freeze-embeddings").split()


def arm(name: str, model: str, data: Path, work: Path, steps: int, threads: int) -> dict:
    """One arm, in this process: `steps` SFT steps with learn_workplace's SFT section, timed step by step."""
    import learn_workplace as lw

    from training.memory import lean_allocator, peak_rss_mb, release_free_memory, rss_mb
    from training.model import configure_threads, load_model
    from training.sft import run_sft

    configure_threads(threads)
    a = lw.build_parser().parse_args(SFT_FLAGS + ["--sft-steps", str(steps), "--work", str(work / name)])
    cfg = lw._config(a, data, threads, "main", a.grpo_reward, a.grpo_steps)
    cfg = cfg.model_copy(update={"sft": cfg.sft.model_copy(update={"max_minutes": None, "save_optimizer": False})})
    m, tok = load_model(model, threads=threads)
    out: dict = {"arm": name, "step_s": [], "rss_mb": [], "loss": []}
    last = time.perf_counter()

    if name == "lean":
        lean_allocator()

    def on_log(rec: dict) -> None:  # TRL logs every step (logging_steps=1), after the optimizer step
        nonlocal last
        if name != "glibc":
            release_free_memory()
        if "loss" in rec:
            now = time.perf_counter()
            out["step_s"].append(round(now - last, 2))
            out["rss_mb"].append(round(rss_mb()))
            out["loss"].append(float(rec["loss"]))
            last = now
            print(f"{name} step {len(out['loss'])}/{steps}: {out['step_s'][-1]:.1f} s, rss {out['rss_mb'][-1]} MB, "
                  f"loss {out['loss'][-1]:.4f}", flush=True)

    run_sft(cfg, model=m, tokenizer=tok, out_dir=work / name / "sft", on_log=on_log)
    return {**out, "peak_rss_mb": round(peak_rss_mb()), "minor_faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt}


def summary(runs: dict[str, dict]) -> dict:
    """Per arm: mean step time over all steps and over the last half, final and peak RSS; ratios to glibc."""
    out: dict = {}
    for name, r in runs.items():
        half = r["step_s"][len(r["step_s"]) // 2:]
        out[name] = {"mean_step_s": round(statistics.mean(r["step_s"]), 2),
                     "mean_step_s_last_half": round(statistics.mean(half), 2),
                     "rss_mb_last": r["rss_mb"][-1], "peak_rss_mb": r["peak_rss_mb"]}
    base = out["glibc"]
    for name in runs:
        if name != "glibc":
            out[name]["step_time_ratio_to_glibc"] = round(out[name]["mean_step_s"] / base["mean_step_s"], 3)
            out[name]["peak_rss_ratio_to_glibc"] = round(out[name]["peak_rss_mb"] / base["peak_rss_mb"], 3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="default", help="the model SFT starts from (default: the embedded base)")
    ap.add_argument("--data", type=Path, default=None, help="a workplace dataset folder (default: build 1200 tasks "
                    "as learn_workplace does)")
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--work", type=Path, default=ROOT / "runs" / "sft_allocator")
    ap.add_argument("--result", type=Path, default=RESULT)
    ap.add_argument("--arm", choices=ARMS, help=argparse.SUPPRESS)
    a = ap.parse_args()
    threads = int(os.environ.get("RLVR_THREADS", "2"))
    data = a.data or a.work / "data-relevant"
    if a.arm:
        res = arm(a.arm, a.model, data, a.work, a.steps, threads)
        (a.work / f"{a.arm}.json").write_text(json.dumps(res))
        return
    arms = [x for x in a.arms.split(",") if x]
    if "glibc" not in arms or any(x not in ARMS for x in arms):
        raise SystemExit(f"--arms: a comma list of {', '.join(ARMS)} that includes glibc (the ratios' base), got {a.arms!r}")
    if not (data / "manifest.json").exists():
        from studio.workplace_dataset import build_dataset

        build_dataset(data, n=1200, tools="relevant")
    runs = {}
    for name in arms:  # separate processes: the allocator's state is per process
        subprocess.run([sys.executable, __file__, "--arm", name, "--model", a.model, "--data", str(data),
                        "--steps", str(a.steps), "--work", str(a.work)], check=True)
        runs[name] = json.loads((a.work / f"{name}.json").read_text())
    losses = {n: r["loss"] for n, r in runs.items()}
    result = {
        "benchmark": "sft_allocator",
        "command": "RLVR_THREADS=%d .venv/bin/python benchmarks/sft_allocator.py %s" % (threads, " ".join(sys.argv[1:])),
        "setup": {"model": a.model, "steps": a.steps, "threads": threads, "sft_flags": " ".join(SFT_FLAGS),
                  "machine": platform.processor() or platform.machine(), "cpu_count": os.cpu_count()},
        "same_losses": all(v == losses["glibc"] for v in losses.values()),
        "max_loss_difference": max(abs(x - y) for v in losses.values() for x, y in zip(v, losses["glibc"])),
        "summary": summary(runs),
        "runs": runs,
    }
    a.result.parent.mkdir(parents=True, exist_ok=True)
    tmp = a.result.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1))
    os.replace(tmp, a.result)
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=1))


if __name__ == "__main__":
    main()
