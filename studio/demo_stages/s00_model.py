"""Demo stage: load the embedded model (building its cache once) and ask it one question."""

from __future__ import annotations

ORDER = 0
TITLE = "embedded model"


def run(ctx) -> dict:
    import time

    from training.chat import generate_reply
    from training.model import embedded_cache_dir, load_model

    t0 = time.time()
    with ctx.console.status("loading SmolLM2-135M-Instruct (first run de-quantises the GGUF, ~30 s)"):
        model, tok = load_model("default")
    load_s = time.time() - t0
    question = "In one sentence, what is reinforcement learning?"
    answer = generate_reply(model, tok, [{"role": "user", "content": question}], max_new_tokens=48)
    ctx.console.print(f"[bold]Q:[/bold] {question}\n[bold]A:[/bold] {answer}", highlight=False)
    ctx.state["model"] = (model, tok)
    return {"model cache": str(embedded_cache_dir()), "load seconds": round(load_s, 1), "answer": answer}
