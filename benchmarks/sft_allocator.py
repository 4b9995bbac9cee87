"""The SFT stage's step time and resident memory under allocator settings, and after an evaluation, side by side.

    RLVR_THREADS=2 .venv/bin/python benchmarks/sft_allocator.py [--model DIR] [--data DIR] [--steps 24]
    # writes benchmarks/results/sft_allocator.json

Why: a 198-step SFT run on the workplace demonstrations (learn_workplace's SFT settings: packs of 8 sharing their
system prompt, up to 3072 tokens, bf16 autocast, embeddings and 10 of 30 layers frozen) slowed from 7.7 to
10.9 s a step as it went, with 16 GB resident for a 135M-parameter model, and learn_workplace's SFT stage, which
runs after the base model's evaluation in the same process, took 14.7 s a step. The arms, each in its own process
from the same model, data and seed (`training.sft.run_sft` as it is, the arm's allocator work done from its
per-step log callback):
- "glibc": nothing done (what `run_sft` does);
- "trim": `malloc_trim` after every optimizer step (`release_free_memory`);
- "lean": the GRPO trainer's 1 MiB mmap threshold as well, so each large tensor is its own mapping;
- "hugetlb": glibc asked for transparent huge pages (`GLIBC_TUNABLES=glibc.malloc.hugetlb=1`, set for the child);
- "eval_first": learn_workplace's order: the base model's greedy evaluation of 48 workplace test tasks (one batch),
  then SFT, in one process, with the arena cap `training.model.configure_threads` now raises
  (`training.memory.enough_arenas`);
- "eval_first_glibc_arenas": the same with the cap set explicitly to glibc's own value (8 arenas per core);
- "eval_first_untouched": the same with glibc's arena settings never touched, as before the fix.
Each step's minor page faults are recorded, and the run's voluntary context switches (the sign of threads waiting
on a lock). The losses should agree to rounding: the allocator moves memory, not numbers (bf16 kernels may round
differently on buffers placed differently, so `max_loss_difference` is reported rather than demanded to be 0).

Measured (session 35, 24 steps from the base): trimming cost 1.16x the step time for 0.95x the peak, the lean
threshold 1.57x for 0.77x, with the same losses. The peak is each step's own, not leftover heap, so `run_sft`
leaves glibc's heap alone. Session 36 (all six arms, `sft_allocator.json`; the step times of one arm vary by about
10% from run to run: trim 1.07x, lean 1.29x, hugetlb 0.89x): the evaluation's cost was the malloc arenas, not the
heap. With glibc's settings untouched (`--arms glibc,eval_first,eval_first_untouched --result
benchmarks/results/sft_allocator_eval_first.json`) SFT after the evaluation took 1.47x the step time, with 4.8
million voluntary context switches against 3,400: after the evaluation's threads had taken glibc's 16 arenas, the
OpenMP worker shared the main thread's (`training.memory.enough_arenas`, which `configure_threads` now calls);
with the cap raised, 1.00x. The cap set explicitly to glibc's own 16 showed no contention in its one run: which
arena a late thread is handed depends on the order threads first allocate, so the default makes sharing possible
rather than certain, and only a cap above the thread count rules it out.
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
ARMS = ("glibc", "trim", "lean", "hugetlb", "eval_first", "eval_first_glibc_arenas", "eval_first_untouched")
HUGETLB = "glibc.malloc.hugetlb=1"  # glibc >= 2.35: malloc asks for transparent huge pages (madvise)
EVAL_TASKS = 48  # learn_workplace's test sample, evaluated in one batch as its base stage does
# learn_workplace's record command's SFT flags (the SFT section of its TrainConfig comes from them)
SFT_FLAGS = ("--part main --tasks 1200 --sft-batch 8 --sft-accum 1 --sft-lr 2e-4 --freeze-layers 10 "
             "--freeze-embeddings").split()


def arm(name: str, model: str, data: Path, work: Path, steps: int, threads: int) -> dict:
    """One arm, in this process: `steps` SFT steps with learn_workplace's SFT section, timed step by step."""
    import learn_workplace as lw

    from training import memory
    from training.model import configure_threads, load_model
    from training.sft import run_sft

    if name == "eval_first_untouched":  # as before the fix: glibc's arena settings never touched
        memory.enough_arenas = lambda *a, **k: False
    configure_threads(threads)  # raises glibc's arena cap (memory.enough_arenas)
    if name == "eval_first_glibc_arenas":  # the cap set explicitly to glibc's own value, 8 arenas per core
        memory.enough_arenas(memory.glibc_arena_cap())
    a = lw.build_parser().parse_args(SFT_FLAGS + ["--sft-steps", str(steps), "--work", str(work / name)])
    cfg = lw._config(a, data, threads, "main", a.grpo_reward, a.grpo_steps)
    cfg = cfg.model_copy(update={"sft": cfg.sft.model_copy(update={"max_minutes": None, "save_optimizer": False})})
    m, tok = load_model(model, threads=threads)
    out: dict = {"arm": name, "step_s": [], "rss_mb": [], "loss": [], "step_minor_faults": [],
                 "glibc_tunables": os.environ.get("GLIBC_TUNABLES", "")}
    if name.startswith("eval_first"):  # what learn_workplace does before SFT: the base model's greedy evaluation
        from training.train_eval import greedy_pass_at_1

        t0 = time.perf_counter()
        r = greedy_pass_at_1(m, tok, cfg, lw.test_sample(data, EVAL_TASKS), batch=EVAL_TASKS)
        out["eval_s"], out["eval_pass_at_1"] = round(time.perf_counter() - t0, 1), r["pass_at_1"]
        print(f"{name}: evaluated {EVAL_TASKS} tasks in {out['eval_s']} s", flush=True)
    last, faults = time.perf_counter(), _minor_faults()

    if name == "lean":
        memory.lean_allocator()

    def on_log(rec: dict) -> None:  # TRL logs every step (logging_steps=1), after the optimizer step
        nonlocal last, faults
        if name in ("trim", "lean"):
            memory.release_free_memory()
        if "loss" in rec:
            now, now_faults = time.perf_counter(), _minor_faults()
            out["step_s"].append(round(now - last, 2))
            out["rss_mb"].append(round(memory.rss_mb()))
            out["loss"].append(float(rec["loss"]))
            out["step_minor_faults"].append(now_faults - faults)
            last, faults = now, now_faults
            print(f"{name} step {len(out['loss'])}/{steps}: {out['step_s'][-1]:.1f} s, rss {out['rss_mb'][-1]} MB, "
                  f"loss {out['loss'][-1]:.4f}", flush=True)

    run_sft(cfg, model=m, tokenizer=tok, out_dir=work / name / "sft", on_log=on_log)
    return {**out, "peak_rss_mb": round(memory.peak_rss_mb()), "minor_faults": _minor_faults(), "anon_huge_mb": _anon_huge_mb(),
            "voluntary_context_switches": resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw}


def _minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _anon_huge_mb() -> int:
    """Resident anonymous memory held in transparent huge pages now (0 where the kernel does not say)."""
    try:
        for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
            if line.startswith("AnonHugePages:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return 0


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
        env = {**os.environ, "GLIBC_TUNABLES": HUGETLB} if name == "hugetlb" else \
            {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
        subprocess.run([sys.executable, __file__, "--arm", name, "--model", a.model, "--data", str(data),
                        "--steps", str(a.steps), "--work", str(a.work)], check=True, env=env)
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
