"""Per-token log-probs (and entropies) of chosen tokens straight from final hidden states: the LM head, the
log-softmax and the gather in one autograd function that never holds more than one chunk of logits.

Why: a policy-gradient loss needs log p(token) at each completion position, one number, but the LM head makes a
vocabulary-sized row of logits for it (49,152 for SmolLM2). Materialised for a batch with autograd's
intermediates, that is about 300 MB at 8 x 48 positions in fp32. Here the logits are made `chunk` positions at a
time into buffers reused by every chunk, only the log-sum-exp per position is kept, and the backward makes each
chunk's logits again and turns them into the gradient in place:

    d lp / d logits = onehot(target) - softmax(logits / T), divided by T.

Reusing buffers matters as much as their size: a fresh tensor of this size faults in its pages every time, which
on the VMs measured here costs 0.5 ms per MB, more than the arithmetic. The weight's gradient is summed over the
chunks in fp32, in vocabulary slices, so no full-size bf16 gradient is ever made.

The arithmetic is the one `token_logprobs` (training/losses.py) and autocast run, op for op: logits in the compute
dtype (bf16 under autocast: weight and hidden cast, fp32 accumulation), then in fp32 divided by the temperature,
log-sum-exp, gather; entropies from `log_softmax`. Values are equal to the bit and gradients up to the order in
which fp32 partial sums are added (tests/test_training_lm_head.py).
"""

from __future__ import annotations

from typing import Any

import torch

Tensor = torch.Tensor
VOCAB_SLICE = 8192


def compute_dtype(weight: Tensor) -> torch.dtype:
    """bf16 under bf16 autocast on the weight's device, else the weight's own dtype."""
    dev = weight.device.type
    if torch.is_autocast_enabled(dev) and torch.get_autocast_dtype(dev) == torch.bfloat16:
        return torch.bfloat16
    return weight.dtype


class HeadLogprobs(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, hidden: Tensor, weight: Tensor, targets: Tensor, temperature: float, dtype: torch.dtype,
                chunk: int) -> tuple[Tensor, Tensor]:
        lead = hidden.shape[:-1]
        h = hidden.reshape(-1, hidden.shape[-1]).to(dtype)
        tgt = targets.reshape(-1)
        w = weight.to(dtype)
        n, c = h.shape[0], max(1, min(chunk, h.shape[0]))
        logits = torch.empty(c, w.shape[0], dtype=dtype, device=h.device)
        sdt = _softmax_dtype(dtype)
        scaled = logits if dtype == sdt else torch.empty(logits.shape, dtype=sdt, device=h.device)
        work = torch.empty(logits.shape, dtype=sdt, device=h.device)
        lp, lse, ent = (torch.empty(n, dtype=sdt, device=h.device) for _ in range(3))
        for s in range(0, n, c):
            e = min(s + c, n)
            x = _scaled_logits(h[s:e], w, temperature, logits[: e - s], scaled[: e - s])
            lse[s:e] = torch.logsumexp(x, dim=-1)
            lp[s:e] = x.gather(-1, tgt[s:e, None]).squeeze(-1) - lse[s:e]
            logp = torch.log_softmax(x, dim=-1, out=work[: e - s])
            ent[s:e] = -torch.exp(logp, out=scaled[: e - s]).mul_(logp).sum(-1)
        del w, logits, scaled, work
        ctx.save_for_backward(h, weight, tgt, lse)
        ctx.temperature, ctx.chunk, ctx.hidden_dtype = temperature, c, hidden.dtype
        lp, ent = lp.view(lead), ent.view(lead)
        ctx.mark_non_differentiable(ent)
        return lp, ent

    @staticmethod
    def backward(ctx: Any, grad_lp: Tensor, _grad_ent: Tensor | None) -> tuple[Tensor | None, ...]:
        h, weight, tgt, lse = ctx.saved_tensors
        temp, c = ctx.temperature, ctx.chunk
        dtype = h.dtype
        w = weight.to(dtype)
        sdt = _softmax_dtype(dtype)
        g = grad_lp.reshape(-1).to(sdt)
        n, vocab = h.shape[0], w.shape[0]
        logits = torch.empty(c, vocab, dtype=dtype, device=h.device)
        scaled = logits if dtype == sdt else torch.empty(logits.shape, dtype=sdt, device=h.device)
        grad_h = torch.empty(h.shape, dtype=ctx.hidden_dtype, device=h.device) if ctx.needs_input_grad[0] else None
        grad_w = torch.empty(weight.shape, dtype=weight.dtype, device=h.device) if ctx.needs_input_grad[1] else None
        gw_slice = torch.empty(min(VOCAB_SLICE, vocab), h.shape[1], dtype=dtype, device=h.device)
        starts = list(range(0, n, c))
        for i, s in enumerate(reversed(starts)):  # last chunk first, the order autograd ran the chunks in
            e = min(s + c, n)
            x = _scaled_logits(h[s:e], w, temp, logits[: e - s], scaled[: e - s])
            # log-sum-exp's backward, then the gather's (added where the target is), then the division's
            x.sub_(lse[s:e, None]).exp_().mul_(-g[s:e, None])
            x.scatter_add_(-1, tgt[s:e, None], g[s:e, None])
            if temp != 1.0:
                x.div_(temp)
            gx = x if dtype == sdt else logits[: e - s].copy_(x)
            if grad_h is not None:
                grad_h[s:e] = gx.mm(w)
            if grad_w is not None:
                for v in range(0, vocab, VOCAB_SLICE):
                    ve = min(v + VOCAB_SLICE, vocab)
                    part = torch.mm(gx[:, v:ve].t(), h[s:e], out=gw_slice[: ve - v])
                    if i == 0:
                        grad_w[v:ve] = part
                    else:
                        grad_w[v:ve] += part
        if grad_h is not None:
            grad_h = grad_h.view(*grad_lp.shape, h.shape[1])
        return grad_h, grad_w, None, None, None, None


def _softmax_dtype(dtype: torch.dtype) -> torch.dtype:
    """The softmax runs in fp32 at least (`.float()` of bf16 logits, as the stock path does)."""
    return dtype if dtype in (torch.float32, torch.float64) else torch.float32


def _scaled_logits(h: Tensor, w: Tensor, temperature: float, out: Tensor, scaled: Tensor) -> Tensor:
    """Logits / temperature of one chunk in the softmax dtype, written into `scaled` (through `out` in the compute
    dtype when they differ)."""
    torch.mm(h, w.t(), out=out)
    x = out if scaled is out else scaled.copy_(out)
    if temperature != 1.0:
        x.div_(temperature)
    return x


def head_token_logprobs(hidden: Tensor, targets: Tensor, weight: Tensor, temperature: float,
                        chunk: int = 64) -> tuple[Tensor, Tensor]:
    """(..., ) log-probs of `targets` (...,) and entropies under softmax(hidden @ weight.T / temperature), for
    hidden (..., D) and an LM head weight (V, D) without bias; the entropies carry no gradient."""
    return HeadLogprobs.apply(hidden, weight, targets, float(temperature), compute_dtype(weight), chunk)
