"""Sampling with the in-place growing KV cache (training/kv_cache.py) vs transformers' DynamicCache, side by side.

    .venv/bin/python benchmarks/kv_cache_decode.py            # writes benchmarks/results/kv_cache_decode.json

The embedded model samples 8 rows (2 prompts x 4, the GRPO layout) greedily for 128 new tokens after a prompt of
300 or 1000 tokens (a workplace episode's context runs 600-3000), through the real rollout path
(`training.rollout.sample_tokens`); the two caches alternate, twice each, and must produce the same tokens. A run
with one new token times the prefill, which is subtracted: the figure is the decode step.
Why: DynamicCache concatenates every layer's whole cache at every token, so a decode step costs more the longer the
context is; rollouts are two thirds of a workplace GRPO step on this machine.
"""
from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    from transformers import DynamicCache

    import training.kv_cache as kv
    from training.model import load_model
    from training.rollout import SamplingParams, left_pad, sample_tokens

    threads = int(os.environ.get("RLVR_THREADS", "1"))
    model, tok = load_model("default", threads=threads)
    model.eval()
    real = kv.growing
    eos = {-1}  # never stop early: every run decodes exactly max_new_tokens
    params = SamplingParams(max_new_tokens=128, temperature=0.0)
    prefill_only = SamplingParams(max_new_tokens=1, temperature=0.0)
    dynamic = lambda cache=None: cache if cache is not None else DynamicCache()  # noqa: E731 - the old behaviour
    rows = []
    for context in (300, 1000):
        g = torch.Generator().manual_seed(context)
        prompts = [torch.randint(100, 40000, (context,), generator=g).tolist() for _ in range(2)]
        ids, mask = left_pad([p for p in prompts for _ in range(4)], tok.pad_token_id)
        secs: dict[str, list[float]] = {"dynamic": [], "growing": []}
        prefill: dict[str, float] = {}
        tokens: dict[str, torch.Tensor] = {}
        for rep in range(3):  # rep 0: the prefill alone; reps 1-2: prefill + 128 tokens
            for name in ("dynamic", "growing"):
                kv.growing = real if name == "growing" else dynamic
                t0 = time.perf_counter()
                out = sample_tokens(model, ids, mask, prefill_only if rep == 0 else params, eos_ids=eos,
                                    pad_id=tok.pad_token_id)
                if rep == 0:
                    prefill[name] = time.perf_counter() - t0
                else:
                    secs[name].append(time.perf_counter() - t0)
                    tokens[name] = out[0]
        kv.growing = real
        decode = {k: (min(v) - prefill[k]) / 127 for k, v in secs.items()}
        rows.append({"context_tokens": context, "rows": 8, "new_tokens": 128,
                     "same_tokens": bool(torch.equal(tokens["dynamic"], tokens["growing"])),
                     "prefill_s": {k: round(v, 2) for k, v in prefill.items()},
                     "total_s": {k: [round(x, 2) for x in v] for k, v in secs.items()},
                     "decode_ms_per_token": {k: round(1000 * v, 1) for k, v in decode.items()},
                     "decode_time_ratio_growing_over_dynamic": round(decode["growing"] / decode["dynamic"], 3)})
        print(rows[-1], flush=True)
    out = {"benchmark": "kv_cache_decode", "command": "RLVR_THREADS=%d .venv/bin/python benchmarks/kv_cache_decode.py" % threads,
           "model": "SmolLM2-135M-Instruct (embedded), fp32", "torch_threads": threads, "cpu_count": os.cpu_count(),
           "machine": platform.machine(), "results": rows}
    path = ROOT / "benchmarks/results/kv_cache_decode.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=1))
    tmp.replace(path)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
