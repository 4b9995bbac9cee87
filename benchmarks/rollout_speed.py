"""Workplace rollouts with this tree's sampling code vs an earlier commit's, side by side in one run.

    RLVR_THREADS=2 .venv/bin/python benchmarks/rollout_speed.py --data /tmp/lwU/data-relevant --model /tmp/lwU/sft
    # writes benchmarks/results/rollout_speed.json

Both trees run the same two jobs from the same model, each in its own process, alternating (baseline, ours,
baseline, ours) so that a noisy neighbour costs both alike: one GRPO rollout round (8 training tasks x 4 episodes
sampled at temperature 1 through `training.multiturn.EnvironmentCollector`, the in-budget stage's layout) and a
greedy evaluation of 48 test tasks in one batch (`training.train_eval.greedy_pass_at_1`, the learn_workplace
sample's). The figure is generated tokens a second: the two trees draw different samples (this tree inverts the
cumulative distribution where the baseline called `torch.multinomial`), so their episodes differ in length. For
the greedy job the JSON also says on how many tasks the two trees decoded the same episode.

Why: on 2 cores a GRPO step of the in-budget stage spent 130-350 s sampling and 44-61 s training (session 41), so
the rollout decides how many steps fit in the 60-minute run. The baseline is the commit before
`training/kv_rows.py` (ended rows leave the batch), the inverse-CDF sampler and the autocast-dtype KV cache.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "rollout_speed.json"
BASELINE = "48254da"


def worker(src: Path, data: Path, model_dir: str, threads: int) -> dict:
    """One tree's two jobs; `src` goes first on sys.path, so `training` is that tree's."""
    sys.path.insert(0, str(src))
    from benchmarks.learn_workplace import _config, build_parser, test_sample
    from training.grpo import GRPOTrainer
    from training.rollout import SamplingParams
    from training.train_eval import greedy_pass_at_1

    a = build_parser().parse_args(["--grpo-batch", "32", "--grpo-group", "4", "--freeze-layers", "10",
                                   "--freeze-embeddings", "--grpo-temperature", "1", "--work", tempfile.mkdtemp()])
    cfg = _config(a, data, threads, "speed", "env:binary", 1, grpo_stage=True)
    trainer = GRPOTrainer(cfg, init_from=model_dir)
    trainer._setup()
    tasks = trainer._draw(8)
    params = SamplingParams(max_new_tokens=cfg.rollout.max_new_tokens, temperature=1.0, seed=1234)
    t0 = time.perf_counter()
    samples = trainer.collect(tasks, 4, params)
    sampled_s = time.perf_counter() - t0
    test = test_sample(data, 48)
    t0 = time.perf_counter()
    r = greedy_pass_at_1(trainer.model, trainer.tok, cfg, test, batch=48, keep_samples=True)
    greedy_s = time.perf_counter() - t0
    tok = trainer.tok
    return {
        "sampled": {"seconds": round(sampled_s, 1), "episodes": len(samples), "turns": turn_stats(samples),
                    "generated_tokens": sum(sum(s.loss_mask) for s in samples),
                    "passed": sum(bool(s.result and s.result.passed) for s in samples)},
        "greedy": {"seconds": round(greedy_s, 1), "tasks": len(test), "passed": r["passed"],
                   "generated_tokens": sum(sum(s.loss_mask) for s in r["samples"]),
                   "episodes": {s.task_id: tok.decode(s.completion_ids) for s in r["samples"]}},
    }


def turn_stats(samples: list) -> list[dict]:
    """Per turn of a batched rollout: the episodes still running, their replies' tokens in all, the longest reply
    (the steps the turn decodes) and the share of row-steps that a batch keeping every row computes for rows whose
    reply has ended (what `training.kv_rows` leaves out)."""
    turns: dict[int, list[int]] = {}
    for s in samples:
        runs = [len(list(g)) for k, g in itertools.groupby(s.loss_mask) if k == 1]
        for t, n in enumerate(runs):
            turns.setdefault(t, []).append(n)
    return [{"turn": t, "episodes": len(ns), "tokens": sum(ns), "longest": max(ns),
             "ended_row_steps": round(1 - sum(ns) / (len(ns) * max(ns)), 2)} for t, ns in sorted(turns.items())]


def run_tree(src: Path, a: argparse.Namespace) -> dict:
    """One tree's jobs in a fresh process (its own imports of `training`), read back from the JSON it writes."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        cmd = [sys.executable, __file__, "--worker", str(src), "--data", str(a.data), "--model", a.model,
               "--out", str(out)]
        subprocess.run(cmd, check=True, env={**os.environ, "RLVR_THREADS": str(a.threads)})
        return json.loads(out.read_text())


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from rewards.atomic_write import atomic_write_text

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="a learn_workplace data folder (parquets, world)")
    ap.add_argument("--model", default="default", help="the policy both trees sample from (an SFT model folder)")
    ap.add_argument("--baseline", default=BASELINE, help="the commit compared against")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("RLVR_THREADS", "2")))
    ap.add_argument("--result", type=Path, default=RESULT)
    ap.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        a.out.write_text(json.dumps(worker(a.worker, a.data, a.model, a.threads)))
        return
    if not (a.data / "train.parquet").exists():
        sys.exit(f"--data {a.data}: no train.parquet there (make one with benchmarks/learn_workplace.py)")
    base = Path(tempfile.mkdtemp()) / "baseline"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base), a.baseline], check=True,
                   capture_output=True)
    runs: dict[str, list[dict]] = {"baseline": [], "ours": []}
    try:
        for i in range(a.repeats):
            for name, src in (("baseline", base), ("ours", ROOT)):
                runs[name].append(run_tree(src, a))
                r = runs[name][-1]
                print(f"{name} {i + 1}: sampled {r['sampled']['seconds']} s, greedy {r['greedy']['seconds']} s",
                      flush=True)
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], capture_output=True)

    def rate(name: str, job: str) -> float:
        return statistics.median(r[job]["generated_tokens"] / r[job]["seconds"] for r in runs[name])

    same = runs["baseline"][0]["greedy"]["episodes"]
    mine = runs["ours"][0]["greedy"]["episodes"]
    for rs in runs.values():
        for r in rs:
            r["greedy"].pop("episodes")
    result = {
        "benchmark": "rollout_speed", "command": " ".join(["RLVR_THREADS=%d" % a.threads, ".venv/bin/python",
                                                           "benchmarks/rollout_speed.py", "--data", str(a.data),
                                                           "--model", a.model]),
        "machine": {"cpus": os.cpu_count(), "threads": a.threads, "platform": platform.platform()},
        "baseline_commit": a.baseline, "runs": runs,
        "tokens_per_s": {job: {"baseline": round(rate("baseline", job), 1), "ours": round(rate("ours", job), 1),
                               "ratio": round(rate("ours", job) / rate("baseline", job), 2)}
                         for job in ("sampled", "greedy")},
        "greedy_same_episode": sum(same[t] == mine.get(t) for t in same), "greedy_tasks": len(same),
    }
    atomic_write_text(a.result, json.dumps(result, indent=1))
    print(json.dumps(result["tokens_per_s"]), f"same greedy episode on {result['greedy_same_episode']}/{len(same)}")


if __name__ == "__main__":
    main()
