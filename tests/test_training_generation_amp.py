"""Sampling under bf16 autocast casts a frozen weight once per call, not once per token, and samples exactly what
plain autocast samples; the frozen weights come out of the call frozen."""

from __future__ import annotations

import pytest
import torch

from training.generation_amp import generating, generation_autocast
from training.rollout import SamplingParams, left_pad, sample_tokens


def _frozen_tiny():
    from training.model import load_tokenizer
    from training.policy import build_random_model

    tok = load_tokenizer("default")
    model = build_random_model(tok, seed=3).eval()
    model.model.embed_tokens.weight.requires_grad_(False)  # tied with the LM head: read at every token
    for p in model.model.layers[0].parameters():
        p.requires_grad_(False)
    return model, tok


def _sample(model, tok, amp) -> tuple[torch.Tensor, int]:
    """Greedy tokens for 2 prompts x 6 new tokens, and how many times the (V, H) embedding matrix was cast."""
    ids, mask = left_pad([[5, 900, 40, 77], [6, 1000, 41]], tok.pad_token_id)
    params = SamplingParams(max_new_tokens=6, temperature=0.0)
    shape = list(model.model.embed_tokens.weight.shape)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        with torch.no_grad(), amp:
            out = sample_tokens(model, ids, mask, params, eos_ids={-1}, pad_id=tok.pad_token_id)[0]
    casts = sum(1 for e in prof.events() if e.name == "aten::_to_copy" and e.input_shapes and e.input_shapes[0] == shape)
    return out, casts


def test_frozen_weights_are_cast_once_per_sampling_call_with_the_same_tokens():
    model, tok = _frozen_tiny()
    stock, stock_casts = _sample(model, tok, torch.autocast("cpu", dtype=torch.bfloat16))
    ours, our_casts = _sample(model, tok, generation_autocast(model))
    assert stock_casts >= 6  # plain autocast: once per forward (the prompt, then every new token)
    assert our_casts == 1
    assert torch.equal(stock, ours)
    assert not model.model.embed_tokens.weight.requires_grad
    assert not any(p.requires_grad for p in model.model.layers[0].parameters())
    assert all(p.requires_grad for p in model.model.layers[1].parameters())


def test_generation_autocast_refuses_grad_mode_and_restores_on_error():
    model, _ = _frozen_tiny()
    with pytest.raises(RuntimeError, match="no-grad"):
        with generation_autocast(model):
            pass
    with pytest.raises(ValueError), torch.no_grad():
        with generation_autocast(model):
            assert model.model.embed_tokens.weight.requires_grad
            raise ValueError("user code failed mid-sampling")
    assert not model.model.embed_tokens.weight.requires_grad


def test_generating_samples_in_eval_mode_and_restores_training_mode():
    model, _ = _frozen_tiny()
    model.train()
    with pytest.raises(ValueError), torch.no_grad():
        with generating(model, True):
            assert not model.training and model.model.embed_tokens.weight.requires_grad
            raise ValueError("a reward crashed mid-rollout")
    assert model.training and not model.model.embed_tokens.weight.requires_grad
