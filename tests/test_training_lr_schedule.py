"""The GRPO stage's learning-rate schedule: the decay matches transformers' schedulers (the ones TRL's trainers
use) step for step, warm-up never gives an update rate 0, and bad arguments are refused."""

from __future__ import annotations

import pytest
import torch
from transformers import get_cosine_schedule_with_warmup, get_linear_schedule_with_warmup

from training.lr_schedule import scheduled_lr


def _transformers_rates(make, total: int, warmup: int) -> list[float]:
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.5)
    sched = make(opt, num_warmup_steps=warmup, num_training_steps=total)
    rates = []
    for _ in range(total):
        rates.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return rates


@pytest.mark.parametrize("schedule,make", [("cosine", get_cosine_schedule_with_warmup),
                                           ("linear", get_linear_schedule_with_warmup)])
@pytest.mark.parametrize("total,warmup", [(4, 0), (10, 0), (10, 3)])
def test_decay_matches_transformers_after_warmup(schedule, make, total, warmup):
    ours = [scheduled_lr(0.5, s, total, warmup=warmup, schedule=schedule) for s in range(total)]
    theirs = _transformers_rates(make, total, warmup)
    assert ours[warmup:] == pytest.approx(theirs[warmup:], abs=1e-12)
    assert all(r > 0 for r in ours)  # the last update still moves the weights
    assert all(a > b for a, b in zip(ours[warmup:], ours[warmup + 1:]))  # strictly decaying after warm-up


def test_warmup_starts_above_zero_and_constant_stays():
    # transformers' warm-up gives the first update rate 0 (a wasted step); ours gives base / warmup
    assert [scheduled_lr(1.0, s, 6, warmup=3) for s in range(6)] == pytest.approx([1 / 3, 2 / 3, 1, 1, 1, 1])
    assert _transformers_rates(get_linear_schedule_with_warmup, 6, 3)[0] == 0.0
    # after warm-up, cosine decays over the remaining 3 updates: progress 2/3 at the last, 0.5 * (1 + cos(2pi/3))
    assert scheduled_lr(1.0, 5, 6, warmup=3, schedule="cosine") == pytest.approx(0.25)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="unknown learning-rate schedule 'step'"):
        scheduled_lr(1.0, 1, 4, schedule="step")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="need total >= 1"):
        scheduled_lr(1.0, 0, 0)
