"""bf16 autocast for generation that casts each weight once per call, frozen weights included.

Why: autocast keeps the bf16 cast of a weight for the rest of the autocast region only when the weight is an fp32
leaf that requires grad. A frozen weight (`model.freeze_layers`, `model.freeze_embeddings` with SmolLM2's tied LM
head, or every base weight under LoRA) is cast again at every forward. In a decode loop that is a fresh allocation
of the frozen weights' bf16 copies for every token (about 130 MB for the embeddings and 10 of SmolLM2-135M's 30
layers), and each one is served with new pages that the kernel must zero. Together with the allocator settings
of `training.memory.roomy_allocator` (which `generating` also applies), this made the trainer's evaluation of 24
workplace episodes 2.1x slower, with 30x the page faults (`benchmarks/generation_allocator.py`); the cast count
itself is checked in tests/test_training_generation_amp.py (once per call instead of once per token).

Inside `generation_autocast`, frozen fp32 parameters are marked as requiring grad, so the cache keeps their casts
like everyone else's, and are restored on exit. Grad mode must be off (checked), so no graph is built and nothing
gets a gradient; the casts are the same ones, so the outputs are bit-identical.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch


@contextmanager
def generation_autocast(model: Any, enabled: bool = True) -> Iterator[None]:
    """`torch.autocast(bf16)` over `model`'s device whose weight-cast cache also holds the frozen weights.

    Only for no-grad code (sampling, evaluation); under grad it raises instead of silently training frozen weights."""
    if not enabled:
        yield
        return
    if torch.is_grad_enabled():
        raise RuntimeError("generation_autocast is for no-grad generation: wrap the call in torch.no_grad()")
    params = list(model.parameters())
    frozen = [p for p in params if not p.requires_grad and p.dtype == torch.float32]
    device_type = params[0].device.type if params else "cpu"
    for p in frozen:
        p.requires_grad_(True)
    try:
        with torch.autocast(device_type=device_type, dtype=torch.bfloat16):
            yield
    finally:
        for p in frozen:
            p.requires_grad_(False)


@contextmanager
def generating(model: Any, autocast_bf16: bool) -> Iterator[None]:
    """What every sampling loop runs under: the model in eval mode (its training mode restored on exit), LoRA
    adapters merged (`training.lora_sampling.merged_adapters`), the allocator settings for generation
    (`training.memory.roomy_allocator`) and, when asked, `generation_autocast`."""
    from training.lora_sampling import merged_adapters
    from training.memory import roomy_allocator

    was_training = model.training
    model.eval()
    try:
        with merged_adapters(model), roomy_allocator(), generation_autocast(model, autocast_bf16):
            yield
    finally:
        model.train(was_training)
