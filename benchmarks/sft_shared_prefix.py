"""SFT throughput on the workplace demonstrations: TRL's SFTTrainer with its own batches vs the same trainer fed
shared-prefix packs (`training.sft_packs`: the system prompt runs once per batch, the head only at assistant tokens).

    .venv/bin/python benchmarks/sft_shared_prefix.py --steps 4 --threads 2

Both runs fine-tune the embedded model on the same demonstrations (relevant-tools prompts, as
benchmarks/learn_workplace.py trains on), with the same batch size, accumulation, learning rate and precision, one
after the other in one process. Reported: conversation tokens per second of each (TRL's own `num_tokens` count) and the ratio, plus the loss each
reached (the packs change the order of rows, not what is learned from them; tests/test_training_sft.py checks the
loss and gradient are equal). A third run adds frozen lower layers to the packs (`model.freeze_embeddings` and
`model.freeze_layers`, default 10 of 30: no backward pass below them), on the same packs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULT = ROOT / "benchmarks" / "results" / "sft_shared_prefix.json"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--accum", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--freeze-layers", type=int, default=10, help="the third run: embeddings + this many layers fixed")
    ap.add_argument("--work", type=Path, default=ROOT / "runs" / "sft_shared_prefix")
    a = ap.parse_args()
    os.environ["RLVR_THREADS"] = str(a.threads)

    from rewards.atomic_write import atomic_write_text
    from studio.workplace_dataset import build_dataset
    from training.config_io import parse_train_config
    from training.model import configure_threads, load_model
    from training.sft import read_demonstrations, run_sft, tokenize_with_assistant_mask

    threads = configure_threads(a.threads)
    data = ROOT / "runs" / "learn_workplace" / "data-relevant"
    if not (data / "manifest.json").exists():
        build_dataset(data, n=600, tools="relevant")
    demos = read_demonstrations(data / "demonstrations.jsonl")
    n = a.steps * a.batch * a.accum
    out: dict = {"benchmark": "sft_shared_prefix", "command": "RLVR_THREADS=%d .venv/bin/python benchmarks/"
                 "sft_shared_prefix.py %s" % (threads, " ".join(sys.argv[1:])), "torch_threads": threads,
                 "steps": a.steps, "batch": a.batch, "accum": a.accum, "runs": {}}
    out["frozen_run"] = f"packed, embeddings and the first {a.freeze_layers} decoder layers fixed"
    for name, shared, frozen in (("trl_batches", False, 0), ("packed", True, 0), ("packed_frozen", True, a.freeze_layers)):
        model, tok = load_model("default", threads=threads)
        if "tokens_per_demo" not in out:
            rows = [tokenize_with_assistant_mask(tok, m, 3072) for m in demos]
            out["tokens_per_demo"] = round(sum(len(r["input_ids"]) for r in rows) / len(rows), 1)
            out["system_tokens_per_demo"] = round(sum(r["context_len"] for r in rows) / len(rows), 1)
            out["assistant_tokens_per_demo"] = round(sum(sum(r["assistant_masks"]) for r in rows) / len(rows), 1)
        cfg = parse_train_config({
            "name": "sft-bench", "seed": 0, "output_dir": str(a.work), "threads": threads,
            "model": {"name": "default", "precision": "bf16-autocast", "freeze_embeddings": bool(frozen),
                      "freeze_layers": frozen},
            "data": {"path": str(data), "split": "train"}, "reward": {"function": "env", "allow_unaudited": True},
            "sft": {"data_path": str(data / "demonstrations.jsonl"), "max_steps": a.steps, "lr": 1e-4,
                    "batch_size": a.batch, "gradient_accumulation_steps": a.accum, "max_length": 3072,
                    "shared_prefix": shared},
        })
        losses: list[float] = []
        tokens = [0.0]

        def log(r: dict) -> None:
            if "loss" in r:
                losses.append(float(r["loss"]))
                tokens[0] = float(r.get("num_tokens") or 0)  # conversation tokens trained on so far, as TRL counts

        t0 = time.time()
        folder = run_sft(cfg, model=model, tokenizer=tok, out_dir=a.work / f"sft-{name}", on_log=log)
        info = json.loads((folder / "sft_info.json").read_text())
        out["runs"][name] = {"train_seconds": info["seconds"], "wall_s": round(time.time() - t0, 1),
                             "conversation_tokens": tokens[0], "tokens_per_s": round(tokens[0] / info["seconds"], 1),
                             "batch_slots": n, "trainable_params": info["trainable_params"], "losses": losses}
        print(name, out["runs"][name], flush=True)
        del model
    r = out["runs"]
    # packs can be short (the last rows of a system prompt), so compare conversation tokens per second
    out["speedup"] = round(r["packed"]["tokens_per_s"] / r["trl_batches"]["tokens_per_s"], 2)
    out["frozen_speedup_over_packed"] = round(r["packed_frozen"]["tokens_per_s"] / r["packed"]["tokens_per_s"], 2)
    atomic_write_text(RESULT, json.dumps(out, indent=1))
    print(json.dumps({k: out[k] for k in ("speedup", "frozen_speedup_over_packed", "tokens_per_demo",
                                          "system_tokens_per_demo")}))


if __name__ == "__main__":
    main()
