"""The input embedding's backward adds its rows straight into the weight's gradient instead of handing autograd a
vocabulary-sized gradient to add.

Why: the lookup's gradient is non-zero only in the rows of the tokens in the batch (a few hundred of 49,152), yet
the stock backward (`embedding_dense_backward`) makes a dense (vocab x hidden) tensor, 113 MB for SmolLM2-135M in
fp32, and autograd adds it to the weight's other gradient (with tied embeddings, the LM head's) out of place: one
or two more vocabulary-sized tensors on top of every other weight gradient at the end of the backward, which was
the GRPO step's peak. (Handing autograd a sparse gradient does not help: it adds a sparse gradient to a dense one
in place only when that dense one was made by a C++ op, and the LM head's comes from training/lm_head.py.)

How: the lookup reads a detached weight into a leaf that requires grad; when that leaf's gradient arrives, a hook
`index_add_`s its rows into `weight.grad` (made if absent). The gradient is the same sum, added in another order;
autograd accumulates the weight's other gradient into `weight.grad` before or after, in place either way. The
contract this relies on: gradients are read from `.grad` after `backward()` returns (as the trainer, clipping and
the optimizers do), not through `torch.autograd.grad` nor by hooks during the backward, and there is one process
(DDP reduces `.grad` during the backward: the trainer does not install this under DDP).
"""

from __future__ import annotations

import types
from typing import Any, Callable

import torch
import torch.nn.functional as F

Tensor = torch.Tensor


def rows_into_grad(weight: torch.nn.Parameter, ids: Tensor, padding_idx: int | None) -> Callable[[Tensor], None]:
    """The hook: add the lookup's gradient rows into `weight.grad` (made, zero, if absent)."""

    def hook(grad: Tensor) -> None:
        flat_ids, rows = ids.reshape(-1), grad.reshape(-1, grad.shape[-1]).to(weight.dtype)
        if padding_idx is not None:  # the padding row gets no gradient from the lookup (as in the stock backward)
            keep = flat_ids != padding_idx
            flat_ids, rows = flat_ids[keep], rows[keep]
        if weight.grad is None:
            weight.grad = torch.zeros_like(weight)
        weight.grad.index_add_(0, flat_ids, rows)

    return hook


def _forward(self: torch.nn.Embedding, ids: Tensor) -> Tensor:
    if (torch.is_grad_enabled() and self.weight.requires_grad and self.max_norm is None
            and not self.scale_grad_by_freq and not self.sparse):
        out = F.embedding(ids, self.weight.detach(), self.padding_idx).requires_grad_(True)
        out.register_hook(rows_into_grad(self.weight, ids, self.padding_idx))
        return out
    return torch.nn.Embedding.forward(self, ids)


def install(model: Any) -> bool:
    """Route the model's input embedding (a plain nn.Embedding) through `_forward`; False if it has none."""
    emb = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    if type(emb) is not torch.nn.Embedding:
        return False
    emb.forward = types.MethodType(_forward, emb)
    return True
