"""LeanAdamW (bf16 moments with stochastic rounding) tracks fp32 AdamW; plain bf16 rounding would not."""

from __future__ import annotations

import torch

from training.optim import LeanAdamW, make_optimizer, stochastic_round_bf16


def test_stochastic_rounding_is_unbiased_where_nearest_rounding_is_not():
    x = torch.full((200_000,), 1.0 + 2 ** -10)  # between two bf16 neighbours (spacing 2**-7 near 1)
    sr = stochastic_round_bf16(x, torch.Generator().manual_seed(0)).float()
    assert abs(float(sr.mean()) - float(x[0])) < 1e-4
    assert float(x.to(torch.bfloat16).float()[0]) == 1.0  # round-to-nearest loses the increment entirely


def test_lean_adamw_tracks_fp32_adamw():
    torch.manual_seed(0)
    w0 = torch.randn(1000, 32)
    a, b = torch.nn.Parameter(w0.clone()), torch.nn.Parameter(w0.clone())
    ref = torch.optim.AdamW([a], lr=1e-3, betas=(0.9, 0.999), weight_decay=0.01)
    lean = make_optimizer("adamw-bf16", [b], lr=1e-3, betas=(0.9, 0.999), weight_decay=0.01)
    assert isinstance(lean, LeanAdamW)
    for _ in range(100):
        g = torch.randn(1000, 32) * 0.01 + 0.002
        a.grad, b.grad = g.clone(), g.clone()
        ref.step()
        lean.step()
    moved = (a - w0).norm()
    assert float((a - b).norm() / moved) < 0.02
    assert lean.state[b]["exp_avg"].dtype == torch.bfloat16 and b.grad is None  # state halved, grad freed


def test_adams_first_step_moves_every_weight_by_lr_where_sgd_follows_the_gradient():
    """Why `optim.optimizer: sgd` exists: a GRPO run of a few updates under Adam is sign descent, so a weight whose
    gradient is a thousandth of another's moves as far; SGD moves the weights that carry the gradient."""
    g = torch.tensor([1e-2, 1e-5, -1e-5, 0.0])
    moved = {}
    for name, lr in (("adamw", 1e-3), ("sgd", 1e-1)):
        w = torch.nn.Parameter(torch.zeros(4))
        opt = make_optimizer(name, [w], lr=lr, betas=(0.9, 0.99), weight_decay=0.0)
        w.grad = g.clone()
        opt.step()
        moved[name] = -w.detach()
    assert torch.allclose(moved["adamw"][:3].abs(), torch.full((3,), 1e-3), rtol=1e-3)  # each by lr, sign of g
    assert torch.allclose(moved["sgd"], 1e-1 * g)
    assert float(moved["sgd"][1].abs() / moved["sgd"][0].abs()) < 2e-3


def test_momentum_belongs_to_sgd():
    import pytest
    from pydantic import ValidationError

    from schemas.train_config import OptimSection

    assert OptimSection(optimizer="sgd", momentum=0.9).momentum == 0.9
    with pytest.raises(ValidationError, match="momentum applies to optimizer 'sgd' only"):
        OptimSection(optimizer="adamw", momentum=0.9)


def test_lean_adamw_keeps_its_rounding_noise_on_the_parameters_device():
    """The default optimizer on a GPU policy: the pre-drawn rounding noise must live where the parameters do (it was
    a CPU tensor, and the first CUDA step failed with a device mismatch). The meta device stands in for a second
    device here: any CPU tensor mixed into the arithmetic raises exactly as on CUDA."""
    p = torch.nn.Parameter(torch.zeros(3000, device="meta"))
    p.grad = torch.zeros(3000, device="meta")
    opt = LeanAdamW([p], lr=1e-3)
    opt.step()
    assert opt.state[p]["exp_avg"].device.type == "meta" and opt.state[p]["step"] == 1
