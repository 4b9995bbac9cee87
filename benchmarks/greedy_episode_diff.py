"""Which of learn_workplace's test tasks did a training stage gain or lose, and how did the greedy episodes change?

    .venv/bin/python benchmarks/greedy_episode_diff.py --before /tmp/lw7/sft \\
        --after /tmp/lw7/main/checkpoints/step-3 --work /tmp/lw7 --subset seen

Both policies run the evaluation learn_workplace runs (`training.train_eval.greedy_pass_at_1`: the same fixed test
sample, tool loop, token limits and verifier) with `keep_episodes`, and the JSON lists, task by task, whether each
passed, why not, and which tool its first reply called; the lost and gained tasks keep both episode texts. Why: a
GRPO stage that costs a few of the 48 passes says nothing about *what* it changed; this says which decisions moved
(e.g. the first tool call of every project-management task), and so which hypothesis the next stage should test.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def eval_config(work: Path, tools: str, max_turns: int, max_new_tokens: int, precision: str, threads: int) -> Any:
    """The config learn_workplace evaluates with, built by learn_workplace's own `_config` from its own flags, so
    the tool loop's turn and token limits are the ones the compared run used and no copy of them is kept here."""
    from learn_workplace import _config, build_parser

    lw = build_parser().parse_args(["--work", str(work), "--tools", tools, "--max-turns", str(max_turns),
                                    "--max-new-tokens", str(max_new_tokens), "--precision", precision,
                                    "--threads", str(threads)])
    return _config(lw, work / f"data-{tools}", threads, "episode-diff", "env:binary", steps=1)


