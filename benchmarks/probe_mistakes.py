"""Where and how does a policy first go wrong on learn_workplace's validation tasks? The same greedy probe that
`data.focus` runs (the first N validation tasks of each template, `training.train_eval.greedy_pass_at_1`, batch 16),
and for each failed episode its first mistake against the task's ground-truth calls (`training.branch.first_mistake`):
after how many right replies, and whether that reply chose a tool no remaining ground-truth call uses ("tool"), the
right tools with other arguments or in another order ("arguments"), or answered too early ("answer").

    .venv/bin/python benchmarks/probe_mistakes.py --model /tmp/lwF/sft --work /tmp/lwF \\
        --result benchmarks/results/probe_mistakes_sft.json

Why: the focused GRPO stages' corrections of tool choices moved the first tool call of templates they never trained
(sessions 27-30), wherever in the episode the corrected choice sat. Which templates fail only inside arguments says
what a stage that trains no tool-name token could be drawn from. Reads the validation split only, never the test one.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="model folder (e.g. learn_workplace's <work>/sft)")
    ap.add_argument("--work", type=Path, required=True, help="learn_workplace's --work (its dataset)")
    ap.add_argument("--per-template", type=int, default=2, help="validation tasks probed per template (data.focus's "
                    "probe_per_group)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--result", type=Path, default=ROOT / "benchmarks" / "results" / "probe_mistakes.json")
    a = ap.parse_args()

    from generators.task_io import atomic_write_bytes, read_tasks
    from greedy_episode_diff import eval_config
    from training.focus import probe_groups, probe_mistakes, probe_sample
    from training.model import configure_threads, load_model
    from training.train_eval import greedy_pass_at_1

    threads = configure_threads(a.threads)
    data = a.work / "data-relevant"
    cfg = eval_config(a.work, "relevant", 6, 128, "bf16-autocast", threads)
    probe = probe_sample(read_tasks(data / "validation.parquet"), "template", a.per_template)
    model, tok = load_model(a.model, threads=threads)
    t0 = time.time()
    r = greedy_pass_at_1(model, tok, cfg, probe, keep_episodes=True)  # the batch data.focus's probe uses
    mistakes = probe_mistakes(probe, r["episodes"])
    by_id = {t.id: t for t in probe}
    reasons = {e["task_id"]: e["reason"] for e in r["episodes"]}
    rows = [{"task_id": i, "template": by_id[i].metadata["template"], "turn": m.turn, "kind": m.kind,
             "tools": list(m.tools), "ground_truth_tools_left": list(m.left), "reason": reasons[i]}
            for i, m in mistakes.items()]
    templates = {g: {"tasks": p.tasks, "passed": p.passed,
                     "mistakes": [f"{k}@{t}" for k, t in zip(p.mistake_kinds, p.mistake_turns)]}
                 for g, p in probe_groups(probe, r["passed_ids"], "template", mistakes).items()}
    out = {"benchmark": "probe_mistakes", "command": " ".join([".venv/bin/python", *sys.argv]), "model": a.model,
           "probe": f"{data}/validation.parquet, first {a.per_template} of each template", "n": r["n"],
           "passed": r["passed"], "kinds": dict(Counter(x["kind"] for x in rows)),
           "kinds_at_turn_0": dict(Counter(x["kind"] for x in rows if x["turn"] == 0)),
           "templates_failing_only_inside_arguments": sorted(
               g for g, v in templates.items() if v["mistakes"] and all(m.startswith("arguments") for m in v["mistakes"])),
           "templates": templates, "failed": rows, "wall_s": round(time.time() - t0, 1)}
    atomic_write_bytes(a.result, (json.dumps(out, indent=1) + "\n").encode())
    print(f"{r['passed']}/{r['n']} passed; first mistakes {out['kinds']}; failing only inside arguments: "
          f"{out['templates_failing_only_inside_arguments']} -> {a.result}")


if __name__ == "__main__":
    main()
