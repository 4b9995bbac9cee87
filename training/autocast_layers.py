"""bf16-autocast forwards of a Llama-style decoder's linear, RMSNorm and SwiGLU MLP layers that keep less for the
backward, computing what autocast computes.

Why: under `torch.autocast` autograd keeps, until the backward,
- a bf16 copy of every weight (each linear casts its fp32 weight and the matmul saves the cast: 200 MB for
  SmolLM2-135M), although the fp32 weight is resident anyway and casting it again costs 0.3 ns per element;
- one bf16 copy of a layer's input per projection that reads it (q, k and v; gate and up each cast it again);
- in the MLP, silu(gate) and silu(gate) * up, one elementwise op away from the gate and up outputs it also keeps;
- in RMSNorm, the normalised input next to the input itself.
Measured on the GRPO benchmark's update (8 completions of 48 tokens on 2 shared prompts of 62, SmolLM2-135M),
autograd held 705 MB after the forward, more than the whole activation memory the model needs. The functions here
keep the fp32 weight (no copy) and cast it again in the backward, share one bf16 input copy between the projections
that read the same tensor, and recompute the elementwise results in the backward (705 -> 295 MB kept).

Every op, dtype and rounding is the one the stock layers run under autocast, so each layer's values and gradients
equal the stock layer's to the bit (tests/test_training_autocast_layers.py). Across a model two things differ in
the last place only: a tensor read by the residual and by a norm gets its gradients added in another fp32 order,
and a weight read by two forwards (the shared-prompt update runs the prompt and the completions separately) gets
its two bf16 gradients summed in fp32, where autocast's single cached cast summed them in bf16.

`install(model)` routes the modules it recognises through these functions whenever gradients are enabled under
bf16 autocast; everywhere else (generation under no_grad, fp32 training) the stock forward runs.
"""

from __future__ import annotations

import types
import weakref
from typing import Any

import torch
import torch.nn.functional as F

Tensor = torch.Tensor
BF16 = torch.bfloat16


class _InputCast:
    """The bf16 cast of the last tensor cast here, reused while that same tensor (same version) is read again:
    q, k and v read one normalised hidden state, and keep one copy of its cast instead of three."""

    def __init__(self) -> None:
        self._src: weakref.ref | None = None
        self._version = -1
        self._cast: Tensor | None = None

    def __call__(self, x: Tensor) -> Tensor:
        if x.dtype == BF16:
            return x
        if self._src is not None and self._src() is x and x._version == self._version:
            return self._cast
        self._src, self._version, self._cast = weakref.ref(x), x._version, x.to(BF16)
        return self._cast


bf16_input = _InputCast()


class _WeightCasts:
    """bf16 casts of weights written into one reused buffer per shape. Each cast is consumed by the very next
    matmul and never kept, so one buffer per shape suffices (4 MB for SmolLM2-135M's decoder; the trainer's LM head
    goes through training/lm_head.py); a fresh tensor per cast would instead fault in new pages every time, which
    on the VMs measured here cost 2 ns per element, ten times the cast itself."""

    def __init__(self) -> None:
        self._buffers: dict[tuple, Tensor] = {}

    def __call__(self, w: Tensor) -> Tensor:
        key = (tuple(w.shape), w.device)
        buf = self._buffers.get(key)
        if buf is None:
            buf = self._buffers[key] = torch.empty(w.shape, dtype=BF16, device=w.device)
        return buf.copy_(w)


bf16_weight = _WeightCasts()


def weight_grad(grad_out: Tensor, inp: Tensor) -> Tensor:
    """d(loss)/d(weight) of `inp @ weight.T` (grad.T @ inp), laid out like the weight, as autograd computes it."""
    return grad_out.reshape(-1, grad_out.shape[-1]).t().mm(inp.reshape(-1, inp.shape[-1]))


class LinearBf16(torch.autograd.Function):
    """`F.linear` under bf16 autocast, keeping the fp32 weight (not its bf16 cast) for the backward."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        x16 = bf16_input(x)
        out = F.linear(x16, bf16_weight(weight), None if bias is None else bias.to(BF16))
        ctx.save_for_backward(x16, weight)
        ctx.x_dtype, ctx.bias_dtype = x.dtype, None if bias is None else bias.dtype
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        x16, weight = ctx.saved_tensors
        gx = gw = gb = None
        if ctx.needs_input_grad[0]:
            gx = grad.matmul(bf16_weight(weight)).to(ctx.x_dtype)
        if ctx.needs_input_grad[1]:
            gw = weight_grad(grad, x16).to(weight.dtype)
        if ctx.bias_dtype is not None and ctx.needs_input_grad[2]:
            gb = grad.reshape(-1, grad.shape[-1]).sum(0).to(ctx.bias_dtype)
        return gx, gw, gb


class SwiGLUBf16(torch.autograd.Function):
    """`down(silu(gate(x)) * up(x))` under bf16 autocast, keeping only bf16 x, gate(x) and up(x) (and the fp32
    weights); silu(gate) and the product are recomputed in the backward."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, w_gate: Tensor, w_up: Tensor, w_down: Tensor) -> Tensor:
        x16 = bf16_input(x)
        g = F.linear(x16, bf16_weight(w_gate))
        u = F.linear(x16, bf16_weight(w_up))
        out = F.linear(F.silu(g) * u, bf16_weight(w_down))
        ctx.save_for_backward(x16, g, u, w_gate, w_up, w_down)
        ctx.x_dtype = x.dtype
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        x16, g, u, w_gate, w_up, w_down = ctx.saved_tensors
        s = F.silu(g)
        grad_p = grad.matmul(bf16_weight(w_down))
        gw_down = weight_grad(grad, s * u).to(w_down.dtype) if ctx.needs_input_grad[3] else None
        grad_g = torch.ops.aten.silu_backward(grad_p * u, g)
        grad_u = grad_p * s
        del grad_p, s
        gx = None
        if ctx.needs_input_grad[0]:  # the two reads of x, each cast back to x's dtype and summed there (autograd)
            gx = grad_g.matmul(bf16_weight(w_gate)).to(ctx.x_dtype)
            gx = gx + grad_u.matmul(bf16_weight(w_up)).to(ctx.x_dtype)
        gw_gate = weight_grad(grad_g, x16).to(w_gate.dtype) if ctx.needs_input_grad[1] else None
        gw_up = weight_grad(grad_u, x16).to(w_up.dtype) if ctx.needs_input_grad[2] else None
        return gx, gw_gate, gw_up, gw_down


