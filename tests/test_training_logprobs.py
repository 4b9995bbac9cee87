"""The shared-prompt forward is the same function of the weights as the full forward (values and gradients), and
generation-time log-probs agree with the training forward."""

from __future__ import annotations

import copy

import torch

from training.logprobs import full_logprobs, shared_groups, shared_prompt_logprobs
from training.rollout import SamplingParams, TransformersBackend, continue_tokens, left_pad, sample_tokens, sample_with_state


def _tiny():
    from training.model import load_tokenizer
    from training.policy import build_random_model

    tok = load_tokenizer("default")
    tok.padding_side = "left"
    return build_random_model(tok, seed=1), tok


def test_shared_prompt_forward_equals_full_forward_with_gradients():
    model, tok = _tiny()
    twin = copy.deepcopy(model)
    g = torch.Generator().manual_seed(0)
    prompts = [[5, 6, 7, 8, 9], [11, 12, 13]]  # different lengths: left padding must not matter
    reps = 3
    u_ids, u_mask = left_pad(prompts, tok.pad_token_id)
    comp = torch.randint(100, 40000, (len(prompts) * reps, 6), generator=g)
    cmask = torch.ones_like(comp)
    cmask[1, 4:] = 0
    cmask[5, 2:] = 0
    rows = [p for p in prompts for _ in range(reps)]
    p_ids, p_mask = left_pad(rows, tok.pad_token_id)
    lp_full, _ = full_logprobs(model, torch.cat([p_ids, comp], 1), torch.cat([p_mask, cmask], 1), comp, 0.9)
    lp_shared, _ = shared_prompt_logprobs(twin, u_ids, u_mask, comp, cmask, reps, 0.9)
    m = cmask.float()
    assert torch.allclose(lp_full * m, lp_shared * m, atol=1e-5)
    with torch.no_grad():  # the chunked, checkpointed LM head equals the plain logits path
        plain, ent_plain = full_logprobs(model, torch.cat([p_ids, comp], 1), torch.cat([p_mask, cmask], 1), comp,
                                         0.9, chunked_head=False)
        chunked, ent_chunked = full_logprobs(model, torch.cat([p_ids, comp], 1), torch.cat([p_mask, cmask], 1),
                                             comp, 0.9)
    assert torch.allclose(plain, chunked, atol=1e-5) and torch.allclose(ent_plain, ent_chunked, atol=1e-4)
    (lp_full * m).sum().backward()
    (lp_shared * m).sum().backward()
    for (n, a), (_, b) in zip(model.named_parameters(), twin.named_parameters()):
        assert torch.allclose(a.grad, b.grad, atol=1e-5, rtol=1e-4), n
    assert shared_groups(rows, reps) and not shared_groups([prompts[i % 2] for i in range(6)], reps)


def test_generation_logprobs_match_training_forward():
    model, tok = _tiny()
    backend = TransformersBackend(model, tok)
    rb = backend.generate([[{"role": "user", "content": "hi there"}], [{"role": "user", "content": "2+2?"}]], 3,
                          SamplingParams(max_new_tokens=8, temperature=0.8, seed=3))
    assert rb.completion_ids.shape[0] == 6 and rb.group_index == [0, 0, 0, 1, 1, 1]
    lp, _ = full_logprobs(model, torch.cat([rb.prompt_ids, rb.completion_ids], 1),
                          torch.cat([rb.prompt_mask, rb.completion_mask], 1), rb.completion_ids, 0.8)
    m = rb.completion_mask.float()
    assert float(((lp - rb.logprobs).abs() * m).max()) < 1e-4
    # same seed, same samples: what makes a resumed run draw what the uninterrupted one did
    again = backend.generate([[{"role": "user", "content": "hi there"}], [{"role": "user", "content": "2+2?"}]], 3,
                             SamplingParams(max_new_tokens=8, temperature=0.8, seed=3))
    assert torch.equal(again.completion_ids, rb.completion_ids)


