"""What the direction-of-learning tests measure: each row's mean log-prob of its trained tokens under the policy, and
the check that one update on guided groups raises every demonstration and lowers every sampled member."""

from __future__ import annotations

from typing import Any

import torch


def mean_trained_logprob(trainer: Any, batch: Any) -> torch.Tensor:
    """(B,) mean log-prob per row over its loss-mask tokens, through the trainer's own (unshared) forward."""
    with torch.no_grad():
        lp, _ = trainer._forward_logprobs(trainer.model, batch, False)
    return (lp * batch.loss_mask).sum(1) / batch.loss_mask.sum(1)


def assert_one_update_raises_the_demonstrations(trainer: Any, samples: list, g: int) -> None:
    """One update on the guided groups: every demonstration more likely, every policy episode less likely, and the
    log-probs recorded at generation equal to the trainer's (on the policy's rows: a demonstration has none)."""
    from training.losses import group_advantages
    from training.samples import pack

    demo = torch.tensor([bool(s.extras["demonstration"]) for s in samples])
    batch = pack(samples, trainer.tok.pad_token_id)
    before = mean_trained_logprob(trainer, batch)
    adv, _ = group_advantages(torch.tensor([s.score for s in samples]), g)
    out = trainer._update(batch, adv)
    delta = mean_trained_logprob(trainer, batch) - before
    assert bool((delta[demo] > 0).all()) and bool((delta[~demo] < 0).all()), delta.tolist()
    assert out["logprob_gen_gap"] < 0.05
