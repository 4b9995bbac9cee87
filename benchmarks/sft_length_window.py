"""SFT step cost with and without length windows (`sft.pack_length_window`) on the workplace demonstrations.

    RLVR_THREADS=2 .venv/bin/python benchmarks/sft_length_window.py --data /tmp/lwV/data-relevant --packs 10

A shared-prefix pack pads its rows to its longest; `training.sft_packs.by_length_windows` sorts runs of rows by
length before the packs are cut. Two numbers per setting: the padded row tokens of the whole epoch (exact, from
the packs themselves) and the measured seconds of a forward + backward pass per pack, on packs drawn at random
from each setting's epoch, the two settings alternating pack by pack in one process (the machines are shared and
noisy, so only the ratio in one run means anything). The model is the embedded one with the learn_workplace SFT
stage's settings: embeddings and the first 10 of 30 layers fixed, bf16 autocast, batch 8.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULT = ROOT / "benchmarks" / "results" / "sft_length_window.json"


def epoch_tokens(packs: list[dict]) -> dict:
    """Row tokens an epoch of these packs computes: real ones and with the padding."""
    real = sum(len(r) for p in packs for r in p["row_ids"])
    padded = sum(max(map(len, p["row_ids"])) * len(p["row_ids"]) for p in packs)
    return {"packs": len(packs), "row_tokens": real, "padded_row_tokens": padded,
            "padding_fraction": round(1 - real / padded, 4)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=ROOT / "runs" / "learn_workplace" / "data-relevant")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--window", type=int, default=8, help="the windowed setting's sft.pack_length_window")
    ap.add_argument("--packs", type=int, default=6, help="packs timed per setting")
    ap.add_argument("--freeze-layers", type=int, default=10)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("RLVR_THREADS", "2")))
    ap.add_argument("--result", type=Path, default=RESULT)
    a = ap.parse_args()

    import torch

    from rewards.atomic_write import atomic_write_text
    from schemas.train_config import ModelSection
    from studio.workplace_dataset import build_dataset
    from training.model import configure_threads, load_model
    from training.policy import freeze
    from training.sft import read_demonstrations, tokenize_with_assistant_mask
    from training.sft_packs import build_packs, collate_pack, pack_token_logprobs

    threads = configure_threads(a.threads)
    if not (a.data / "manifest.json").exists():
        build_dataset(a.data, n=1200, tools="relevant")
    model, tok = load_model("default", threads=threads)
    freeze(model, ModelSection(freeze_embeddings=True, freeze_layers=a.freeze_layers))
    model.train()
    rows = [tokenize_with_assistant_mask(tok, m, 3072) for m in read_demonstrations(a.data / "demonstrations.jsonl")]
    rows = [r for r in rows if any(r["assistant_masks"])]
    settings = {"shuffled": build_packs(rows, a.batch, 0), f"window_{a.window}": build_packs(rows, a.batch, 0, a.window)}
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    rng = random.Random(0)
    drawn = {k: rng.sample(range(len(v)), a.packs) for k, v in settings.items()}
    seconds: dict[str, list[float]] = {k: [] for k in settings}
    padded: dict[str, int] = {k: 0 for k in settings}
    for i in range(a.packs):
        for name, packs in (settings.items() if i % 2 == 0 else reversed(settings.items())):
            batch = collate_pack([packs[drawn[name][i]]], pad)
            padded[name] += batch["input_ids"].numel()
            t0 = time.perf_counter()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                lp, _ = pack_token_logprobs(model, batch["prefix_ids"], batch["input_ids"], batch["attention_mask"],
                                            batch["labels"])
            (-lp.mean()).backward()
            seconds[name].append(time.perf_counter() - t0)
            model.zero_grad(set_to_none=True)
            print(f"pack {i} {name}: {seconds[name][-1]:.1f} s, {batch['input_ids'].shape}", flush=True)
    out: dict = {"benchmark": "sft_length_window", "command": f"RLVR_THREADS={threads} .venv/bin/python "
                 f"benchmarks/sft_length_window.py {' '.join(sys.argv[1:])}", "torch_threads": threads,
                 "batch": a.batch, "window": a.window, "packs_timed": a.packs, "frozen_layers": a.freeze_layers,
                 "demonstrations": len(rows), "settings": {}}
    for name, packs in settings.items():
        out["settings"][name] = {"epoch": epoch_tokens(packs), "seconds_per_pack": [round(s, 2) for s in seconds[name]],
                                 "mean_seconds_per_pack": round(statistics.mean(seconds[name]), 2),
                                 "seconds_per_1k_padded_tokens": round(1000 * sum(seconds[name]) / padded[name], 3)}
    w, s = out["settings"][f"window_{a.window}"], out["settings"]["shuffled"]
    # an epoch's cost: its padded tokens at each setting's measured rate (the timed packs are a sample of it)
    cost = {k: v["epoch"]["padded_row_tokens"] * v["seconds_per_1k_padded_tokens"] / 1000 for k, v in out["settings"].items()}
    out["epoch_seconds_estimate"] = {k: round(v, 1) for k, v in cost.items()}
    out["padded_tokens_ratio"] = round(w["epoch"]["padded_row_tokens"] / s["epoch"]["padded_row_tokens"], 3)
    out["epoch_time_ratio"] = round(cost[f"window_{a.window}"] / cost["shuffled"], 3)
    atomic_write_text(a.result, json.dumps(out, indent=1))
    print(json.dumps({k: out[k] for k in ("padded_tokens_ratio", "epoch_time_ratio", "epoch_seconds_estimate")}))


if __name__ == "__main__":
    main()
