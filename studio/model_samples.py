"""Completions from the embedded model for the Rewards and Audit pages (the evaluation's own sampling function).

Why cached here: loading the model takes about a second and its memory should be held once per server, not per
page or per click; `st.cache_resource` shares it across sessions.
"""

from __future__ import annotations

from typing import Any

import streamlit as st


@st.cache_resource(show_spinner="loading the model")
def cached_model(name: str = "default"):
    from training.model import configure_threads, load_model

    configure_threads()
    return load_model(name)


def model_completions(rows: list[dict[str, Any]], *, model: str = "default", max_new_tokens: int = 48,
                      temperature: float = 0.7, seed: int = 0) -> list[str]:
    """One completion per row (in row order), batched through the audit's sampler, with a progress bar."""
    from studio.audit_sampling import sample_completions

    bar = st.progress(0.0, text=f"sampling {len(rows)} completions from {model}")
    drawn = sample_completions(rows, len(rows), model=model, loaded=cached_model(model), temperature=temperature,
                               max_new_tokens=max_new_tokens, seed=seed,
                               progress=lambda done, total: bar.progress(done / max(1, total),
                                                                         text=f"sampled {done}/{total}"))
    by_row = dict(drawn)
    return [by_row.get(i, "") for i in range(len(rows))]
