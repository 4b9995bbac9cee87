"""Linear interpolation between two policies' weights: start + alpha * (end - start).

Why: an RL stage that moves a policy away from its starting point (here the SFT model) changes many greedy
decisions at once, some for the better and some for the worse. Moving back part of the way towards the start keeps
a fraction of the update's direction while shrinking its side effects: WiSE-FT (Wortsman et al., 2022) for
fine-tuning, and WARP's "linear interpolation towards initialization" (Rame et al., 2024) for RL policies.
alpha = 1 is the trained policy, alpha = 0 the start. `benchmarks/interpolate_to_start.py` measures it on the
workplace stage (there alpha 0.5 lost more test tasks than alpha 1, so it is a measurement, not a training option).

A pure function over state dicts; loading and saving models stays with the caller.
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import Tensor


class InterpolationError(ValueError):
    """The two state dicts cannot be interpolated; the message names the parameter and what differs."""


def interpolate_state(start: Mapping[str, Tensor], end: Mapping[str, Tensor], alpha: float) -> dict[str, Tensor]:
    """start + alpha * (end - start) for every floating tensor (computed in float32, returned in start's dtype);
    integer buffers must be equal and are taken from `start`.

    Both dicts must hold the same names and shapes: interpolating a LoRA adapter against a full model, or two
    different architectures, is refused rather than half-done."""
    if not 0.0 <= alpha <= 1.0:
        raise InterpolationError(f"alpha must be within [0, 1] (0 = the start, 1 = the end), got {alpha}")
    missing, extra = sorted(set(start) - set(end)), sorted(set(end) - set(start))
    if missing or extra:
        raise InterpolationError(f"the two models hold different parameters: only in the start {missing[:3]}, "
                                 f"only in the end {extra[:3]}")
    out: dict[str, Tensor] = {}
    for name, a in start.items():
        b = end[name]
        if a.shape != b.shape:
            raise InterpolationError(f"parameter {name!r}: shape {tuple(a.shape)} in the start, {tuple(b.shape)} "
                                     "in the end")
        if a.is_floating_point():
            mixed = a.float() + alpha * (b.float() - a.float())
            out[name] = mixed.to(a.dtype)
        elif bool((a == b).all()):
            out[name] = a.clone()
        else:
            raise InterpolationError(f"integer buffer {name!r} differs between the two models; it cannot be "
                                     "interpolated")
    return out
