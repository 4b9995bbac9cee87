"""Drawing the audit's 50-100 inspection samples from a model.

Why here and not in `rewards.audit`: sampling needs a model (training), and `rewards/` may import only `schemas/`.
The CLI and the demo call `sample_completions` and hand the texts to `rewards.audit.run_audit(samples=...)`.
Generation reuses training's batched KV-cache rollout backend, so the inspected outputs come from the same
sampler (same chat template, same temperature handling) that GRPO will use.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Sequence


def pick_rows(n_rows: int, n: int, seed: int = 0) -> list[int]:
    """`n` row indices spread over the dataset: a seeded permutation, cycled when n > rows."""
    order = list(range(n_rows))
    random.Random(seed).shuffle(order)
    return [order[k % n_rows] for k in range(n)]


def prompt_messages(row: dict[str, Any]) -> list[dict[str, Any]]:
    p = row.get("prompt")
    if isinstance(p, str):
        return [{"role": "user", "content": p}]
    return [m if isinstance(m, dict) else m.model_dump(exclude_none=True) for m in (p or [])]


def sample_completions(
    rows: Sequence[dict[str, Any]],
    n: int,
    *,
    model: str = "default",
    loaded: tuple[Any, Any] | None = None,
    temperature: float = 0.8,
    max_new_tokens: int = 160,
    seed: int = 0,
    batch_size: int = 16,
    progress: Callable[[int, int], None] | None = None,
) -> list[tuple[int, str]]:
    """`n` sampled completions as (row index, text): one per picked row, batched `batch_size` prompts at a time.

    `loaded` reuses an already loaded (model, tokenizer) (the demo has one); else `model` is loaded by name/path.
    """
    from training.model import load_model
    from training.rollout import SamplingParams, TransformersBackend

    if n <= 0 or not rows:
        return []
    m, tok = loaded or load_model(model)
    backend = TransformersBackend(m, tok, chunk_size=batch_size)
    idx = pick_rows(len(rows), n, seed)
    out: list[tuple[int, str]] = []
    for start in range(0, n, batch_size):
        part = idx[start:start + batch_size]
        params = SamplingParams(max_new_tokens=max_new_tokens, temperature=temperature, seed=seed + start)
        batch = backend.generate([prompt_messages(rows[i]) for i in part], 1, params)
        out += [(i, text.strip()) for i, text in zip(part, batch.texts)]
        if progress:
            progress(len(out), n)
    return out
