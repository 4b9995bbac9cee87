"""The in-place growing KV cache gives exactly the logits of transformers' DynamicCache, through the operations a
multi-turn rollout performs (prefill, decoding, dropping finished rows, trimming padding, repeating rows), and
stops copying the cache at every token."""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache

from training.kv_cache import SPARE_TOKENS, growing


def _tiny():
    from training.model import load_tokenizer
    from training.policy import build_random_model

    tok = load_tokenizer("default")
    return build_random_model(tok, seed=2).eval()


def _script(model, cache) -> list[torch.Tensor]:
    """Prefill 3 rows, decode, keep rows 2 and 0, repeat them, decode past the spare room; the logits at each step."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(100, 40000, (3, 7), generator=g)
    outs = []
    with torch.no_grad():
        outs.append(model(ids, past_key_values=cache, use_cache=True).logits[:, -1])
        for _ in range(3):
            outs.append(model(outs[-1].argmax(-1, keepdim=True), past_key_values=cache, use_cache=True).logits[:, -1])
        keep = torch.tensor([2, 0])
        for layer in cache.layers:
            layer.batch_select_indices(keep)
            layer.keys, layer.values = layer.keys[..., 1:, :], layer.values[..., 1:, :]  # a trimmed column
        for layer in cache.layers:
            layer.batch_repeat_interleave(2)
        last = outs[-1][keep].repeat_interleave(2, 0)
        for _ in range(SPARE_TOKENS + 5):  # crosses the end of the spare room at least once
            last = model(last.argmax(-1, keepdim=True), past_key_values=cache, use_cache=True).logits[:, -1]
            outs.append(last)
    return outs


def test_growing_cache_matches_dynamic_cache_through_select_trim_and_repeat():
    model = _tiny()
    want = _script(model, DynamicCache())
    got = _script(model, growing())
    assert len(want) == len(got)
    for i, (a, b) in enumerate(zip(want, got)):
        assert torch.allclose(a, b, atol=1e-5), f"step {i}"


def test_decoding_writes_in_place_instead_of_copying_the_cache():
    model = _tiny()
    cache = growing()
    with torch.no_grad():
        tok = model(torch.arange(100, 110)[None], past_key_values=cache, use_cache=True).logits[:, -1:].argmax(-1)
        buffer = cache.layers[0].keys.data_ptr()
        for _ in range(SPARE_TOKENS - 1):
            tok = model(tok, past_key_values=cache, use_cache=True).logits[:, -1:].argmax(-1)
        assert cache.layers[0].keys.data_ptr() == buffer  # 255 tokens decoded, no reallocation
        assert cache.get_seq_length() == 10 + SPARE_TOKENS - 1
        model(tok, past_key_values=cache, use_cache=True)
        model(tok, past_key_values=cache, use_cache=True)
        assert cache.layers[0].keys.data_ptr() != buffer  # past the spare room: one copy into a bigger buffer


def test_a_training_forward_is_refused_rather_than_breaking_the_backward():
    model = _tiny()
    with pytest.raises(RuntimeError, match="no_grad"):
        model(torch.arange(100, 110)[None], past_key_values=growing(), use_cache=True)
