"""Sampling from a LoRA policy through merged weights, with the base weights restored bit for bit afterwards.

Why: an unmerged adapter adds two small matmuls (and their launches) to every adapted linear at every decoded
token. On SmolLM2-135M with adapters on every linear of 20 layers, that made the workplace rollouts of a GRPO step
28 % slower than full fine-tuning's (230 s against 180 s for the same 20 episodes). Merging costs one B @ A per
module per call. peft's own `unmerge` subtracts the product again, which leaves rounding residue in weights that
are meant to stay frozen and that an adapter-only checkpoint assumes unchanged, so the base weights are copied
before the merge and copied back after it instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch


def _lora_layers(model: Any) -> list[Any]:
    try:
        from peft.tuners.lora import LoraLayer
    except ImportError:  # peft is a dependency, but a model without adapters needs none of it
        return []
    return [m for m in model.modules() if isinstance(m, LoraLayer) and not m.merged]


@contextmanager
def merged_adapters(model: Any) -> Iterator[None]:
    """Inside: every active LoRA adapter of `model` merged into its base weight (the same function, fewer ops).
    On exit: the base weights are exactly what they were and the adapters are unmerged. No-op without adapters."""
    layers = _lora_layers(model)
    if not layers:
        yield
        return
    saved = []
    with torch.no_grad():
        for m in layers:
            base = m.get_base_layer()
            saved.append((m, base.weight.detach().clone(), None if base.bias is None else base.bias.detach().clone()))
            m.merge()
    try:
        yield
    finally:
        with torch.no_grad():
            for m, weight, bias in saved:
                base = m.get_base_layer()
                base.weight.copy_(weight)
                if bias is not None:
                    base.bias.copy_(bias)
                m.merged_adapters.clear()
