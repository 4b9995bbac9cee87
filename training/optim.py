"""Optimizers (`make_optimizer`: adamw, adamw-bf16, sgd). `LeanAdamW`: AdamW whose two moment buffers are stored
in bfloat16 with stochastic rounding.

Why: with fp32 weights, fp32 gradients and fp32 Adam moments, the optimizer state is half of a full fine-tune's
static memory (1.1 GB of 2.2 GB for a 135M model). bf16 moments halve it. Plain round-to-nearest bf16 storage
breaks Adam: with beta2 = 0.999 the per-step change of the second moment (0.1 %) is below bf16's resolution
(0.4 %), so the moment would freeze. Stochastic rounding makes every stored value an unbiased estimate of the fp32
one, so the moving averages stay correct in expectation; the update itself is computed in fp32 and applied to the
fp32 weights. Large tensors are processed in chunks so the fp32 temporaries stay small, and every chunk works in the
same few preallocated buffers: a fresh 4 MB temporary faults in 1,024 new pages, which on the VMs measured here
costs 2 ms, twelve times the arithmetic on it (results are the same to the bit).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable

import torch

CHUNK = 1 << 20


def stochastic_round_bf16(x: torch.Tensor, generator: torch.Generator | None = None,
                          noise: torch.Tensor | None = None, out: torch.Tensor | None = None,
                          work: torch.Tensor | None = None) -> torch.Tensor:
    """fp32 -> bf16, rounding up or down with probability proportional to the distance (unbiased).

    `noise` (int32 in [0, 2**16), at least as long as x) may be passed to skip drawing fresh random numbers, which
    is most of the cost; LeanAdamW passes a random window of a pre-drawn buffer. `out` (bf16, x's size) receives
    the result and `work` (int32, at least x's size) holds the intermediate bits, so that nothing is allocated."""
    bits = x.contiguous().view(-1).view(torch.int32)
    if noise is None:
        noise = torch.randint(0, 1 << 16, bits.shape, dtype=torch.int32, device=x.device, generator=generator)
    else:
        noise = noise[: bits.numel()]
    work = torch.empty_like(bits) if work is None else work[: bits.numel()]
    rounded = torch.add(bits, noise, out=work).bitwise_and_(-65536)  # clear the low 16 bits after adding noise
    if out is None:
        return rounded.view(torch.float32).to(torch.bfloat16).view(x.shape)
    return out.copy_(rounded.view(torch.float32).view(out.shape))  # exact: the low 16 bits are zero


class LeanAdamW(torch.optim.Optimizer):
    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, seed: int = 0):
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})
        self._gen = torch.Generator().manual_seed(seed)
        # one pre-drawn buffer of rounding noise, read through a fresh random window per chunk: drawing 2 x 135M
        # random integers every step would cost more than the rest of the update
        self._noise = torch.randint(0, 1 << 16, (4 * CHUNK,), dtype=torch.int32, generator=self._gen)
        self._work: dict[torch.device, tuple[torch.Tensor, ...]] = {}

    @torch.no_grad()
    def step(self, closure: Any = None) -> None:
        for group in self.param_groups:
            lr, (b1, b2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                if not st:
                    st["step"] = 0
                    st["exp_avg"] = torch.zeros_like(p, dtype=torch.bfloat16)
                    st["exp_avg_sq"] = torch.zeros_like(p, dtype=torch.bfloat16)
                st["step"] += 1
                t = st["step"]
                c1, c2 = 1 - b1 ** t, 1 - b2 ** t
                flat_p, flat_g = p.view(-1), p.grad.view(-1)
                flat_m, flat_v = st["exp_avg"].view(-1), st["exp_avg_sq"].view(-1)
                m_buf, v_buf, g_buf, bits, noise = self._buffers(p.device)
                for s in range(0, flat_p.numel(), CHUNK):
                    e = min(s + CHUNK, flat_p.numel())
                    n = e - s
                    g = flat_g[s:e] if flat_g.dtype == torch.float32 else g_buf[:n].copy_(flat_g[s:e])
                    m = m_buf[:n].copy_(flat_m[s:e]).mul_(b1).add_(g, alpha=1 - b1)
                    v = v_buf[:n].copy_(flat_v[s:e]).mul_(b2).addcmul_(g, g, value=1 - b2)
                    o1, o2 = torch.randint(0, 3 * CHUNK, (2,), generator=self._gen).tolist()
                    stochastic_round_bf16(m, noise=noise[o1:o1 + CHUNK], out=flat_m[s:e], work=bits)
                    stochastic_round_bf16(v, noise=noise[o2:o2 + CHUNK], out=flat_v[s:e], work=bits)
                    if wd:
                        flat_p[s:e].mul_(1 - lr * wd)
                    denom = v.sqrt_().div_(math.sqrt(c2)).add_(eps)
                    flat_p[s:e].addcdiv_(m, denom, value=-lr / c1)
                p.grad = None  # free each gradient as soon as it is applied

    def _buffers(self, device: torch.device) -> tuple[torch.Tensor, ...]:
        """(m, v, g) fp32, one int32 chunk-sized work buffer and the rounding noise, made once per device (the
        parameters' one: a CUDA policy must not read CPU noise) and reused by every chunk."""
        bufs = self._work.get(device)
        if bufs is None:
            f32 = [torch.empty(CHUNK, dtype=torch.float32, device=device) for _ in range(3)]
            bufs = self._work[device] = (*f32, torch.empty(CHUNK, dtype=torch.int32, device=device),
                                         self._noise.to(device))
        return bufs


def make_optimizer(name: str, params: list[Any], *, lr: float, betas: tuple[float, float], weight_decay: float,
                   momentum: float = 0.0, seed: int = 0) -> torch.optim.Optimizer:
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, betas=betas, weight_decay=weight_decay, foreach=False)
    if name == "adamw-bf16":
        return LeanAdamW(params, lr=lr, betas=betas, weight_decay=weight_decay, seed=seed)
    if name == "sgd":  # decoupled decay like AdamW's would need its own loop; SGD's L2 decay is the usual meaning
        return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay, foreach=False)
    raise ValueError(f"unknown optimizer {name!r}: adamw, adamw-bf16 or sgd")