class RMSNormFp32(torch.autograd.Function):
    """Llama's RMSNorm of an fp32 input (`weight * (x * rsqrt(mean(x^2) + eps))`), keeping x and the (N, 1)
    reciprocal RMS; the normalised input is recomputed in the backward. The backward is autograd's, op by op."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, eps: float) -> Tensor:
        r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(x, weight, r)
        return weight * (x * r)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, Tensor | None, None]:
        x, weight, r = ctx.saved_tensors
        gw = (grad * (x * r)).sum_to_size(weight.shape) if ctx.needs_input_grad[1] else None
        gx = None
        if ctx.needs_input_grad[0]:
            gn = grad * weight
            gr = (gn * x).sum_to_size(r.shape)
            g_mean = -0.5 * gr * r.pow(3)  # rsqrt backward
            g_sq = g_mean.expand(x.shape) / x.shape[-1]  # mean backward
            gx = gn * r + g_sq * (2 * x)  # x * r backward + pow(2) backward
        return gx, gw, None


def _active(x: Tensor) -> bool:
    dev = x.device.type
    return (torch.is_grad_enabled() and torch.is_autocast_enabled(dev)
            and torch.get_autocast_dtype(dev) == BF16)


def _linear_forward(self: torch.nn.Linear, x: Tensor) -> Tensor:
    if _active(x) and self.weight.dtype == torch.float32:
        return LinearBf16.apply(x, self.weight, self.bias)
    return torch.nn.Linear.forward(self, x)


def _norm_forward(self: Any, x: Tensor) -> Tensor:
    if _active(x) and x.dtype == torch.float32 and self.weight.dtype == torch.float32:
        return RMSNormFp32.apply(x, self.weight, self.variance_epsilon)
    return type(self).forward(self, x)


def _mlp_forward(self: Any, x: Tensor) -> Tensor:
    if _active(x) and self.gate_proj.weight.dtype == torch.float32:
        return SwiGLUBf16.apply(x, self.gate_proj.weight, self.up_proj.weight, self.down_proj.weight)
    return type(self).forward(self, x)


def _plain_linear(m: Any, bias_ok: bool = True) -> bool:
    return type(m) is torch.nn.Linear and (bias_ok or m.bias is None)


def _is_swiglu(m: Any) -> bool:
    from transformers import activations

    silu = (torch.nn.SiLU, getattr(activations, "SiLUActivation", torch.nn.SiLU))  # F.silu, either of them
    parts = [getattr(m, n, None) for n in ("gate_proj", "up_proj", "down_proj")]
    return all(_plain_linear(p, bias_ok=False) for p in parts) and isinstance(getattr(m, "act_fn", None), silu)


# Llama's RMSNorm (weight * normalised input) under the names of the architectures that copy it; norms that
# differ (Gemma's 1 + weight, ...) keep their stock forward.
LLAMA_RMSNORMS = {"LlamaRMSNorm", "MistralRMSNorm", "Qwen2RMSNorm", "Qwen3RMSNorm"}


def _is_llama_rmsnorm(m: Any) -> bool:
    return (type(m).__name__ in LLAMA_RMSNORMS and hasattr(m, "variance_epsilon")
            and isinstance(getattr(m, "weight", None), torch.nn.Parameter))


def install(model: Any) -> dict[str, int]:
    """Route `model`'s SwiGLU MLPs, Llama RMSNorms and remaining plain nn.Linear layers through the functions
    above (per instance; the stock forward still runs outside bf16 autocast or without gradients). Returns how
    many modules of each kind were routed."""
    counts = {"mlp": 0, "rmsnorm": 0, "linear": 0}
    fused: set[int] = set()
    for m in model.modules():
        if _is_swiglu(m):
            m.forward = types.MethodType(_mlp_forward, m)
            fused.update(id(p) for p in (m.gate_proj, m.up_proj, m.down_proj))
            counts["mlp"] += 1
        elif _is_llama_rmsnorm(m):
            m.forward = types.MethodType(_norm_forward, m)
            counts["rmsnorm"] += 1
    for m in model.modules():
        if _plain_linear(m) and id(m) not in fused:
            m.forward = types.MethodType(_linear_forward, m)
            counts["linear"] += 1
    return counts
