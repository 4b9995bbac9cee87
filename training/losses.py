"""Policy losses and advantages of the GRPO family as pure, typed functions, with registries by name.

Why this shape (as in verl's policy-loss registry and prime-rl's typed loss inputs/outputs): the math of GRPO,
DAPO, Dr. GRPO and GSPO differs in three separable places -- how advantages are normalised, how the importance
ratio is formed and clipped, and how per-token losses are aggregated into one number. Keeping each a small pure
function (no model, no trainer state) makes every variant a combination of named parts, testable against TRL and a
float64 reference without running a trainer.

Shapes: B sequences, T completion positions. `mask` is 1 on tokens the policy generated and 0 on padding and on
tool-output tokens (multi-turn), which are never trained on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Literal

import torch

Tensor = torch.Tensor


# ---------------------------------------------------------------------------------------------------- advantages
def group_advantages(
    rewards: Tensor,
    group_size: int,
    *,
    scale: Literal["group", "batch", "none"] = "group",
    leave_one_out: bool = False,
    eps: float = 1e-4,
) -> tuple[Tensor, Tensor]:
    """Advantages of rewards laid out as consecutive groups of `group_size` completions of one prompt.

    Returns (advantages (N,), zero_std (N,) bool). `scale="group"` divides by the group's (unbiased) std as GRPO
    does, "batch" by the whole batch's std, "none" not at all (Dr. GRPO: std scaling biases towards easy and
    hard prompts). `leave_one_out` uses the mean of the *other* completions as the baseline (RLOO), which makes
    the baseline independent of the sample it scores.
    """
    if rewards.dim() != 1 or rewards.numel() % group_size:
        raise ValueError(f"rewards must be 1-D with a multiple of group_size={group_size} items, got {tuple(rewards.shape)}")
    if group_size < 2:
        raise ValueError("group_size must be at least 2: a group of one has no baseline")
    grouped = rewards.view(-1, group_size)
    mean = grouped.mean(dim=1, keepdim=True)
    std_group = grouped.std(dim=1, keepdim=True)  # unbiased, as TRL's nanstd
    if leave_one_out:
        baseline = (grouped.sum(dim=1, keepdim=True) - grouped) / (group_size - 1)
        adv = grouped - baseline
    else:
        adv = grouped - mean
    zero_std = torch.isclose(std_group, torch.zeros_like(std_group)).expand_as(grouped)
    if scale == "group":
        adv = adv / (std_group + eps)
    elif scale == "batch":
        std_b = rewards.std() if rewards.numel() > 1 else torch.zeros((), dtype=rewards.dtype)
        adv = adv / (std_b + eps)
    elif scale != "none":
        raise ValueError(f"scale must be group, batch or none, got {scale!r}")
    return adv.reshape(-1), zero_std.reshape(-1)


def weight_negative_advantages(advantages: Tensor, weight: float) -> Tensor:
    """Scale the negative advantages by `weight` in [0, 1], leaving the positive ones as they are.

    Why: a sample with a positive advantage pulls probability towards what it did (it sharpens the policy); one with
    a negative advantage pushes probability away from what it did, onto everything else, and so raises the entropy.
    Sharpening favours greedy pass@1, spreading favours pass@k (Zhu et al. 2025, "The Surprising Effectiveness of
    Negative Reinforcement in LLM Reasoning", whose weighted REINFORCE damps the positive side instead).
    `weight=0` keeps only the reinforcement of the better-than-the-group samples (with a binary reward: online
    rejection-sampling fine-tuning, as RAFT); values between (e.g. 0.1) damp the push without dropping it; 1 is
    plain GRPO. Measured on learn_workplace (benchmarks/results/learn_workplace.json): with 0, with the shaped and
    with the binary reward, GRPO at lr 2e-6 / 3e-6 still lost 2 of the SFT model's 8 test passes, as the stages
    with 1 lost theirs, so there the push away was not what cost them; at lr 5e-7 it gained 2.
    """
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"negative advantage weight must be in [0, 1], got {weight}")
    if weight == 1.0:
        return advantages
    return torch.where(advantages < 0, advantages * weight, advantages)


def high_entropy_token_mask(entropy: Tensor, mask: Tensor, fraction: float) -> Tensor:
    """`mask` restricted to the `fraction` of its tokens where the policy's entropy is highest (ties kept).

    Why: Wang et al. 2025 ("Beyond the 80/20 Rule: High-Entropy Minority Tokens Drive Effective Reinforcement
    Learning for LLM Reasoning") keep the policy gradient of only the top 20 % highest-entropy tokens, the "forking"
    tokens where the policy actually chose between continuations, and match or beat full-token GRPO. For a
    low-entropy SFT policy it matters more: a sampled token that the policy gave little probability at a position
    where it was otherwise sure carries a large gradient (1 - p) in every rewarded sample, so full-token updates
    mostly raise such incidental tokens; at the forks, the update moves the decisions the reward is about."""
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"top entropy fraction must be in (0, 1], got {fraction}")
    m = mask.bool()
    n = int(m.sum())
    if fraction == 1.0 or n == 0:
        return mask
    k = max(1, int(round(fraction * n)))
    threshold = torch.topk(entropy.detach()[m].float(), k).values[-1]
    return mask * (entropy.detach() >= threshold).to(mask.dtype)


def zero_variance_outcomes(scores: list[float], passed: list[bool], group_size: int) -> Tensor:
    """Per completion (N,): +1 in a group whose completions all passed with one score, -1 in one where all failed
    with one score, 0 elsewhere (groups with a spread, whose group advantages carry the signal)."""
    if len(scores) != len(passed) or len(scores) % group_size:
        raise ValueError(f"scores and passed must be equal-length multiples of group_size={group_size}")
    out = torch.zeros(len(scores))
    for start in range(0, len(scores), group_size):
        sc, ok = scores[start:start + group_size], passed[start:start + group_size]
        if max(sc) - min(sc) < 1e-9 and (all(ok) or not any(ok)):
            out[start:start + group_size] = 1.0 if all(ok) else -1.0
    return out


def zero_variance_advantages(entropy: Tensor, mask: Tensor, outcome: Tensor, alpha: float,
                             negative_alpha: float | None = None) -> Tensor:
    """Token advantages (B, T) for the completions of zero-variance groups, after RL-ZVP (Le et al. 2025, "No
    Prompt Left Behind: Exploiting Zero-Variance Prompts in LLM Reinforcement Learning via Entropy-Guided
    Advantage Shaping"): a group whose completions all passed gets +alpha * H_t on each token, one whose
    completions all failed gets -negative_alpha * (max_k H_k - H_t), with H the policy's (detached) entropy at the
    token and the max over the completion's own tokens; rows with outcome 0 get 0.

    Why: group-relative advantages are exactly 0 when every completion scored the same, so GRPO learns nothing
    from those prompts and DAPO spends rollouts replacing them. Yet an all-pass group is evidence of what the
    policy already does right: with only a few informative groups per step (a CPU budget), their update moves the
    shared parts of the policy -- e.g. which tool an episode calls first -- for every prompt, and nothing holds up
    the behaviour of the prompts the policy already solves. Reinforcing the all-pass completions, most at the
    uncertain (forking) tokens, anchors it. For all-fail groups the push is strongest on the confident tokens of a
    wrong answer and zero at its most uncertain one. `negative_alpha` defaults to `alpha`; 0 turns that side off."""
    if alpha < 0 or (negative_alpha is not None and negative_alpha < 0):
        raise ValueError("zero-variance advantage coefficients must be >= 0")
    neg = alpha if negative_alpha is None else negative_alpha
    m = mask.to(entropy.dtype)
    h = entropy.detach() * m
    h_max = h.max(dim=-1, keepdim=True).values
    o = outcome.to(entropy.dtype).unsqueeze(-1)
    pos = (o > 0).to(h.dtype) * alpha * h
    negs = (o < 0).to(h.dtype) * -neg * (h_max - h)
    return (pos + negs) * m


# ------------------------------------------------------------------------------------------- importance ratios
def log_importance_ratio(logprobs: Tensor, old_logprobs: Tensor, mask: Tensor, level: str = "token") -> Tensor:
    """log(pi/pi_old) per token (B, T), or GSPO's length-normalised sequence ratio (B, 1): the masked mean of the
    token log-ratios, so that one sequence has one ratio whatever its length."""
    log_ratio = logprobs - old_logprobs
    if level == "token":
        return log_ratio
    if level == "sequence":
        seq = (log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
        return seq.unsqueeze(-1)
    raise ValueError(f"importance sampling level must be 'token' or 'sequence', got {level!r}")


def k3_kl(logprobs: Tensor, ref_logprobs: Tensor) -> Tensor:
    """Schulman's k3 estimator of KL(pi || ref) per token: exp(r - p) - (r - p) - 1 >= 0, unbiased and low variance."""
    d = ref_logprobs - logprobs
    return torch.exp(d) - d - 1


# -------------------------------------------------------------------------------------------- per-token losses
@dataclass(frozen=True)
class PolicyLossInputs:
    """What a per-token policy loss needs; tensors are (B, T) except advantages (B,)."""

    logprobs: Tensor
    old_logprobs: Tensor
    advantages: Tensor
    mask: Tensor
    ref_logprobs: Tensor | None = None
    # (B, T) 0/1: the tokens whose loss (and so gradient) counts, e.g. high_entropy_token_mask; the aggregation's
    # denominators still come from `mask`, so the other tokens contribute exactly zero and nothing is rescaled
    token_selection: Tensor | None = None


@dataclass(frozen=True)
class PolicyLossParams:
    epsilon_low: float = 0.2
    epsilon_high: float = 0.2
    dual_clip_c: float | None = None
    importance_sampling_level: str = "token"
    beta: float = 0.0
    kl_ratio_correction: bool = False  # weight the KL term by the (detached-free) importance ratio, as TRL's default


@dataclass
class PolicyLossOutputs:
    """`per_token_loss` (B, T) before aggregation and detached statistics for the metrics log."""

    per_token_loss: Tensor
    stats: dict[str, Tensor] = field(default_factory=dict)


PolicyLossFn = Callable[[PolicyLossInputs, PolicyLossParams], PolicyLossOutputs]
POLICY_LOSSES: dict[str, PolicyLossFn] = {}


def register_policy_loss(name: str) -> Callable[[PolicyLossFn], PolicyLossFn]:
    def deco(fn: PolicyLossFn) -> PolicyLossFn:
        POLICY_LOSSES[name] = fn
        return fn

    return deco


def _masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    x = x.expand_as(mask) if x.shape != mask.shape else x
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


@register_policy_loss("clipped")
def clipped_policy_loss(inp: PolicyLossInputs, p: PolicyLossParams) -> PolicyLossOutputs:
    """PPO's clipped surrogate with asymmetric clipping [1 - eps_low, 1 + eps_high] (DAPO's clip-higher) and an
    optional dual clip (for negative advantages the loss is capped at c * |A|, so a huge ratio on a bad sample cannot
    blow up the update). Token or sequence (GSPO) importance ratios; k3 KL to a reference added when beta > 0."""
    adv = inp.advantages.unsqueeze(-1) if inp.advantages.dim() == 1 else inp.advantages
    log_w = log_importance_ratio(inp.logprobs, inp.old_logprobs, inp.mask, p.importance_sampling_level)
    ratio = torch.exp(log_w)
    clipped = torch.clamp(ratio, 1 - p.epsilon_low, 1 + p.epsilon_high)
    loss1 = -ratio * adv
    loss2 = -clipped * adv
    per_token = torch.max(loss1, loss2)
    if p.dual_clip_c is not None:
        capped = torch.min(per_token, -adv * p.dual_clip_c)
        per_token = torch.where(adv < 0, capped, per_token)
    per_token = per_token.expand_as(inp.mask) if per_token.shape != inp.mask.shape else per_token
    stats: dict[str, Tensor] = {}
    with torch.no_grad():
        m = inp.mask
        stats["clip_low_frac"] = _masked_mean(((ratio < 1 - p.epsilon_low) & (adv < 0)).float(), m)
        stats["clip_high_frac"] = _masked_mean(((ratio > 1 + p.epsilon_high) & (adv > 0)).float(), m)
        stats["ratio_mean"] = _masked_mean(ratio.detach(), m)
    if p.beta != 0.0:
        if inp.ref_logprobs is None:
            raise ValueError("beta > 0 needs ref_logprobs (the reference model's log-probs)")
        kl = k3_kl(inp.logprobs, inp.ref_logprobs)
        if p.kl_ratio_correction:
            kl = kl * ratio
        per_token = per_token + p.beta * kl
        stats["kl"] = _masked_mean(kl.detach(), inp.mask)
    return PolicyLossOutputs(per_token, stats)


# ------------------------------------------------------------------------------------------------ aggregation
@dataclass(frozen=True)
class AggregationScope:
    """The denominators of the whole optimizer batch. With micro-batches, each micro-batch's loss is divided by
    the batch totals, so that the sum of micro-batch gradients equals the full-batch gradient exactly."""

    num_sequences: float
    num_tokens: float
    normalizer: float = 1.0  # Dr. GRPO's constant (max completion length)


AggregationFn = Callable[[Tensor, Tensor, AggregationScope], Tensor]
AGGREGATIONS: dict[str, AggregationFn] = {}


def register_aggregation(name: str) -> Callable[[AggregationFn], AggregationFn]:
    def deco(fn: AggregationFn) -> AggregationFn:
        AGGREGATIONS[name] = fn
        return fn

    return deco


@register_aggregation("seq-mean-token-mean")
def seq_mean_token_mean(per_token: Tensor, mask: Tensor, scope: AggregationScope) -> Tensor:
    """GRPO: each sequence's mean over its tokens, then the mean over sequences (short answers weigh more per token)."""
    per_seq = (per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
    return per_seq.sum() / scope.num_sequences


@register_aggregation("token-mean")
def token_mean(per_token: Tensor, mask: Tensor, scope: AggregationScope) -> Tensor:
    """DAPO (and TRL's bnpo/dapo): every generated token of the batch weighs the same."""
    return (per_token * mask).sum() / max(scope.num_tokens, 1.0)


@register_aggregation("seq-mean-token-sum-norm")
def seq_mean_token_sum_norm(per_token: Tensor, mask: Tensor, scope: AggregationScope) -> Tensor:
    """Dr. GRPO: token sums divided by a constant (sequences x max length), so length biases no gradient."""
    return (per_token * mask).sum() / (scope.num_sequences * scope.normalizer)


@register_aggregation("seq-mean-token-sum")
def seq_mean_token_sum(per_token: Tensor, mask: Tensor, scope: AggregationScope) -> Tensor:
    return (per_token * mask).sum() / scope.num_sequences


def aggregate(name: str, per_token: Tensor, mask: Tensor, scope: AggregationScope | None = None) -> Tensor:
    if name not in AGGREGATIONS:
        raise KeyError(f"unknown aggregation {name!r}; known: {sorted(AGGREGATIONS)}")
    if scope is None:
        scope = AggregationScope(num_sequences=float(mask.shape[0]), num_tokens=float(mask.sum().item()))
    return AGGREGATIONS[name](per_token, mask, scope)


def policy_loss(
    inputs: PolicyLossInputs,
    params: PolicyLossParams,
    *,
    aggregation: str,
    scope: AggregationScope | None = None,
    loss_fn: str = "clipped",
) -> tuple[Tensor, dict[str, Tensor]]:
    """The scalar loss of one (micro-)batch: the named per-token loss, then the named aggregation."""
    if loss_fn not in POLICY_LOSSES:
        raise KeyError(f"unknown policy loss {loss_fn!r}; known: {sorted(POLICY_LOSSES)}")
    out = POLICY_LOSSES[loss_fn](inputs, params)
    per_token = out.per_token_loss
    if inputs.token_selection is not None:
        per_token = per_token * inputs.token_selection
        out.stats["selected_token_frac"] = _masked_mean(inputs.token_selection.float(), inputs.mask)
    return aggregate(aggregation, per_token, inputs.mask, scope), out.stats


# ------------------------------------------------------------------------------------------------- log-probs
def demonstration_nll(logprobs: Tensor, mask: Tensor, num_tokens: float) -> Tensor:
    """The supervised term mixed into a policy update (guidance.sft_coef): the negative log-likelihood of the
    demonstration tokens in `mask`, summed and divided by `num_tokens` -- the demonstration tokens of the whole step
    (every micro-batch and process), so micro-batches add up to the step's token mean as the policy loss's
    aggregation does. Its gradient is a policy gradient with advantage 1 on every demonstrated token."""
    if num_tokens <= 0:
        raise ValueError(f"num_tokens must be positive, got {num_tokens}")
    return -(logprobs * mask).sum() / num_tokens


def token_logprobs(logits: Tensor, targets: Tensor, temperature: float = 1.0) -> Tensor:
    """log p(target) under logits / temperature, computed as logit - logsumexp to avoid a full log_softmax copy."""
    if temperature != 1.0:
        logits = logits / temperature
    picked = torch.gather(logits, -1, targets.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


def token_entropy(logits: Tensor, temperature: float = 1.0) -> Tensor:
    """Entropy per position (no gradient; a metric)."""
    with torch.no_grad():
        logits = logits.detach().float() / temperature
        logp = torch.log_softmax(logits, dim=-1)
        return -(logp.exp() * logp).sum(-1)
