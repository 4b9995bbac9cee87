"""Policy losses: parity with TRL 1.16's GRPOTrainer loss, and a float64 loop-by-loop reference of the math."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from training.losses import (
    AGGREGATIONS,
    POLICY_LOSSES,
    AggregationScope,
    PolicyLossInputs,
    PolicyLossParams,
    group_advantages,
    high_entropy_token_mask,
    k3_kl,
    policy_loss,
    token_logprobs,
    weight_negative_advantages,
    zero_variance_advantages,
    zero_variance_outcomes,
)

B, P, T = 6, 5, 9
TEMPERATURE = 0.7


@pytest.fixture(scope="module")
def tiny_model_and_tok():
    from training.model import load_tokenizer
    from training.policy import build_random_model

    tok = load_tokenizer("default")
    model = build_random_model(tok, seed=3)
    model.float()
    return model, tok


def _batch(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    vocab = 49152
    prompt_ids = torch.randint(10, vocab, (B, P), generator=g)
    completion_ids = torch.randint(10, vocab, (B, T), generator=g)
    lengths = torch.tensor([9, 3, 7, 1, 9, 5])
    completion_mask = (torch.arange(T)[None, :] < lengths[:, None]).long()
    advantages = torch.randn(B, generator=g)
    return prompt_ids, completion_ids, completion_mask, advantages, g


def _our_logprobs(model, prompt_ids, completion_ids, completion_mask):
    ids = torch.cat([prompt_ids, completion_ids], 1)
    att = torch.cat([torch.ones_like(prompt_ids), completion_mask], 1)
    out = model(input_ids=ids, attention_mask=att, logits_to_keep=T + 1)
    return token_logprobs(out.logits[:, :-1].float(), completion_ids, TEMPERATURE)


CASES = {
    # name: (TRL kwargs, our aggregation, our importance level)
    "grpo": ({"loss_type": "grpo"}, "seq-mean-token-mean", "token"),
    "dr_grpo": ({"loss_type": "dr_grpo"}, "seq-mean-token-sum-norm", "token"),
    "dapo": ({"loss_type": "dapo", "epsilon_high": 0.28}, "token-mean", "token"),
    "gspo_sequence": ({"loss_type": "grpo", "importance_sampling_level": "sequence", "epsilon": 3e-4,
                       "epsilon_high": 4e-4}, "seq-mean-token-mean", "sequence"),
    "grpo_kl": ({"loss_type": "grpo", "beta": 0.04, "use_bias_correction_kl": False}, "seq-mean-token-mean", "token"),
    "grpo_kl_corrected": ({"loss_type": "grpo", "beta": 0.04, "use_bias_correction_kl": True}, "seq-mean-token-mean",
                          "token"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_trl_parity_loss_and_grad(case, tiny_model_and_tok, tmp_path):
    """TRL's own `_compute_loss` on a real (tiny) model vs ours on an identical copy: loss within 1e-5 and the
    same gradients."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    trl_kwargs, aggregation, level = CASES[case]
    base, tok = tiny_model_and_tok
    trl_model, our_model = copy.deepcopy(base), copy.deepcopy(base)
    args = GRPOConfig(output_dir=str(tmp_path), num_generations=B, per_device_train_batch_size=B,
                      max_completion_length=T, temperature=TEMPERATURE, report_to=[], use_cpu=True, bf16=False,
                      **{"beta": 0.0, **trl_kwargs})
    if trl_kwargs.get("beta"):  # TRL loads its reference model from a path
        base.save_pretrained(tmp_path / "model")
        tok.save_pretrained(tmp_path / "model")
        trl_model = str(tmp_path / "model")
    trainer = GRPOTrainer(model=trl_model, reward_funcs=lambda completions, **k: [0.0] * len(completions),
                          args=args, train_dataset=Dataset.from_list([{"prompt": "x"}] * B), processing_class=tok)
    trainer.current_gradient_accumulation_steps = 1
    trainer.model.train()

    prompt_ids, completion_ids, completion_mask, advantages, g = _batch()
    with torch.no_grad():
        ref_lp = _our_logprobs(our_model, prompt_ids, completion_ids, completion_mask)
    # old log-probs away from the current ones, so that ratios leave the clip range on both sides
    scale = 3e-4 if level == "sequence" else 0.3
    old = (ref_lp + scale * torch.randn(B, T, generator=g)).detach()
    ref = (ref_lp + 0.2 * torch.randn(B, T, generator=g)).detach()
    inputs = {
        "prompt_ids": prompt_ids, "prompt_mask": torch.ones_like(prompt_ids),
        "completion_ids": completion_ids, "completion_mask": completion_mask,
        "advantages": advantages, "old_per_token_logps": old,
        "num_items_in_batch": completion_mask.sum(),
    }
    if trl_kwargs.get("beta"):
        inputs["ref_per_token_logps"] = ref
    trl_loss = trainer._compute_loss(trainer.model, inputs)
    trl_loss.backward()

    our_model.train()
    lp = _our_logprobs(our_model, prompt_ids, completion_ids, completion_mask)
    mask = completion_mask.float()
    params = PolicyLossParams(epsilon_low=trainer.epsilon_low, epsilon_high=trainer.epsilon_high,
                              importance_sampling_level=level, beta=float(trl_kwargs.get("beta", 0.0)),
                              kl_ratio_correction=bool(trl_kwargs.get("use_bias_correction_kl")))
    scope = AggregationScope(num_sequences=B, num_tokens=float(mask.sum()), normalizer=T)
    ours, stats = policy_loss(PolicyLossInputs(lp, old, advantages, mask, ref if params.beta else None), params,
                              aggregation=aggregation, scope=scope)
    ours.backward()

    assert abs(float(ours.detach()) - float(trl_loss.detach())) <= 1e-5, (case, float(ours), float(trl_loss))
    assert float(trl_loss) != 0.0
    if level == "token":
        assert float(stats["clip_low_frac"]) + float(stats["clip_high_frac"]) > 0  # clipping was exercised
    for (name, p1), (_, p2) in zip(trainer.model.named_parameters(), our_model.named_parameters()):
        if p1.grad is None and p2.grad is None:
            continue
        assert torch.allclose(p1.grad, p2.grad, atol=1e-6, rtol=1e-4), name


