"""Where our GRPO step's resident memory goes: the benchmark run of benchmarks/grpo_vs_trl.py (ours only), with a
thread sampling VmRSS every 5 ms and tagging each sample with the phase the trainer is in (rollout, update forward,
backward, clipping, optimizer step), plus glibc's heap use and free bytes at each phase change.

    .venv/bin/python benchmarks/grpo_memory_phases.py --steps 3 --precision lean

Prints one line per step and phase (RSS at the phase's start and its maximum) and the process's peak RSS, and writes
benchmarks/results/grpo_memory_phases.json. A diagnostic: the phase tags wrap trainer methods from outside.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULT = ROOT / "benchmarks" / "results" / "grpo_memory_phases.json"


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return 0.0


class PhaseSampler:
    """Max RSS per phase, sampled on a thread (torch ops release the GIL, so it samples during them)."""

    def __init__(self, period_s: float = 0.005):
        self.phase, self.rows, self.period = "import", {}, period_s
        self.order: list[str] = []
        self.step = 0
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            self._sample()
            time.sleep(self.period)

    def _sample(self) -> None:
        rss, phase = _rss_mb(), self.phase
        row = self.rows.get(phase)
        if row is None:
            row = self.rows[phase] = {"start_mb": rss, "max_mb": rss, "time_s": 0.0, "t0": time.perf_counter()}
            self.order.append(phase)
        row["max_mb"] = max(row["max_mb"], rss)

    def enter(self, name: str) -> None:
        try:
            from training.memory import heap_free_bytes
        except ImportError:  # a tree from before it existed (to measure "before")
            heap_free_bytes = lambda: None  # noqa: E731

        now = time.perf_counter()
        if self.phase in self.rows:
            self.rows[self.phase]["time_s"] += now - self.rows[self.phase]["t0"]
        self.phase = f"step {self.step}: {name}" if self.step else name
        self._sample()
        row = self.rows[self.phase]
        row["t0"] = now
        free = heap_free_bytes()
        row["heap_free_mb_at_start"] = None if free is None else free / 2**20


def instrument(sampler: PhaseSampler) -> None:
    """Tag the trainer's phases by wrapping its methods (and Tensor.backward, clip_grad_norm_)."""
    import torch

    import training.grpo as G

    def wrap(owner, name, label, after):
        orig = getattr(owner, name)

        def f(*a, **k):
            sampler.enter(label)
            try:
                return orig(*a, **k)
            finally:
                sampler.enter(after)

        setattr(owner, name, f)

    orig_step = G.GRPOTrainer.train_step

    def train_step(self, *a, **k):
        sampler.step += 1
        return orig_step(self, *a, **k)

    G.GRPOTrainer.train_step = train_step
    wrap(G.GRPOTrainer, "_setup", "setup", "idle")
    wrap(G.GRPOTrainer, "_rollout_phase", "rollout + rewards", "between")
    wrap(G.GRPOTrainer, "_forward_logprobs", "update forward", "loss")
    wrap(torch.Tensor, "backward", "backward", "after backward")
    wrap(torch.nn.utils, "clip_grad_norm_", "clip", "after clip")
    orig_setup = G.GRPOTrainer._setup

    def setup(self, *a, **k):
        orig_setup(self, *a, **k)
        wrap(self.optimizer, "step", "optimizer step", "end of step")

    G.GRPOTrainer._setup = setup


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--precision", choices=["fp32", "bf16-autocast", "lean"], default="lean")
    ap.add_argument("--out", type=Path, default=RESULT)
    a = ap.parse_args()
    os.environ.setdefault("RLVR_THREADS", "1")
    sampler = PhaseSampler()
    instrument(sampler)
    from benchmarks.grpo_vs_trl import run_ours

    sampler.enter("start")
    res = run_ours(a.steps, a.out, a.precision)
    sampler.enter("done")
    rows = [{"phase": p, **{k: round(v, 3) if isinstance(v, float) else v for k, v in sampler.rows[p].items() if k != "t0"}}
            for p in sampler.order]
    for r in rows:
        free = r.get("heap_free_mb_at_start")
        print(f"{r['phase']:32s} start {r['start_mb']:7.0f} MB  max {r['max_mb']:7.0f} MB  {r['time_s']:6.2f} s"
              + (f"  heap free at start {free:5.0f} MB" if free is not None else ""))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:.0f} MB; step times {[round(t, 2) for t in res['step_times_s']]}")
    out = {"benchmark": "grpo_memory_phases", "precision": a.precision, "steps": a.steps, "peak_rss_mb": peak,
           "step_times_s": res["step_times_s"], "phases": rows,
           "command": f".venv/bin/python benchmarks/grpo_memory_phases.py --steps {a.steps} --precision {a.precision}",
           "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = a.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=1))
    os.replace(tmp, a.out)


if __name__ == "__main__":
    main()
