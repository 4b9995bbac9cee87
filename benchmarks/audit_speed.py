"""Benchmark: a full probe audit (no model sampling) of a reward over a 200-row dataset; target <= 10 s.

Measured the way `rlvr audit --samples 0` runs it: the reward loaded from its file through `rewards.load_reward`
and scored through `rewards.score_batch` with sandbox="auto" (user code in the sandbox's worker processes). The
same audit in-process (sandbox=False) is reported beside it, to show what the sandbox costs. Median of 3 runs.

    .venv/bin/python benchmarks/audit_speed.py   # -> benchmarks/results/audit_speed.json
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

REWARD = str(ROOT / "examples" / "arithmetic" / "reward.py") + ":tagged_answer_shaped"
DATASET = ROOT / "examples" / "arithmetic" / "tasks.jsonl"
ROWS = 200
REPEATS = 3
TARGET_S = 10.0


def one_run(rows: list[dict], sandbox) -> dict:
    from rewards.audit import run_audit, scorer_from_callable

    t0 = time.perf_counter()
    scorer = scorer_from_callable(REWARD, sandbox=sandbox)
    report, ctx = run_audit(scorer, rows, reference_field="answer", dataset=f"{DATASET.name}[:{ROWS}]")
    seconds = time.perf_counter() - t0
    return {"seconds": round(seconds, 3), "verdict": report.verdict, "inputs_scored": report.scored_samples,
            "reward_calls": scorer.calls, "probes": len(report.probes),
            "probes_run": sum(p.status != "skipped" for p in report.probes),
            "findings": [f"{f.severity}:{f.family}/{f.probe}" for f in report.findings]}


def main() -> dict:
    from generators.task_io import read_records

    rows = read_records(DATASET)[:ROWS]
    out: dict = {"benchmark": "audit_speed", "reward": REWARD.replace(str(ROOT) + "/", ""),
                 "dataset": f"{DATASET.relative_to(ROOT)} (first {ROWS} rows)", "target_seconds": TARGET_S,
                 "repeats": REPEATS, "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                                                 "RLVR_THREADS": os.environ.get("RLVR_THREADS")}}
    for label, sandbox in (("sandbox_auto", "auto"), ("in_process", False)):
        runs = [one_run(rows, sandbox) for _ in range(REPEATS)]
        med = statistics.median(r["seconds"] for r in runs)
        out[label] = {"median_seconds": med, "runs_seconds": [r["seconds"] for r in runs],
                      "calls_per_second": round(runs[0]["reward_calls"] / med, 1), **{k: v for k, v in runs[0].items()
                                                                                     if k != "seconds"}}
    out["meets_target"] = out["sandbox_auto"]["median_seconds"] <= TARGET_S
    path = ROOT / "benchmarks" / "results" / "audit_speed.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".audit_speed.", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(out, f, indent=2)
    os.replace(tmp, path)
    return out


if __name__ == "__main__":
    res = main()
    print(json.dumps({k: res[k] for k in ("sandbox_auto", "in_process", "meets_target")}, indent=2))
