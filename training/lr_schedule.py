"""The GRPO stage's learning rate at each update: linear warm-up, then constant, cosine or linear decay to zero.

Why a decay: a stage that starts from an SFT model whose own schedule ended near zero jumps back to a constant
rate and stops there, at its largest steps (the "re-warming" of continued training, where the loss rises first and
any gain comes from the annealed tail). A decaying schedule ends the stage on small steps, as TRL's GRPOConfig does
by default (`lr_scheduler_type="linear"`). Measured on learn_workplace (session 23): cosine decay over 8 guided SGD
updates lost 0 and 1 of 48 greedy passes (seeds 0, 1) where the constant rate lost 0-4 (mean 2.25, four seeds); no
stage gained. The rate is a pure function of the step number, so a resumed run takes exactly the rates the
uninterrupted one would.
"""

from __future__ import annotations

import math
from typing import Literal

Schedule = Literal["constant", "cosine", "linear"]


def scheduled_lr(base: float, step: int, total: int, *, warmup: int = 0, schedule: Schedule = "constant") -> float:
    """The rate for update number `step` (0-based) of `total`.

    Warm-up: (step + 1) / warmup of `base` for the first `warmup` updates (the first update is never at rate 0).
    After it, `schedule` runs from `base` at update `warmup` towards 0 at update `total`; the last update keeps a
    small positive rate (progress (total - 1 - warmup) / (total - warmup) < 1), so no update is wasted."""
    if total < 1 or step < 0:
        raise ValueError(f"scheduled_lr: need total >= 1 and step >= 0 (got step {step}, total {total})")
    if warmup and step < warmup:
        return base * (step + 1) / warmup
    if schedule == "constant" or total <= warmup:
        return base
    progress = min(1.0, (step - warmup) / (total - warmup))
    if schedule == "cosine":
        return base * 0.5 * (1.0 + math.cos(math.pi * progress))
    if schedule == "linear":
        return base * (1.0 - progress)
    raise ValueError(f"unknown learning-rate schedule {schedule!r}: use constant, cosine or linear")
