"""Does moving a GRPO checkpoint part of the way back to its starting policy keep its gains and drop its losses?

    .venv/bin/python benchmarks/interpolate_to_start.py --start /tmp/lw9/sft \\
        --end /tmp/lw9/main/checkpoints/step-2 --alphas 1,0.5 --work /tmp/lw9

For each alpha the policy start + alpha * (end - start) (`training.weight_interpolation`, WiSE-FT / WARP's
interpolation towards initialisation) runs learn_workplace's evaluation (`training.train_eval.greedy_pass_at_1`:
the same fixed test sample, tool loop, token limits and verifier) and the JSON lists passes, held-out-template
passes and failure reasons per alpha. Why: the GRPO stages on record move many greedy decisions of the SFT model at
once and lose more test tasks than they gain; if the losses were the large-step side effects and the gains the
update's direction, a point between the two policies would beat both.
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


def main() -> None:
    from greedy_episode_diff import add_eval_arguments, eval_setup

    from generators.task_io import atomic_write_bytes
    from training.model import load_model
    from training.train_eval import greedy_pass_at_1
    from training.weight_interpolation import interpolate_state

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--start", required=True, help="model folder the stage started from (e.g. the SFT model)")
    ap.add_argument("--end", required=True, help="model folder the stage ended with (e.g. a GRPO checkpoint)")
    ap.add_argument("--alphas", default="1,0.5", help="comma-separated, each in [0, 1] (1 = the end policy)")
    add_eval_arguments(ap)
    ap.add_argument("--result", type=Path, default=ROOT / "benchmarks" / "results" / "interpolate_to_start.json")
    a = ap.parse_args()
    alphas = [float(x) for x in a.alphas.split(",")]
    threads, cfg, tasks = eval_setup(a)
    held = {t.id for t in tasks if t.metadata.get("held_out_template")}
    model, tok = load_model(a.start, threads=threads)
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    end_model, _ = load_model(a.end, threads=threads)
    end = {k: v.detach().clone() for k, v in end_model.state_dict().items()}
    del end_model
    out: dict = {"benchmark": "interpolate_to_start",
                 "command": f".venv/bin/python benchmarks/interpolate_to_start.py {' '.join(sys.argv[1:])}",
                 "start": a.start, "end": a.end, "subset": a.subset, "n": len(tasks), "n_held_out_templates": len(held),
                 "alphas": {}}
    for alpha in alphas:
        model.load_state_dict(interpolate_state(start, end, alpha))
        t0 = time.time()
        r = greedy_pass_at_1(model, tok, cfg, tasks, batch=a.batch)
        passed = set(r.pop("passed_ids"))
        out["alphas"][str(alpha)] = {"passed": r["passed"], "held_out_template_passed": len(passed & held),
                                     "fail_reasons": r["fail_reasons"], "seconds": round(time.time() - t0, 1)}
        print(f"alpha {alpha}: passed {r['passed']}/{r['n']} ({len(passed & held)} of {len(held)} held-out-template "
              f"tasks) {r['fail_reasons']}", flush=True)
        atomic_write_bytes(a.result, (json.dumps(out, indent=1) + "\n").encode())


if __name__ == "__main__":
    main()