def test_common_prefix_forward_equals_full_forward_with_gradients():
    """An environment's system prompt shared by every task runs once per batch; same values and gradients."""
    from training.logprobs import common_prefix_len

    model, tok = _tiny()
    twin = copy.deepcopy(model)
    g = torch.Generator().manual_seed(2)
    system = list(range(200, 240))
    prompts = [system + [5, 6, 7], system + [9, 10, 11, 12, 13]]
    reps = 2
    plen = common_prefix_len(prompts)
    assert plen == 40
    comp = torch.randint(100, 40000, (4, 5), generator=g)
    cmask = torch.ones_like(comp)
    cmask[2, 3:] = 0
    p_ids, p_mask = left_pad([p for p in prompts for _ in range(reps)], tok.pad_token_id)
    lp_full, _ = full_logprobs(model, torch.cat([p_ids, comp], 1), torch.cat([p_mask, cmask], 1), comp, 1.0)
    r_ids, r_mask = left_pad([p[plen:] for p in prompts], tok.pad_token_id)
    lp_pre, _ = shared_prompt_logprobs(twin, r_ids, r_mask, comp, cmask, reps, 1.0,
                                       prefix_ids=torch.tensor([system]))
    m = cmask.float()
    assert torch.allclose(lp_full * m, lp_pre * m, atol=1e-5)
    (lp_full * m).sum().backward()
    (lp_pre * m).sum().backward()
    for (n, a), (_, b) in zip(model.named_parameters(), twin.named_parameters()):
        assert torch.allclose(a.grad, b.grad, atol=1e-5, rtol=1e-4), n
    # generation through the prefix cache agrees with the training forward too
    backend = TransformersBackend(model, tok)
    rb = backend.generate_ids(prompts, 2, SamplingParams(max_new_tokens=6, temperature=1.0, seed=0))
    lp, _ = full_logprobs(model, torch.cat([rb.prompt_ids, rb.completion_ids], 1),
                          torch.cat([rb.prompt_mask, rb.completion_mask], 1), rb.completion_ids, 1.0)
    assert float(((lp - rb.logprobs).abs() * rb.completion_mask).max()) < 1e-4


def test_vllm_is_never_imported_unless_selected():
    import subprocess
    import sys

    code = ("import sys, training.grpo, training.rollout, training.multiturn, training.sft, studio.commands.train\n"
            "assert 'vllm' not in sys.modules, 'vllm imported'\n"
            "from training.rollout import make_backend\n"
            "try:\n    make_backend('vllm', None, None)\nexcept RuntimeError as e:\n    print('ERR', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "ERR rollout.backend: vllm needs" in out.stdout


def test_a_kept_kv_cache_continues_exactly_like_a_fresh_run():
    """Multi-turn rollouts keep the batch's KV cache between turns and feed only the new tokens (ragged, padded in
    the middle of rows, rows dropped as episodes end); the next turn must be what a run from scratch gives."""
    model, tok = _tiny()
    eos = {tok.eos_token_id}
    greedy = SamplingParams(max_new_tokens=5, temperature=0.0)
    prompts = [[5, 6, 7, 8, 9, 10, 11], [12, 13, 14]]
    ids, mask = left_pad(prompts, tok.pad_token_id)
    (t1, m1, _, _), state = sample_with_state(model, ids, mask, greedy, eos_ids=eos, pad_id=tok.pad_token_id)
    streams = [p + t1[i, :int(m1[i].sum())].tolist() for i, p in enumerate(prompts)]
    assert all(len(s) - 1 <= f <= len(s) for f, s in zip(state.fed(), streams))  # the last sampled may be unfed
    extra = [[301, 302, 303, 304], [305]]  # tool results of different lengths
    streams = [s + e for s, e in zip(streams, extra)]
    for keep in ([0, 1], [1]):  # both rows, then with the first episode finished
        st = copy.copy(state)
        st.cache = copy.deepcopy(state.cache)
        if keep != [0, 1]:
            st.select(keep)
        fed = st.fed()
        new = [streams[r][f:] for r, f in zip(keep, fed)]
        (t2, m2, lp2, _), _ = continue_tokens(model, st, new, greedy, eos_ids=eos, pad_id=tok.pad_token_id)
        for j, r in enumerate(keep):
            fresh_ids, fresh_mask = left_pad([streams[r]], tok.pad_token_id)
            t_ref, m_ref, lp_ref, _ = sample_tokens(model, fresh_ids, fresh_mask, greedy, eos_ids=eos,
                                                    pad_id=tok.pad_token_id)
            n = int(m_ref[0].sum())
            assert t2[j, :n].tolist() == t_ref[0, :n].tolist()
            assert torch.allclose(lp2[j, :n], lp_ref[0, :n], atol=1e-4)
