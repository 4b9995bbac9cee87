"""Rows that end leave the decode batch and come back in order: each row's tokens are what it decodes while every
row stays in the batch, and the next turn continues every row exactly as a fresh run of its conversation does.
The sampler draws tokens with their probabilities; under bf16 autocast the cache holds what attention reads."""

from __future__ import annotations

import copy

import pytest
import torch

import training.kv_rows as kv_rows
from training.rollout import SamplingParams, continue_tokens, left_pad, sample_from, sample_tokens, sample_with_state


def _tiny():
    from training.model import load_tokenizer
    from training.policy import build_random_model

    tok = load_tokenizer("default")
    tok.padding_side = "left"
    return build_random_model(tok, seed=1).eval(), tok


PROMPTS = [[5, 6, 7, 8, 9, 10, 11], [12, 13, 14], [15, 16, 17, 18], [19, 20], [21, 22, 23, 24, 25], [26, 27, 28]]


def _ending_at_different_steps(model, tok) -> tuple[set[int], list[int]]:
    """End tokens chosen from the rows' own greedy decodes so that the rows end at different steps (a row ends at
    the first token of the set it emits), and those steps."""
    ids, mask = left_pad(PROMPTS, tok.pad_token_id)
    free, _, _, _ = sample_tokens(model, ids, mask, SamplingParams(max_new_tokens=12, temperature=0.0), eos_ids={-1},
                                  pad_id=tok.pad_token_id)
    eos = {int(free[0, 8]), int(free[2, 9]), int(free[5, 0])}  # the random model repeats a token, then changes
    ends = []
    for row in free.tolist():
        hit = [i for i, t in enumerate(row) if t in eos]
        ends.append(hit[0] + 1 if hit else len(row))
    return eos, ends


def test_ended_rows_leave_the_batch_and_each_row_decodes_as_if_they_had_stayed(monkeypatch):
    model, tok = _tiny()
    eos, ends = _ending_at_different_steps(model, tok)
    assert len(set(ends)) >= 4, f"the rows should end at different steps: {ends}"
    parked = []
    take = kv_rows.take_rows
    monkeypatch.setattr(kv_rows, "take_rows", lambda *a: parked.append(take(*a)) or parked[-1])

    greedy = SamplingParams(max_new_tokens=12, temperature=0.0)
    ids, mask = left_pad(PROMPTS, tok.pad_token_id)
    (t1, m1, lp1, ended), state = sample_with_state(model, ids, mask, greedy, eos_ids=eos, pad_id=tok.pad_token_id)
    assert parked, "no row was set aside although rows ended at different steps"
    assert [int(m) for m in m1.sum(1)] == ends
    for r, p in enumerate(PROMPTS):  # each row alone: the same tokens and log-probs
        one_ids, one_mask = left_pad([p], tok.pad_token_id)
        t_ref, m_ref, lp_ref, _ = sample_tokens(model, one_ids, one_mask, greedy, eos_ids=eos, pad_id=tok.pad_token_id)
        n = int(m_ref[0].sum())
        assert n == ends[r]
        assert t1[r, :n].tolist() == t_ref[0, :n].tolist()
        assert torch.allclose(lp1[r, :n], lp_ref[0, :n], atol=1e-4)

    # the merged state continues every row, in the caller's order, as a fresh run of its conversation
    streams = [p + t1[i, :int(m1[i].sum())].tolist() + [300 + i] * (1 + i % 3) for i, p in enumerate(PROMPTS)]
    assert state.attn.shape[0] == len(PROMPTS)
    fed = state.fed()
    assert all(len(PROMPTS[i]) + ends[i] - 1 <= f <= len(PROMPTS[i]) + ends[i] for i, f in enumerate(fed))
    st = copy.copy(state)
    st.cache = copy.deepcopy(state.cache)
    new = [s[f:] for s, f in zip(streams, fed)]
    four = SamplingParams(max_new_tokens=4, temperature=0.0)
    (t2, m2, lp2, _), _ = continue_tokens(model, st, new, four, eos_ids={-1}, pad_id=tok.pad_token_id)
    for r, s in enumerate(streams):
        fresh_ids, fresh_mask = left_pad([s], tok.pad_token_id)
        t_ref, _, lp_ref, _ = sample_tokens(model, fresh_ids, fresh_mask, four, eos_ids={-1}, pad_id=tok.pad_token_id)
        assert t2[r].tolist() == t_ref[0].tolist(), f"row {r} continued differently after the merge"
        assert torch.allclose(lp2[r], lp_ref[0], atol=1e-4)


