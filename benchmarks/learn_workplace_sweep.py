"""A search over learn_workplace's GRPO stage: one SFT model, many GRPO settings run side by side from it.

Why: on this 2-core machine one GRPO stage of learn_workplace (3 steps of 32 episodes, then the 48-task greedy
evaluation) takes about 23 minutes, so only a handful of settings can be tried in a session, and one task more or
less out of 48 is within the noise of a single run. On a GPU each stage takes a minute or two, and several run at
once, so the same search covers seeds (how large the noise is) and settings in one sitting; the settings that stand
out are then run again on the CPU with `learn_workplace.py --reuse-sft`, whose 60-minute budget is the benchmark.

Every run is `benchmarks/learn_workplace.py` itself (the same code path, flags and evaluation), each writing its
own JSON (`--result`) in its own work folder, so the committed result is never touched:

1. the base run: base evaluation, SFT, SFT evaluation and the first setting's GRPO stage, in `WORK/run-00`;
2. every other setting: `--reuse-sft` from a copy of that run's JSON and links to its SFT model and data.

    python benchmarks/learn_workplace_sweep.py --settings SETTINGS.json --work /tmp/sweep --parallel 8 \\
        --out benchmarks/results/learn_workplace_sweep.json

SETTINGS.json: {"common": [flags shared by every run], "settings": [{"name": ..., "flags": [...]}, ...]}; the
first setting is the base run's. The JSON written (atomically, after every finished run, so a run cut short
keeps what finished) holds each setting's flags, pass@1 (all, seen and held-out templates), steps and wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SCRIPT = ROOT / "benchmarks" / "learn_workplace.py"


def write_json(path: Path, data: dict) -> None:
    from generators.task_io import atomic_write_bytes

    atomic_write_bytes(path, (json.dumps(data, indent=1) + "\n").encode())


def run_setting(index: int, setting: dict, common: list[str], work: Path, reuse_from: Path | None,
                threads: int) -> dict[str, Any]:
    """One learn_workplace run in `work/run-NN`; with `reuse_from`, GRPO only, from that run's SFT model."""
    folder = work / f"run-{index:02d}"
    folder.mkdir(parents=True, exist_ok=True)
    result = folder / "result.json"
    flags = [*common, *setting["flags"]]
    if reuse_from is not None:
        for name in ("sft", *(p.name for p in reuse_from.glob("data-*"))):
            link = folder / name
            if not link.exists():
                link.symlink_to(reuse_from / name)
        result.write_text((reuse_from / "result.json").read_text())
        flags.append("--reuse-sft")
    cmd = [sys.executable, str(SCRIPT), "--part", "main", "--work", str(folder), "--result", str(result),
           "--threads", str(threads), *flags]
    t0 = time.time()
    with open(folder / "log.txt", "w") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"}).returncode
    row: dict[str, Any] = {"name": setting["name"], "flags": setting["flags"], "rc": rc,
                           "wall_s": round(time.time() - t0, 1)}
    if rc != 0 or not result.exists():
        row["log_tail"] = (folder / "log.txt").read_text()[-3000:]
        return row
    out = json.loads(result.read_text())
    row.update({
        "pass_at_1": out.get("pass_at_1"), "passed": {k: v.get("passed") for k, v in out.get("eval", {}).items()},
        "pass_at_1_seen_templates": out.get("pass_at_1_seen_templates"),
        "pass_at_1_held_out_templates": out.get("pass_at_1_held_out_templates"),
        "grpo_over_sft_points": out.get("grpo_over_sft_points"), "grpo_steps_run": out.get("grpo_steps_run"),
        "stage_wall_s": out.get("wall_s"),
        "grpo_pass_rate": [m.get("pass_rate") for m in out.get("grpo_metrics") or []],
    })
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--settings", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--parallel", type=int, default=4, help="GRPO runs at once after the base run")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per run")
    ap.add_argument("--reuse-base", action="store_true", help="keep a finished base run in WORK/run-00")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "learn_workplace_sweep.json")
    a = ap.parse_args()
    spec = json.loads(a.settings.read_text())
    settings, common = spec["settings"], spec.get("common", [])
    import torch

    report: dict[str, Any] = {
        "benchmark": "learn_workplace_sweep", "command": " ".join(sys.argv), "common_flags": common,
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        "torch": torch.__version__, "runs": [],
    }
    base = a.work / "run-00"
    if a.reuse_base and (base / "result.json").exists() and json.loads((base / "result.json").read_text()).get(
            "complete_main"):
        first = {"name": settings[0]["name"], "flags": settings[0]["flags"], "reused": True}
    else:
        first = run_setting(0, settings[0], common, a.work, None, a.threads)
    report["runs"].append(first)
    write_json(a.out, report)
    print(json.dumps(first), flush=True)
    if first.get("rc", 0) != 0:
        raise SystemExit(f"the base run failed (rc {first['rc']}); see {base / 'log.txt'}")
    with ThreadPoolExecutor(a.parallel) as pool:
        jobs = [pool.submit(run_setting, i, s, common, a.work, base, a.threads)
                for i, s in enumerate(settings[1:], start=1)]
        for job in as_completed(jobs):
            row = job.result()
            report["runs"].append(row)
            write_json(a.out, report)
            print(json.dumps({k: row.get(k) for k in ("name", "rc", "passed", "wall_s")}), flush=True)


if __name__ == "__main__":
    main()