# ------------------------------------------------------------------------------------- float64 reference
def _reference_loss(lp, old, adv, mask, *, eps_low, eps_high, level, aggregation, beta=0.0, ref=None,
                    dual_c=None, normalizer=1.0):
    """The math written out sample by sample, token by token, in Python floats (double precision)."""
    b, t = len(lp), len(lp[0])
    per_seq_losses, per_seq_counts = [], []
    for i in range(b):
        n = sum(mask[i])
        if level == "sequence":
            s = sum((lp[i][j] - old[i][j]) * mask[i][j] for j in range(t)) / max(n, 1.0)
        terms = []
        for j in range(t):
            if not mask[i][j]:
                terms.append(0.0)
                continue
            logr = s if level == "sequence" else lp[i][j] - old[i][j]
            r = math.exp(logr)
            rc = min(max(r, 1 - eps_low), 1 + eps_high)
            loss = max(-r * adv[i], -rc * adv[i])
            if dual_c is not None and adv[i] < 0:
                loss = min(loss, -adv[i] * dual_c)
            if beta:
                d = ref[i][j] - lp[i][j]
                loss += beta * (math.exp(d) - d - 1)
            terms.append(loss)
        per_seq_losses.append(sum(terms))
        per_seq_counts.append(n)
    total_tokens = sum(per_seq_counts)
    if aggregation == "seq-mean-token-mean":
        return sum(l / max(c, 1.0) for l, c in zip(per_seq_losses, per_seq_counts)) / b
    if aggregation == "token-mean":
        return sum(per_seq_losses) / total_tokens
    if aggregation == "seq-mean-token-sum-norm":
        return sum(per_seq_losses) / (b * normalizer)
    if aggregation == "seq-mean-token-sum":
        return sum(per_seq_losses) / b
    raise AssertionError(aggregation)


@pytest.mark.parametrize("aggregation", sorted(AGGREGATIONS))
@pytest.mark.parametrize("level", ["token", "sequence"])
@pytest.mark.parametrize("extras", [{}, {"beta": 0.1}, {"dual_c": 3.0}])
def test_losses_match_float64_reference(aggregation, level, extras):
    g = torch.Generator().manual_seed(11)
    b, t = 5, 7
    lp = -torch.rand(b, t, generator=g, dtype=torch.float64) * 3
    old = lp + 0.4 * torch.randn(b, t, generator=g, dtype=torch.float64)
    ref = lp + 0.3 * torch.randn(b, t, generator=g, dtype=torch.float64)
    adv = torch.randn(b, generator=g, dtype=torch.float64) * 2
    mask = (torch.rand(b, t, generator=g) > 0.3).double()
    mask[0] = 0  # an empty sequence must not divide by zero
    beta, dual_c = extras.get("beta", 0.0), extras.get("dual_c")
    params = PolicyLossParams(epsilon_low=0.2, epsilon_high=0.28, importance_sampling_level=level, beta=beta,
                              dual_clip_c=dual_c)
    scope = AggregationScope(num_sequences=b, num_tokens=float(mask.sum()), normalizer=t)
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 1e-5)):
        inp = PolicyLossInputs(lp.to(dtype), old.to(dtype), adv.to(dtype), mask.to(dtype),
                               ref.to(dtype) if beta else None)
        ours, _ = policy_loss(inp, params, aggregation=aggregation, scope=scope)
        want = _reference_loss(lp.tolist(), old.tolist(), adv.tolist(), mask.tolist(), eps_low=0.2, eps_high=0.28,
                               level=level, aggregation=aggregation, beta=beta, ref=ref.tolist(), dual_c=dual_c,
                               normalizer=t)
        assert abs(float(ours) - want) <= tol * max(1.0, abs(want)), (dtype, float(ours), want)


