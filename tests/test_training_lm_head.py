"""The chunked LM-head log-probs (training/lm_head.py) equal the plain full-logits computation in float64 (values and
gradients), and under bf16 autocast the trainer's previous checkpointed head op for op."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from training.lm_head import head_token_logprobs


def _inputs(dtype: torch.dtype, seed: int = 0, vocab: int = 20_000):
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(3, 7, 32, generator=g, dtype=dtype).requires_grad_(True)
    weight = torch.nn.Parameter(torch.randn(vocab, 32, generator=g, dtype=dtype) * 0.3)
    targets = torch.randint(0, vocab, (3, 7), generator=g)
    targets[0, 0] = targets[0, 1] = 17  # a token chosen twice
    return hidden, weight, targets


@pytest.mark.parametrize("temperature,chunk", [(1.0, 4), (0.7, 5), (1.3, 64)])
def test_float64_values_and_gradients_equal_the_textbook_formula(temperature, chunk):
    hidden, weight, targets = _inputs(torch.float64)
    w_out = torch.randn(3, 7, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    lp, ent = head_token_logprobs(hidden, targets, weight, temperature, chunk=chunk)
    (lp * w_out).sum().backward()
    got = lp.detach(), ent, hidden.grad.clone(), weight.grad.clone()
    hidden.grad = weight.grad = None

    logp = torch.log_softmax(hidden @ weight.t() / temperature, dim=-1)
    ref_lp = logp.gather(-1, targets[..., None]).squeeze(-1)
    ref_ent = -(logp.exp() * logp).sum(-1)
    (ref_lp * w_out).sum().backward()
    for a, b in zip(got, (ref_lp.detach(), ref_ent.detach(), hidden.grad, weight.grad)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    assert not ent.requires_grad and lp.dtype == torch.float64


@pytest.mark.parametrize("temperature", [1.0, 0.9])
def test_bf16_autocast_equals_the_previous_checkpointed_head(temperature):
    """The trainer's previous head under bf16 autocast: 2 rows at a time under activation checkpointing, logits by
    F.linear, `.float()`, `token_logprobs`. Same values, entropies and hidden-state gradients to the bit. The weight
    gradient is the same per-chunk bf16 products, now summed in fp32 (exactly, below); the previous head summed
    them in bf16 (through autocast's weight cast), so it differs from it by bf16 rounding."""
    from torch.utils.checkpoint import checkpoint

    from training.logprobs import _head_chunk

    hidden, weight, targets = _inputs(torch.float32, seed=1)
    w_out = torch.randn(3, 7, generator=torch.Generator().manual_seed(9))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        lp, ent = head_token_logprobs(hidden * 1.0, targets, weight, temperature, chunk=14)  # = 2 rows of 7
    (lp * w_out).sum().backward()
    got = lp.detach(), ent, hidden.grad.clone(), weight.grad.clone()
    hidden.grad = weight.grad = None

    head = torch.nn.Linear(32, weight.shape[0], bias=False)
    head.weight = weight
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h = hidden * 1.0
        parts = [checkpoint(_head_chunk, h[s:s + 2], targets[s:s + 2], head, temperature, use_reentrant=False)
                 for s in (0, 2)]
    ref_lp, ref_ent = torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
    (ref_lp * w_out).sum().backward()
    assert torch.equal(got[0], ref_lp.detach()) and torch.equal(got[1], ref_ent.detach())
    assert torch.equal(got[2], hidden.grad)
    rel = ((got[3] - weight.grad).abs() / weight.grad.abs().clamp_min(1e-6)).max()
    assert float(rel) <= 2 ** -8  # one bf16 rounding

    from training.losses import token_logprobs

    fp32_sum = torch.zeros_like(weight)
    for s in (2, 0):  # per-chunk bf16 weight gradients of the same logits, added in fp32 (last chunk first)
        w16 = weight.detach().to(torch.bfloat16).requires_grad_(True)
        logits = F.linear((hidden.detach()[s:s + 2]).to(torch.bfloat16), w16).float()
        (token_logprobs(logits, targets[s:s + 2], temperature) * w_out[s:s + 2]).sum().backward()
        fp32_sum += w16.grad.float()
    assert torch.equal(got[3], fp32_sum)


def test_no_gradient_needed_and_gradient_to_one_input_only():
    hidden, weight, targets = _inputs(torch.float32, seed=2)
    with torch.no_grad():
        lp, ent = head_token_logprobs(hidden, targets, weight, 1.0)
    assert lp.shape == ent.shape == targets.shape and not lp.requires_grad
    lp, _ = head_token_logprobs(hidden.detach(), targets, weight, 1.0, chunk=3)
    lp.sum().backward()
    assert weight.grad is not None and hidden.grad is None