def add_eval_arguments(ap: argparse.ArgumentParser) -> None:
    """The flags that say which learn_workplace evaluation to repeat: its dataset, test sample and tool-loop limits."""
    from learn_workplace import build_parser

    ap.add_argument("--work", type=Path, default=Path("/tmp/lw7"), help="learn_workplace's --work (its dataset)")
    ap.add_argument("--tools", default="relevant")
    ap.add_argument("--eval-tasks", type=int, default=48)
    ap.add_argument("--subset", choices=["seen", "held_out", "all"], default="all",
                    help="the test tasks of templates training saw, of the held-out templates, or both")
    lw = build_parser()
    ap.add_argument("--max-turns", type=int, default=lw.get_default("max_turns"),
                    help="the compared run's learn_workplace --max-turns (its default when not given)")
    ap.add_argument("--max-new-tokens", type=int, default=lw.get_default("max_new_tokens"),
                    help="the compared run's learn_workplace --max-new-tokens")
    ap.add_argument("--precision", default=lw.get_default("precision"), choices=["fp32", "bf16-autocast"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=48)


def eval_setup(a: argparse.Namespace) -> tuple[int, Any, list]:
    """(threads, evaluation config, test tasks) for the flags of `add_eval_arguments`."""
    from learn_workplace import test_sample
    from training.model import configure_threads

    threads = configure_threads(a.threads)
    data = a.work / f"data-{a.tools}"
    if not (data / "test.parquet").exists():
        raise SystemExit(f"{data}: no learn_workplace dataset; run benchmarks/learn_workplace.py --work {a.work} first")
    tasks = test_sample(data, a.eval_tasks)
    if a.subset != "all":
        tasks = [t for t in tasks if bool(t.metadata.get("held_out_template")) == (a.subset == "held_out")]
    return threads, eval_config(a.work, a.tools, a.max_turns, a.max_new_tokens, a.precision, threads), tasks


def eval_settings(a: argparse.Namespace, threads: int, batch: int) -> dict:
    """The evaluation settings an episode cache key holds (`episode_cache_key`): the tool loop's, the precision, the
    batching and the threads -- one dict for every benchmark that reads or writes the cache."""
    settings = {k: getattr(a, k) for k in ("tools", "max_turns", "max_new_tokens", "precision")}
    settings.update(batch=batch, threads=threads)
    return settings


EVAL_CODE = ("training", "rewards", "schemas", "generators")  # the packages whose code decides an episode


def episode_cache_key(model_dir: str, data: Path, tasks: list, settings: dict) -> str:
    """What a greedy evaluation's episodes depend on, digested: the model's weight files, the dataset folder (tasks,
    world, manifest), the evaluated task ids, the tool-loop and batching settings, and the source of the packages the
    evaluation runs. Why: greedy evaluation is deterministic on a machine (the SFT model, re-trained in sessions 24
    and 26, scored the same 85 of the 265 test tasks, and two evaluations of it in session 27 gave the same verdict
    and failure reason on every task; the batching is part of the key, since in batches of 16 instead of 48 the SFT
    model decodes 38 of the 265 episodes differently, 1 verdict flipped: batch_noise_sft_bf16.json), so a policy
    compared against several stages -- the SFT model, every time --
    is evaluated once (16 min on the whole test split) instead of once per comparison; any change to one of these
    inputs, the evaluation's code included, makes a new key."""
    from training.checkpoints import file_digest, weight_files, weights_digest

    folder = Path(model_dir)
    h = hashlib.sha256()
    h.update(weights_digest(folder, weight_files(folder)).encode())
    h.update(str(file_digest(data)).encode())
    h.update(json.dumps({"tasks": [t.id for t in tasks], **settings}, sort_keys=True).encode())
    for pkg in EVAL_CODE:
        for f in sorted((ROOT / pkg).rglob("*.py")):
            h.update(str(f.relative_to(ROOT)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:24]


def episodes(model_dir: str, cfg: Any, tasks: list, threads: int, batch: int,
             cache: Path | None = None, key: str | None = None) -> tuple[dict, float, bool]:
    """task id -> the greedy episode of the policy in `model_dir`, the seconds it took, and whether it came from
    `cache` (a folder of `<key>.json` files, written atomically after a fresh evaluation)."""
    from generators.task_io import atomic_write_bytes

    hit = cache / f"{key}.json" if cache is not None and key else None
    if hit is not None and hit.is_file():
        return json.loads(hit.read_text()), 0.0, True
    from training.model import load_model
    from training.train_eval import greedy_pass_at_1

    model, tok = load_model(model_dir, threads=threads)
    t0 = time.time()
    r = greedy_pass_at_1(model, tok, cfg, tasks, batch=batch, keep_episodes=True)
    got = {e["task_id"]: e for e in r["episodes"]}
    if hit is not None:
        atomic_write_bytes(hit, json.dumps(got).encode())
    return got, time.time() - t0, False


def compare(tasks: list, before: dict, after: dict) -> dict:
    """Task-by-task outcome of two policies' episodes, with the first-call changes of the tasks that flipped."""
    rows, kept, lost, gained = [], [], [], []
    for t in tasks:
        b, a = before[t.id], after[t.id]
        if b["passed"] and a["passed"]:
            kept.append(t.id)
        elif b["passed"]:
            lost.append(t.id)
        elif a["passed"]:
            gained.append(t.id)
        rows.append({"task_id": t.id, "template": t.metadata.get("template"),
                     "held_out_template": bool(t.metadata.get("held_out_template")),
                     "before": {k: b[k] for k in ("passed", "reason", "first_call")},
                     "after": {k: a[k] for k in ("passed", "reason", "first_call")}})
        if t.id in lost or t.id in gained:
            rows[-1]["texts"] = {"before": b["text"], "after": a["text"]}
    changed = Counter(f"{before[i]['first_call']} -> {after[i]['first_call']}" for i in before
                      if before[i]["first_call"] != after[i]["first_call"])
    return {
        "n": len(tasks), "passed": {"before": sum(before[t.id]["passed"] for t in tasks),
                                    "after": sum(after[t.id]["passed"] for t in tasks)},
        "kept": kept, "lost": lost, "gained": gained,
        "lost_first_call": {i: [before[i]["first_call"], after[i]["first_call"]] for i in lost},
        "first_call_changes": dict(changed.most_common()),
        "tasks": rows,
    }


def main() -> None:
    from generators.task_io import atomic_write_bytes

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="model folder (e.g. the SFT model)")
    ap.add_argument("--after", required=True, help="model folder (e.g. a GRPO checkpoint)")
    add_eval_arguments(ap)
    ap.add_argument("--result", type=Path, default=ROOT / "benchmarks" / "results" / "greedy_episode_diff.json")
    ap.add_argument("--no-cache", action="store_true", help="evaluate both policies even when <work>/episode_cache "
                    "holds the episodes of the same weights, data, settings and evaluation code")
    a = ap.parse_args()
    threads, cfg, tasks = eval_setup(a)
    cache = None if a.no_cache else a.work / "episode_cache"
    settings = eval_settings(a, threads, a.batch)
    data = a.work / f"data-{a.tools}"
    runs = {}
    for side in ("before", "after"):
        key = episode_cache_key(getattr(a, side), data, tasks, settings) if cache is not None else None
        runs[side] = episodes(getattr(a, side), cfg, tasks, threads, a.batch, cache, key)
    (before, s_before, c_before), (after, s_after, c_after) = runs["before"], runs["after"]
    out = {"benchmark": "greedy_episode_diff",
           "command": f".venv/bin/python benchmarks/greedy_episode_diff.py {' '.join(sys.argv[1:])}",
           "before": a.before, "after": a.after, "subset": a.subset,
           **compare(tasks, before, after), "wall_s": {"before": round(s_before, 1), "after": round(s_after, 1)},
           "from_cache": {"before": c_before, "after": c_after}}
    atomic_write_bytes(a.result, (json.dumps(out, indent=1) + "\n").encode())
    print(f"passed {out['passed']['before']} -> {out['passed']['after']} of {out['n']}: kept {len(out['kept'])}, "
          f"lost {len(out['lost'])}, gained {len(out['gained'])}; first-call changes {out['first_call_changes']}")


if __name__ == "__main__":
    main()