def test_micro_batches_sum_to_the_full_batch_gradient():
    """Aggregation over micro-batches with batch-wide denominators gives exactly the full-batch loss."""
    g = torch.Generator().manual_seed(5)
    lp = -torch.rand(8, 6, generator=g, dtype=torch.float64)
    old = lp + 0.2 * torch.randn(8, 6, generator=g, dtype=torch.float64)
    adv = torch.randn(8, generator=g, dtype=torch.float64)
    mask = (torch.rand(8, 6, generator=g) > 0.2).double()
    params = PolicyLossParams()
    for agg in AGGREGATIONS:
        scope = AggregationScope(num_sequences=8, num_tokens=float(mask.sum()), normalizer=6)
        full, _ = policy_loss(PolicyLossInputs(lp, old, adv, mask), params, aggregation=agg, scope=scope)
        parts = sum(policy_loss(PolicyLossInputs(lp[s:s + 3], old[s:s + 3], adv[s:s + 3], mask[s:s + 3]), params,
                                aggregation=agg, scope=scope)[0] for s in range(0, 8, 3))
        assert abs(float(full) - float(parts)) < 1e-12, agg


# ------------------------------------------------------------------------------------------------ advantages
def test_group_advantages_match_trl_formula_and_options():
    r = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.5, 0.5, 0.5, 0.5])
    adv, zero = group_advantages(r, 4, scale="group")
    g = r.view(2, 4)
    want = ((g - g.mean(1, keepdim=True)) / (g.std(1, keepdim=True) + 1e-4)).view(-1)
    assert torch.allclose(adv, want)
    assert zero.tolist() == [False] * 4 + [True] * 4
    assert torch.all(adv[4:] == 0)
    adv_none, _ = group_advantages(r, 4, scale="none")
    assert torch.allclose(adv_none[:4], torch.tensor([0.5, -0.5, -0.5, 0.5]))
    adv_loo, _ = group_advantages(r, 4, scale="none", leave_one_out=True)
    # RLOO: reward minus the mean of the other three
    assert torch.allclose(adv_loo[:4], torch.tensor([1 - 1 / 3, -2 / 3, -2 / 3, 1 - 1 / 3]))
    adv_b, _ = group_advantages(r, 4, scale="batch")
    assert torch.allclose(adv_b, (r - g.mean(1).repeat_interleave(4)) / (r.std() + 1e-4))
    with pytest.raises(ValueError, match="multiple of group_size"):
        group_advantages(torch.ones(7), 4)


def test_negative_advantage_weight_damps_only_the_push_away():
    adv, _ = group_advantages(torch.tensor([1.0, 0.0, 0.0, 0.0, 0.2, 0.9, 0.4, 0.4]), 4)
    kept = weight_negative_advantages(adv, 0.0)
    assert torch.equal(kept[adv > 0], adv[adv > 0])  # the reinforced samples keep their full weight
    assert torch.all(kept[adv <= 0] == 0) and int((adv < 0).sum()) == 6
    damped = weight_negative_advantages(adv, 0.1)
    assert torch.allclose(damped[adv < 0], 0.1 * adv[adv < 0]) and torch.equal(damped[adv > 0], adv[adv > 0])
    assert weight_negative_advantages(adv, 1.0) is adv
    with pytest.raises(ValueError, match=r"in \[0, 1\], got 1.5"):
        weight_negative_advantages(adv, 1.5)


def test_high_entropy_mask_keeps_the_forking_tokens_of_the_completion():
    ent = torch.tensor([[0.01, 2.0, 0.02, 0.5, 9.0], [1.5, 0.03, 0.0, 0.04, 0.05]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0, 1.0]])  # 9.0 sits on padding
    sel = high_entropy_token_mask(ent, mask, 1 / 3)  # 3 of the 9 completion tokens
    assert sel.tolist() == [[0, 1, 0, 1, 0], [1, 0, 0, 0, 0]]
    assert high_entropy_token_mask(ent, mask, 1.0) is mask
    with pytest.raises(ValueError, match=r"in \(0, 1\], got 0"):
        high_entropy_token_mask(ent, mask, 0.0)


