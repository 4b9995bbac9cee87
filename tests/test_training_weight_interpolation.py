"""Weight interpolation between a start policy and a trained one (training/weight_interpolation.py)."""

from __future__ import annotations

import pytest
import torch

from training.weight_interpolation import InterpolationError, interpolate_state


def _states() -> tuple[dict, dict]:
    start = {"w": torch.tensor([0.0, 1.0, -2.0]), "b": torch.tensor([4.0], dtype=torch.bfloat16),
             "steps": torch.tensor([3])}
    end = {"w": torch.tensor([2.0, 1.0, 2.0]), "b": torch.tensor([8.0], dtype=torch.bfloat16),
           "steps": torch.tensor([3])}
    return start, end


def test_interpolation_endpoints_midpoint_and_dtypes() -> None:
    start, end = _states()
    assert torch.equal(interpolate_state(start, end, 0.0)["w"], start["w"])
    assert torch.equal(interpolate_state(start, end, 1.0)["w"], end["w"])
    mid = interpolate_state(start, end, 0.5)
    assert mid["w"].tolist() == [1.0, 1.0, 0.0]
    assert mid["b"].dtype == torch.bfloat16 and mid["b"].item() == 6.0
    assert mid["steps"].tolist() == [3]
    assert start["w"].tolist() == [0.0, 1.0, -2.0]  # the inputs are not modified


@pytest.mark.parametrize("change, match", [
    (lambda s, e: e.pop("b"), r"only in the start \['b'\]"),
    (lambda s, e: e.__setitem__("w", torch.zeros(4)), r"parameter 'w': shape \(3,\) in the start, \(4,\)"),
    (lambda s, e: e.__setitem__("steps", torch.tensor([4])), r"integer buffer 'steps' differs"),
])
def test_mismatched_models_are_refused_naming_the_parameter(change, match) -> None:
    start, end = _states()
    change(start, end)
    with pytest.raises(InterpolationError, match=match):
        interpolate_state(start, end, 0.5)


def test_alpha_outside_the_segment_is_refused() -> None:
    start, end = _states()
    with pytest.raises(InterpolationError, match=r"alpha must be within \[0, 1\].*got 1.5"):
        interpolate_state(start, end, 1.5)
