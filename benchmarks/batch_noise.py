"""How much of a greedy evaluation's verdict depends on the batch each task ran in, not on the policy?

    .venv/bin/python benchmarks/batch_noise.py --model /tmp/lwF/sft --work /tmp/lwF --eval-tasks 265 --batches 48 16

One policy, learn_workplace's evaluation (`training.train_eval.greedy_pass_at_1`: the same test tasks, tool loop,
token limits and verifier), run once per batch size (and precision); the JSON counts, against the first run, the
tasks whose verdict flipped and those whose episode text changed at all. Why: under bf16 autocast the logits are
rounded (to 1/8 near 20) and the SFT model's passes hold decisions won by one such step (sessions 31-32,
`decision_margin_closest_call.json`, training/guard.py); a left-padded batch's shapes -- how long the other tasks'
prompts and replies are -- change the matmuls' rounding, so a task can decode differently beside other tasks. A
GRPO stage changes some episodes, hence the padding of every batch they sit in, hence other tasks' rounding: part of
a stage's "flips" on the split may be this, not the update. The same weights in other batches measure that floor.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def flips(tasks: list, first: dict, other: dict) -> dict:
    """Verdicts and episode texts of `other` against `first`, task by task."""
    lost = [t.id for t in tasks if first[t.id]["passed"] and not other[t.id]["passed"]]
    gained = [t.id for t in tasks if other[t.id]["passed"] and not first[t.id]["passed"]]
    text = [t.id for t in tasks if first[t.id]["text"] != other[t.id]["text"]]
    return {"passed": sum(other[t.id]["passed"] for t in tasks), "lost": lost, "gained": gained,
            "verdict_flips": len(lost) + len(gained), "episodes_changed": len(text),
            "lost_templates": sorted(str(t.metadata.get("template")) for t in tasks if t.id in lost),
            "gained_templates": sorted(str(t.metadata.get("template")) for t in tasks if t.id in gained)}


def main() -> None:
    from generators.task_io import atomic_write_bytes
    from greedy_episode_diff import add_eval_arguments, episode_cache_key, episodes, eval_settings, eval_setup

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_eval_arguments(ap)
    ap.add_argument("--model", required=True, help="model folder (e.g. the SFT model)")
    ap.add_argument("--batches", type=int, nargs="+", default=[48, 16], help="batch sizes, the first the reference")
    ap.add_argument("--result", type=Path, default=ROOT / "benchmarks" / "results" / "batch_noise.json")
    a = ap.parse_args()
    if len(a.batches) < 2:
        ap.error("--batches needs the reference batch size and at least one other")
    threads, cfg, tasks = eval_setup(a)
    cache = a.work / "episode_cache"
    cache.mkdir(parents=True, exist_ok=True)
    runs: dict[int, dict] = {}
    wall: dict[str, float] = {}
    for b in a.batches:
        # greedy_episode_diff's settings, so either benchmark reuses the other's cached episodes of these weights
        key = episode_cache_key(a.model, a.work / f"data-{a.tools}", tasks, eval_settings(a, threads, b))
        t0 = time.time()
        runs[b], _, cached = episodes(a.model, cfg, tasks, threads, b, cache, key)
        wall[f"batch_{b}"] = round(time.time() - t0, 1)
        print(f"batch {b}: {sum(e['passed'] for e in runs[b].values())}/{len(tasks)} passed"
              f"{' (cached)' if cached else ''}", flush=True)
    ref = a.batches[0]
    out = {"benchmark": "batch_noise", "command": " ".join([".venv/bin/python", "benchmarks/batch_noise.py"] + sys.argv[1:]),
           "model": a.model, "n": len(tasks), "precision": a.precision, "reference_batch": ref,
           "passed": {str(b): sum(e["passed"] for e in runs[b].values()) for b in a.batches},
           "against_reference": {str(b): flips(tasks, runs[ref], runs[b]) for b in a.batches[1:]},
           "wall_s": wall}
    atomic_write_bytes(a.result, (json.dumps(out, indent=1) + "\n").encode())
    for b, f in out["against_reference"].items():
        print(f"batch {b} vs {ref}: {f['passed']} passed, {f['verdict_flips']} verdicts flipped (lost {len(f['lost'])}, "
              f"gained {len(f['gained'])}), {f['episodes_changed']} episodes changed")


if __name__ == "__main__":
    main()