def test_token_selection_zeroes_the_gradient_elsewhere_and_keeps_it_on_the_selected_tokens():
    """Selected tokens get exactly the full loss's gradient (same denominators); the others get none."""
    g = torch.Generator().manual_seed(7)
    old = -torch.rand(4, 6, generator=g, dtype=torch.float64)
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5], dtype=torch.float64)
    mask = (torch.rand(4, 6, generator=g) > 0.2).double()
    sel = mask * (torch.rand(4, 6, generator=g) > 0.6).double()
    for agg in AGGREGATIONS:
        scope = AggregationScope(num_sequences=4, num_tokens=float(mask.sum()), normalizer=6)
        lp_all = (old + 0.05).requires_grad_(True)
        lp_sel = (old + 0.05).requires_grad_(True)
        policy_loss(PolicyLossInputs(lp_all, old, adv, mask), PolicyLossParams(), aggregation=agg, scope=scope)[0].backward()
        loss, stats = policy_loss(PolicyLossInputs(lp_sel, old, adv, mask, token_selection=sel), PolicyLossParams(),
                                  aggregation=agg, scope=scope)
        loss.backward()
        assert torch.equal(lp_sel.grad, lp_all.grad * sel), agg
        assert (lp_all.grad * (mask - sel)).abs().sum() > 0  # the unselected tokens did carry gradient before
        assert abs(float(stats["selected_token_frac"]) - float(sel.sum() / mask.sum())) < 1e-12


def test_zero_variance_outcomes_mark_only_the_all_pass_and_all_fail_groups():
    scores = [1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0.3, 0.3, 0.3, 0.3]
    ok = [True] * 4 + [False] * 4 + [True, False, False, False] + [False] * 4
    assert zero_variance_outcomes(scores, ok, 4).tolist() == [1] * 4 + [-1] * 4 + [0] * 4 + [-1] * 4
    # equal scores but a mixed verdict: neither side of RL-ZVP applies
    assert zero_variance_outcomes([0.5, 0.5], [True, False], 2).tolist() == [0, 0]
    with pytest.raises(ValueError, match="multiples of group_size=4"):
        zero_variance_outcomes([1.0] * 6, [True] * 6, 4)


def test_zero_variance_advantages_follow_the_entropy_of_each_token():
    """All-pass rows: +alpha * H per token; all-fail rows: -alpha_neg * (row max H - H), 0 at the row's most
    uncertain token; rows of groups with a spread and padding (whose entropy is largest here) get 0."""
    ent = torch.tensor([[0.5, 2.0, 0.0, 9.0], [0.5, 2.0, 0.0, 9.0], [0.5, 2.0, 0.0, 9.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]] * 3)
    out = zero_variance_advantages(ent, mask, torch.tensor([1.0, -1.0, 0.0]), 0.1, negative_alpha=0.2)
    expected = torch.tensor([[0.05, 0.2, 0.0, 0.0], [-0.3, 0.0, -0.4, 0.0], [0.0, 0.0, 0.0, 0.0]])
    assert torch.allclose(out, expected), out
    same = zero_variance_advantages(ent, mask, torch.tensor([-1.0, -1.0, -1.0]), 0.1)  # negative side defaults to alpha
    assert torch.allclose(same[0], torch.tensor([-0.15, 0.0, -0.2, 0.0]))
    off = zero_variance_advantages(ent, mask, torch.tensor([1.0, -1.0, 0.0]), 0.1, negative_alpha=0.0)
    assert bool((off[1:] == 0).all()) and bool((off[0] > 0).any())
    with pytest.raises(ValueError, match=">= 0"):
        zero_variance_advantages(ent, mask, torch.tensor([1.0, -1.0, 0.0]), -0.1)


def test_k3_kl_is_nonnegative_and_zero_at_equality():
    x = torch.randn(100, dtype=torch.float64)
    y = torch.randn(100, dtype=torch.float64)
    assert torch.all(k3_kl(x, y) >= 0)
    assert torch.allclose(k3_kl(x, x), torch.zeros(100, dtype=torch.float64))


def test_registries_name_every_part():
    assert "clipped" in POLICY_LOSSES
    assert set(AGGREGATIONS) >= {"seq-mean-token-mean", "token-mean", "seq-mean-token-sum-norm"}
    with pytest.raises(KeyError, match="unknown aggregation"):
        policy_loss(PolicyLossInputs(torch.zeros(1, 1), torch.zeros(1, 1), torch.zeros(1), torch.ones(1, 1)),
                    PolicyLossParams(), aggregation="nope")


def test_token_logprobs_equals_log_softmax_gather():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(3, 4, 50, generator=g, dtype=torch.float64)
    tgt = torch.randint(0, 50, (3, 4), generator=g)
    want = torch.log_softmax(logits / 0.7, -1).gather(-1, tgt[..., None]).squeeze(-1)
    assert torch.allclose(token_logprobs(logits, tgt, 0.7), want)
