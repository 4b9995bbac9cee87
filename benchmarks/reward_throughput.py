"""Reward throughput: how many simple reward calls per second go through the sandbox on this machine.

Measures (JSON to benchmarks/results/reward_throughput.json):
- `sandbox_batch`: one large batch of a user reward loaded from a file, scored in the persistent sandbox pool
  (isolated workers: network namespace, memory cap, writes only in a private TMPDIR, no new processes,
  per-call time limit) — the path of `rlvr reward test` and the
  audit. Target: >= 5,000 calls/s.
- `sandbox_small_batches`: the same reward in batches of 8 (a GRPO step's group) — latency per batch.
- `in_process`: the same function without a sandbox (the upper bound), and a built-in verifier (NumericMatch).
- `subprocess_per_call`: the naive sandbox (a fresh `python` per call), on a few calls, for comparison.

Run: .venv/bin/python benchmarks/reward_throughput.py [--calls 50000] [--repeats 3]
"""

from __future__ import annotations

import argparse
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
sys.path.insert(0, str(ROOT))

REWARD_SRC = '''
def exact(completion, answer):
    return completion.strip() == answer
'''


def _atomic_write(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2)
    os.replace(tmp, path)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=50_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "reward_throughput.json"))
    args = ap.parse_args()

    from rewards import Sandbox, SandboxLimits, load_reward, score_batch
    from rewards.verifiers import NumericMatch

    tmp = Path(tempfile.mkdtemp(prefix="rlvr_bench_"))
    src = tmp / "bench_reward.py"
    src.write_text(REWARD_SRC)
    reward = load_reward(f"{src}:exact")
    n = args.calls
    completions = [f" {i % 100} " for i in range(n)]
    rows = [{"answer": str(i % 97)} for i in range(n)]
    expected = sum(1 for i in range(n) if str(i % 100) == str(i % 97))
    result: dict = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                "platform": platform.platform(), "loadavg_1m_at_start": os.getloadavg()[0]},
                    "calls": n}

    limits = SandboxLimits()
    with Sandbox(limits) as box:
        t0 = time.perf_counter()
        score_batch(reward, completions[:16], rows[:16], sandbox=box)  # workers load the reward
        warm = time.perf_counter() - t0
        times = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            res = score_batch(reward, completions, rows, sandbox=box)
            times.append(time.perf_counter() - t)
            assert sum(1 for r in res if r.passed) == expected and not any(r.is_error for r in res)
        med = statistics.median(times)
        result["sandbox_batch"] = {
            "workers": box.n_workers, "network_isolation": box.info["network_isolation"],
            "filesystem_isolation": box.info["filesystem_isolation"],
            "process_isolation": box.info["process_isolation"],
            "memory_mb": limits.memory_mb, "timeout_s": limits.timeout_s, "seconds_median": med,
            "seconds_all": times, "calls_per_s": n / med, "first_batch_incl_load_s": warm,
        }
        small = 8
        k = 300
        t = time.perf_counter()
        for j in range(k):
            score_batch(reward, completions[j * small:(j + 1) * small], rows[j * small:(j + 1) * small], sandbox=box)
        dt = time.perf_counter() - t
        result["sandbox_small_batches"] = {"batch": small, "batches": k, "ms_per_batch": 1000 * dt / k,
                                           "calls_per_s": k * small / dt}
        stats = box.stats
        result["sandbox_stats"] = {"calls": stats.calls, "errors": stats.errors, "restarts": stats.restarts}

    t = time.perf_counter()
    score_batch(reward, completions, rows, sandbox=False)
    dt = time.perf_counter() - t
    result["in_process"] = {"calls_per_s": n / dt}
    numeric = NumericMatch()
    tagged = [f"<answer>{c}</answer>" for c in completions[:20_000]]
    t = time.perf_counter()
    score_batch(numeric, tagged, rows[:20_000], sandbox=False)
    dt = time.perf_counter() - t
    result["in_process_numeric_match"] = {"calls": len(tagged), "calls_per_s": len(tagged) / dt}

    m = 20
    t = time.perf_counter()
    for i in range(m):
        code = f"import importlib.util,sys;s=importlib.util.spec_from_file_location('r',{str(src)!r});" \
               f"mod=importlib.util.module_from_spec(s);s.loader.exec_module(mod);" \
               f"print(mod.exact({completions[i]!r},{rows[i]['answer']!r}))"
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    dt = time.perf_counter() - t
    result["subprocess_per_call"] = {"calls": m, "calls_per_s": m / dt, "ms_per_call": 1000 * dt / m}

    result["target_calls_per_s"] = 5000
    result["meets_target"] = result["sandbox_batch"]["calls_per_s"] >= 5000
    result["speedup_vs_subprocess_per_call"] = (result["sandbox_batch"]["calls_per_s"]
                                                / result["subprocess_per_call"]["calls_per_s"])
    _atomic_write(Path(args.out), result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
