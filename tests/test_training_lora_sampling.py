"""Sampling from a LoRA policy runs through merged weights (fewer ops per token) and leaves the base weights
bit-identical: an adapter-only checkpoint assumes the base it was trained on."""

from __future__ import annotations

import torch

from schemas.train_config import LoraSection
from training.generation_amp import generating
from training.lora_sampling import merged_adapters
from training.model import load_tokenizer
from training.policy import apply_lora, build_random_model


def _lora_model():
    model = build_random_model(load_tokenizer("default"), seed=0)
    model = apply_lora(model, LoraSection(enabled=True, r=4, target_modules=["q_proj", "v_proj", "down_proj"]))
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():  # a trained adapter: B is zero at init, which would make merging trivially exact
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    return model


def _adapted(model):
    from peft.tuners.lora import LoraLayer

    return [m for m in model.modules() if isinstance(m, LoraLayer)]


def test_merged_sampling_computes_the_same_function_and_restores_the_base_weights():
    model = _lora_model()
    ids = torch.randint(0, 1000, (2, 12), generator=torch.Generator().manual_seed(2))
    base_before = {n: p.detach().clone() for n, p in model.named_parameters() if "base_layer" in n}
    with torch.no_grad():
        unmerged = model(input_ids=ids).logits
        with merged_adapters(model):
            assert all(m.merged for m in _adapted(model))
            changed = [n for n, p in model.named_parameters() if "base_layer" in n and not torch.equal(p, base_before[n])]
            assert changed  # the adapters really are folded into the base weights while sampling
            merged = model(input_ids=ids).logits
    assert torch.allclose(merged, unmerged, atol=1e-4), (merged - unmerged).abs().max()
    assert not any(m.merged for m in _adapted(model))
    for n, p in model.named_parameters():
        if "base_layer" in n:
            assert torch.equal(p, base_before[n]), n
    with torch.no_grad():  # and the adapters act again as adapters
        assert torch.equal(model(input_ids=ids).logits, unmerged)


def test_generating_merges_and_an_error_inside_still_restores():
    model = _lora_model()
    base_before = {n: p.detach().clone() for n, p in model.named_parameters() if "base_layer" in n}
    try:
        with torch.no_grad(), generating(model, autocast_bf16=True):
            assert all(m.merged for m in _adapted(model))
            raise KeyError("boom")
    except KeyError:
        pass
    assert not any(m.merged for m in _adapted(model))
    assert all(torch.equal(p, base_before[n]) for n, p in model.named_parameters() if "base_layer" in n)
    assert model.training