SFT_MOMENTS = "sft_moments.pt"  # beside an SFT model: the AdamW moments its SFT stage ended with, by weight name


def save_moments(path: Path, optimizer: torch.optim.Optimizer, model: torch.nn.Module,
                 betas: tuple[float, float]) -> int:
    """Write `optimizer`'s AdamW moments (step, exp_avg, exp_avg_sq) keyed by `model`'s parameter names, with the
    betas they were averaged with. Names, not the optimizer's positional state dict: the next stage builds its own
    optimizer over its own parameter list. `path` lies in the caller's temporary model folder, which is renamed into
    place once complete (as checkpoints write optimizer.pt), so the file needs no atomic write of its own. Returns
    how many tensors were written."""
    opt = getattr(optimizer, "optimizer", optimizer)  # accelerate wraps the optimizer TRL steps
    moments = {}
    for name, p in model.named_parameters():
        st = opt.state.get(p) if p.requires_grad else None
        if st and "exp_avg_sq" in st:
            moments[name] = {"step": int(st["step"]), "exp_avg": st["exp_avg"].detach().float().clone(),
                             "exp_avg_sq": st["exp_avg_sq"].detach().float().clone()}
    if not moments:
        raise ValueError(f"{type(opt).__name__} holds no AdamW moments for any trained weight: nothing to save")
    torch.save({"betas": [float(b) for b in betas], "moments": moments}, path)
    return len(moments)


def load_moments(path: Path, optimizer: torch.optim.Optimizer, model: torch.nn.Module,
                 betas: tuple[float, float], *, first: bool = True) -> int:
    """Set `optimizer`'s state to the moments in `path` (from `save_moments`) for each trained weight of `model`;
    with `first` False the first moment starts at zero (the second moment and the step count are SFT's).

    Refused, with the reason, when the file is missing, when the betas differ (Adam's bias correction divides by
    1 - beta2**step: other betas would rescale every update) or when a trained weight has no moments of the right
    shape (the SFT stage froze or shaped it differently)."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no SFT moments here; run the SFT stage with sft.save_optimizer: true, or "
                                "unset optim.sft_moments")
    blob = torch.load(path, map_location="cpu", weights_only=True)
    saved = tuple(blob["betas"])
    if tuple(float(b) for b in betas) != saved:
        raise ValueError(f"{path}: the SFT moments were averaged with betas {list(saved)}; set optim.betas to "
                         f"{list(saved)} to continue them (got {list(betas)})")
    lean = isinstance(optimizer, LeanAdamW)
    n = 0
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        m = blob["moments"].get(name)
        if m is None or m["exp_avg"].shape != p.shape:
            found = "none" if m is None else f"shape {tuple(m['exp_avg'].shape)}"
            raise ValueError(f"{path}: trained weight {name} {tuple(p.shape)} has {found} in the SFT moments; the SFT "
                             "stage must train the same weights (model.freeze_layers / freeze_embeddings, no LoRA)")
        dtype = torch.bfloat16 if lean else torch.float32
        exp_avg = m["exp_avg"].to(p.device, dtype) if first else torch.zeros_like(p, dtype=dtype)
        optimizer.state[p] = {"step": m["step"] if lean else torch.tensor(float(m["step"])),
                              "exp_avg": exp_avg, "exp_avg_sq": m["exp_avg_sq"].to(p.device, dtype)}
        n += 1
    return n
