"""The LLM structured column on the embedded model: valid-row rate after re-validation, rows/s, and the cost of
constrained decoding against unconstrained decoding of the same number of tokens from the same prompts.

Run alone: .venv/bin/python benchmarks/llm_structured_bench.py [ROWS]  (writes benchmarks/results/llm_structured.json)
`datagen_vs_data_designer.py` calls `run()` and stores the same dict under "llm_structured".

Three timings per prompt, all greedy, one torch thread:
  constrained    jump-forward decoding (forced JSON text fed in one pass, value tokens decoded under masks);
  free_loop      the same forward-pass loop with no mask, decoding as many tokens as the constrained output has;
  free_generate  `model.generate` with min_new_tokens = max_new_tokens = that token count;
and, for reference, outlines 1.3.3's Generator (compiled once, reused) on the same schema and prompts.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("RLVR_THREADS", "1")

SCHEMA = {"type": "object", "properties": {
    "title": {"type": "string", "minLength": 5, "maxLength": 60},
    "priority": {"type": "string", "enum": ["low", "medium", "high", "urgent"]},
    "estimate_hours": {"type": "integer", "minimum": 1, "maximum": 40},
    "blocked": {"type": "boolean"}},
    "required": ["title", "priority", "estimate_hours", "blocked"], "additionalProperties": False}
PRODUCTS = ["billing service", "login flow", "nightly export", "search index", "onboarding email", "dashboard",
            "cache layer", "API gateway", "mobile app", "audit log", "payment page", "report builder"]


def _free_loop(dec, ids: list[int], n_tokens: int) -> None:
    import torch

    logits, past = dec._feed(ids, None)
    for _ in range(n_tokens):
        t = int(torch.argmax(logits))
        logits, past = dec._feed([t], past)


def run(rows: int = 12, outlines_rows: int = 4) -> dict:
    import polars as pl
    import torch

    from generators.llm import LLMRunner, structured_system
    from schemas.dataset_spec import LLMStructuredColumn
    from training.model import load_model

    model, tok = load_model("default")
    runner = LLMRunner(model=model, tokenizer=tok)
    col = LLMStructuredColumn(name="ticket", json_schema=SCHEMA, max_new_tokens=80,
                              prompt="Write a short task ticket for the {product}.")
    frame = pl.DataFrame({"product": [PRODUCTS[i % len(PRODUCTS)] for i in range(rows)]})
    runner.run_column(col, frame.head(1))  # build the vocabulary masks once (reported separately)
    t0 = time.perf_counter()
    values, reasons = runner.run_column(col, frame)
    col_s = time.perf_counter() - t0
    valid = sum(r is None for r in reasons)

    dec = runner.decoder("default", model, tok)
    sys_msg = structured_system(SCHEMA, None)
    c_time = f_time = g_time = 0.0
    tokens = 0
    with torch.no_grad():
        for p in frame["product"].to_list():
            msgs = [{"role": "system", "content": sys_msg},
                    {"role": "user", "content": f"Write a short task ticket for the {p}."}]
            enc = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
            ids = list(enc["input_ids"] if hasattr(enc, "keys") else enc)
            from generators.json_decoding import plan_schema
            plans = plan_schema(SCHEMA)
            t = time.perf_counter()
            text = dec.decode(ids, plans)
            c_time += time.perf_counter() - t
            n = len(tok.encode(text, add_special_tokens=False))
            tokens += n
            t = time.perf_counter()
            _free_loop(dec, ids, n)
            f_time += time.perf_counter() - t
            x = torch.tensor([ids])
            t = time.perf_counter()
            model.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=n, min_new_tokens=n,
                           do_sample=False, temperature=None, top_p=None, top_k=None, pad_token_id=tok.pad_token_id)
            g_time += time.perf_counter() - t

    result = {
        "rows": rows, "valid_rows": valid, "valid_rate": valid / rows, "column_seconds": col_s,
        "rows_per_s": rows / col_s, "output_tokens": tokens,
        "constrained_seconds": c_time, "free_loop_seconds": f_time, "free_generate_seconds": g_time,
        "constrained_tokens_per_s": tokens / c_time, "free_loop_tokens_per_s": tokens / f_time,
        "free_generate_tokens_per_s": tokens / g_time,
        "constrained_vs_free_loop": c_time / f_time, "constrained_vs_free_generate": c_time / g_time,
        "decoder_stats": dict(dec.stats), "sample": values[:3], "invalid_reasons": [r for r in reasons if r][:3],
    }
    if outlines_rows:
        result["outlines"] = _outlines(model, tok, frame["product"].to_list()[:outlines_rows], sys_msg)
    result["when"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return result


def _outlines(model, tok, products, sys_msg) -> dict:
    import outlines
    import torch
    from outlines.types import JsonSchema

    from generators.llm import validate_output

    t = time.perf_counter()
    gen = outlines.Generator(outlines.from_transformers(model, tok), JsonSchema(json.dumps(SCHEMA)))
    compile_s = time.perf_counter() - t
    o_time = g_time = 0.0
    tokens = valid = 0
    for p in products:
        msgs = [{"role": "system", "content": sys_msg},
                {"role": "user", "content": f"Write a short task ticket for the {p}."}]
        prompt = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
        t = time.perf_counter()
        text = gen(prompt, max_new_tokens=80)
        o_time += time.perf_counter() - t
        valid += validate_output(text, SCHEMA)[1] is None
        n = len(tok.encode(text, add_special_tokens=False))
        tokens += n
        x = tok(prompt, return_tensors="pt", add_special_tokens=False)["input_ids"]
        t = time.perf_counter()
        with torch.no_grad():
            model.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=n, min_new_tokens=n,
                           do_sample=False, temperature=None, top_p=None, top_k=None, pad_token_id=tok.pad_token_id)
        g_time += time.perf_counter() - t
    return {"rows": len(products), "valid_rows": valid, "compile_seconds": compile_s, "output_tokens": tokens,
            "seconds": o_time, "tokens_per_s": tokens / o_time, "free_generate_tokens_per_s": tokens / g_time,
            "outlines_vs_free_generate": o_time / g_time}


if __name__ == "__main__":
    res = run(int(sys.argv[1]) if len(sys.argv) > 1 else 12)
    out = ROOT / "benchmarks" / "results" / "llm_structured.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(res, indent=2))
    os.replace(tmp, out)
    print(json.dumps(res, indent=2))