def test_merge_puts_parked_rows_back_in_order_left_padded():
    class Layer:
        def __init__(self, k, v):
            self.keys, self.values = k, v

    class Cache:
        def __init__(self, layers):
            self.layers = layers

    full_k = torch.arange(4 * 1 * 3 * 2, dtype=torch.float32).reshape(4, 1, 3, 2)
    cache = Cache([Layer(full_k.clone(), full_k.clone() + 100)])
    attn = torch.tensor([[0, 1, 1], [1, 1, 1], [0, 0, 1], [1, 1, 1]])
    run = torch.arange(4)
    parked = [kv_rows.take_rows(cache, attn, torch.tensor([1, 2]), run[[1, 2]])]
    keep = torch.tensor([0, 3])
    cache.layers[0].keys = torch.cat([cache.layers[0].keys[keep], torch.full((2, 1, 2, 2), -1.0)], dim=-2)  # 2 more
    cache.layers[0].values = torch.cat([cache.layers[0].values[keep], torch.full((2, 1, 2, 2), -2.0)], dim=-2)
    merged = kv_rows.merge(cache, torch.cat([attn[keep], torch.ones(2, 2, dtype=attn.dtype)], 1), run[keep], parked)
    assert merged.tolist() == [[0, 1, 1, 1, 1], [0, 0, 1, 1, 1], [0, 0, 0, 0, 1], [1, 1, 1, 1, 1]]
    k = cache.layers[0].keys
    assert k.shape == (4, 1, 5, 2)
    assert torch.equal(k[1, :, 2:], full_k[1]) and torch.equal(k[1, :, :2], torch.zeros(1, 2, 2))
    assert torch.equal(k[0, :, :3], full_k[0]) and torch.equal(k[0, :, 3:], torch.full((1, 2, 2), -1.0))
    assert torch.equal(cache.layers[0].values[2, :, 2:], full_k[2] + 100)


def test_sample_from_draws_each_token_with_its_probability():
    g = torch.Generator().manual_seed(0)
    probs = torch.tensor([[0.5, 0.0, 0.3, 0.2]]).repeat(20000, 1)
    tok = sample_from(probs, g)
    freq = torch.bincount(tok, minlength=4).float() / len(tok)
    assert freq[1] == 0  # a filtered token (probability 0) is never drawn
    assert torch.allclose(freq, probs[0], atol=0.015)
    again = sample_from(probs, torch.Generator().manual_seed(0))
    assert torch.equal(tok, again)  # seeded: a resumed run draws the same tokens
    unnormalised = sample_from(probs[:5] * 7.0, torch.Generator().manual_seed(0))
    assert torch.equal(unnormalised, tok[:5])


def test_under_bf16_autocast_the_cache_holds_what_attention_reads():
    from training.generation_amp import generating
    from training.kv_cache import growing
    from training.logprobs import model_forward

    model, tok = _tiny()
    ids, mask = left_pad(PROMPTS[:2], tok.pad_token_id)
    with torch.no_grad(), generating(model, True):
        cache = growing()
        model_forward(model, input_ids=ids, attention_mask=mask, cache=cache, use_cache=True, logits_to_keep=1)
    assert {layer.keys.dtype for layer in cache.layers} == {torch.bfloat16}
    assert {layer.values.dtype for layer in cache.layers} == {torch.bfloat16}
    with torch.no_grad():
        cache = growing()
        model_forward(model, input_ids=ids, attention_mask=mask, cache=cache, use_cache=True, logits_to_keep=1)
    assert {layer.keys.dtype for layer in cache.layers} == {torch.float32}


if __name__ == "__main__":
    pytest.main([__file__, "-q"])
