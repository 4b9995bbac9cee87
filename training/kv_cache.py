"""A KV cache for sampling loops that grows in place instead of re-concatenating at every token.

Why: transformers' `DynamicLayer.update` is `torch.cat([keys, new], dim=-2)`, so each decoded token copies the
whole cache of every layer, a cost that grows with the context (multi-turn tool episodes have long ones). On
SmolLM2-135M (8 rows, CPU) removing it makes a decode step 9-12% faster at 300-1000 cached tokens
(benchmarks/kv_cache_decode.py); the rest of the step is weight-bound matmuls and attention. `GrowingLayer`
keeps each layer's keys and values in a buffer with spare room (a fixed number of token slots) and writes new
tokens into it; `keys`/`values` are views of the filled part, so everything that reads them (attention, masks,
`get_seq_length`) is unchanged.

Only for sampling (no gradient): writing in place into a buffer that autograd saved would fail the backward's
version check, and a training forward runs each cache once, where there is nothing to save.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

SPARE_TOKENS = 256  # room added at each growth: one copy per 256 decoded tokens instead of one per token


def attended_dtype(t: torch.Tensor) -> torch.dtype:
    """The dtype attention reads `t` in: autocast's when it is on for `t`'s device, else `t`'s own.

    Why: under bf16 autocast SmolLM2's keys leave the rotary embedding in float32 (the cos/sin tables are float32)
    while its values are bf16, and autocast's attention casts both to bf16 at every call -- a copy of every
    layer's whole key cache at every decoded token. Kept in bf16, the cache holds exactly what attention reads,
    at half the bytes."""
    dev = t.device.type
    if t.is_floating_point() and torch.is_autocast_enabled(dev):
        return torch.get_autocast_dtype(dev)
    return t.dtype


class GrowingLayer(DynamicLayer):
    """A `DynamicLayer` whose keys/values are views of a buffer with spare token slots.

    Code that replaces `keys`/`values` directly (row selection, repeating rows, trimming padding columns) keeps
    working: `update` notices the views are no longer its own and adopts the new tensors into a fresh buffer."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._kbuf: torch.Tensor | None = None
        self._vbuf: torch.Tensor | None = None
        self._length = 0
        self._kview: torch.Tensor | None = None
        self._vview: torch.Tensor | None = None

    def _own(self) -> bool:
        """Whether keys/values are still the views this layer last handed out."""
        return self._kbuf is not None and self.keys is self._kview and self.values is self._vview

    def _regrow(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        """A new buffer holding what the layer caches now (none: empty) with room for the incoming tokens plus
        SPARE_TOKENS; shapes follow the cached tensors, or the incoming ones when nothing is cached; the dtype is
        `attended_dtype`'s."""
        held = self.keys is not None and self.keys.numel() > 0
        n = self.keys.shape[-2] if held else 0
        src_k, src_v = (self.keys, self.values) if held else (key_states, value_states)
        capacity = n + key_states.shape[-2] + SPARE_TOKENS
        self._kbuf = src_k.new_empty((*src_k.shape[:2], capacity, src_k.shape[-1]), dtype=attended_dtype(src_k))
        self._vbuf = src_v.new_empty((*src_v.shape[:2], capacity, src_v.shape[-1]), dtype=attended_dtype(src_v))
        if n:
            self._kbuf[..., :n, :].copy_(self.keys)
            self._vbuf[..., :n, :].copy_(self.values)
        self._length = n

    def _set_views(self) -> None:
        self.keys = self._kview = self._kbuf[..., : self._length, :]
        self.values = self._vview = self._vbuf[..., : self._length, :]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        if key_states.requires_grad or value_states.requires_grad:
            raise RuntimeError("GrowingLayer is for sampling under torch.no_grad(); use DynamicCache for training")
        new = key_states.shape[-2]
        # a new buffer on the first update, when keys/values were replaced from outside (rows selected, repeated,
        # columns trimmed), or when the spare room is used up
        if not self._own() or self._length + new > self._kbuf.shape[-2]:
            self._regrow(key_states, value_states)
        end = self._length + new
        # copy_ casts to the buffer's dtype, the cached one (one sampling call runs every forward in one precision)
        self._kbuf[..., self._length:end, :].copy_(key_states)
        self._vbuf[..., self._length:end, :].copy_(value_states)
        self._length = end
        self._set_views()
        return self.keys, self.values


def growing(cache: DynamicCache | None = None) -> DynamicCache:
    """`cache` (or a new empty cache) with every layer a `GrowingLayer` holding the same keys and values."""
    cache = DynamicCache() if cache is None else cache
    for i, layer in enumerate(cache.layers):
        if isinstance(layer, GrowingLayer):
            continue
        if type(layer) is not DynamicLayer:
            raise TypeError(f"layer {i} is a {type(layer).__name__}; only full-attention DynamicLayer grows in place")
        new = GrowingLayer()
        if layer.is_initialized:
            new.keys, new.values, new.is_initialized = layer.keys, layer.values, True
            new.device = layer.keys.device
        cache.layers[i] = new
    cache.layer_class_to_replicate = GrowingLayer
    return cache
