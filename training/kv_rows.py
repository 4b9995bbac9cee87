"""Rows of a sampling batch's KV cache set aside while the rest decode, and put back in order afterwards.

Why: a batch decodes until its longest reply ends. In a workplace GRPO sampling round (SmolLM2-135M, 32 episodes,
turns of 81-128 decode steps) 46-74% of a turn's row-steps were rows whose reply had already ended
(`benchmarks/results/rollout_speed.json`, `turns`), and every one of them still ran through the model: its attention
read the row's whole cache, the largest cost of a decode step on a CPU. `take_rows` copies the ended rows' keys,
values and mask out of the cache before the batch drops them, so the next steps compute only the rows still
sampling; `merge` lays every part back into one cache in the caller's row order,
left-padded to a common width (masked columns, which attention skips and position ids do not count), so the next
turn continues every row exactly as if it had stayed in the batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

Tensor = torch.Tensor


@dataclass
class ParkedRows:
    """Some rows of a cache: their indices in the caller's batch, each layer's (keys, values), their mask."""

    rows: Tensor
    layers: list[tuple[Tensor, Tensor]]
    attn: Tensor


def take_rows(cache: Any, attn: Tensor, idx: Tensor, rows: Tensor) -> ParkedRows:
    """A copy of rows `idx` of `cache` and `attn`; `rows` are their indices in the caller's batch."""
    return ParkedRows(rows, [(layer.keys[idx], layer.values[idx]) for layer in cache.layers], attn[idx])


def merge(cache: Any, attn: Tensor, rows: Tensor, parked: list[ParkedRows]) -> Tensor:
    """Put `parked` back into `cache` (whose rows are `rows` of the caller's batch) and return the merged mask.

    Every part is left-padded to the widest with masked, zero columns; the merged rows are in the caller's order
    (0..B-1). The cache's layers get new tensors, which `training.kv_cache.GrowingLayer` adopts on its next update."""
    if not parked:
        return attn
    parts = [ParkedRows(rows, [(layer.keys, layer.values) for layer in cache.layers], attn), *parked]
    width = max(p.attn.shape[1] for p in parts)
    order = torch.argsort(torch.cat([p.rows for p in parts]))

    def kv(x: Tensor) -> Tensor:  # (rows, heads, tokens, dim): zero columns before the tokens
        return F.pad(x, (0, 0, width - x.shape[-2], 0))

    for i, layer in enumerate(cache.layers):
        layer.keys = torch.cat([kv(p.layers[i][0]) for p in parts])[order]
        layer.values = torch.cat([kv(p.layers[i][1]) for p in parts])[order]
    return torch.cat([F.pad(p.attn, (width - p.attn.shape[1], 0)) for p in parts])[order]
