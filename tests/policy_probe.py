"""What the direction-of-learning tests measure: each row's mean log-prob of its trained tokens under the policy."""

from __future__ import annotations

from typing import Any

import torch


def mean_trained_logprob(trainer: Any, batch: Any) -> torch.Tensor:
    """(B,) mean log-prob per row over its loss-mask tokens, through the trainer's own (unshared) forward."""
    with torch.no_grad():
        lp, _ = trainer._forward_logprobs(trainer.model, batch, False)
    return (lp * batch.loss_mask).sum(1) / batch.loss_mask.sum(1)
