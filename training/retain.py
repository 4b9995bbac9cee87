"""data.focus's retain anchor: which tasks it draws and which of their demonstration tokens it holds.

Why: a focused GRPO stage (data.focus) trains only the kinds of task the starting policy fails. On learn_workplace
its updates land almost entirely on one decision -- the first tool call of those kinds -- and the 135M policy holds
that decision as a near-global bias: the whole test split showed the first call moving to the directory lookup on
every kind, right for the focused ones and wrong for kinds the SFT model solved (session 27, 85 -> 70 of 265). The
focused groups carry no example of where the old choice was right. The anchor adds one: each step, verified
demonstrations of the solved kinds, trained by NLL on the tokens the policy is no longer sure of (probability below
`retain_below`), so the update has to move the first call per kind, not everywhere (`retain_from: all` draws the
demonstrations from every kind, the focused ones too: their own passes can be lost as well). Sure tokens (most of a
demonstration: syntax, copied arguments) carry almost no NLL gradient anyway and would only dilute the token mean.

Pure functions over indices and token lists, so they are tested without a model; the trainer runs the replay and
the forward (training/grpo.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from training.focus import FocusChoice

# the retain stream's seed offset from the run's: its own order, independent of the focused prompts' stream
RETAIN_SEED_OFFSET = 7919


def retain_groups(choice: FocusChoice) -> list[str]:
    """The probed groups above the choice's bar (the kinds the starting policy solves), in probe order. Unprobed
    groups are not among them: nothing says the policy solves those."""
    return [g for g, p in choice.groups.items() if p.pass_rate > choice.max_pass_rate]


def retain_positions(step: int, per_step: int, rank: int, world: int) -> range:
    """Stream positions of the retain tasks that process `rank` anchors at `step` (0-based): a function of the step
    alone, so a resumed run anchors the same tasks at the same step with nothing more in its checkpoint."""
    start = (step * world + rank) * per_step
    return range(start, start + per_step)


def at_risk_masks(logprobs: Sequence[Sequence[float]], loss_masks: Sequence[Sequence[int]],
                  below: float) -> list[list[int]]:
    """Per row, 1 where a token is trained (loss mask 1) and the policy gives it probability below `below`: the
    demonstrated choices it could lose. `logprobs` rows may be longer than their masks (padding) and are read up to
    each mask's length."""
    if len(logprobs) != len(loss_masks):
        raise ValueError(f"at_risk_masks: {len(logprobs)} log-prob rows for {len(loss_masks)} loss masks")
    if not 0.0 < below <= 1.0:
        raise ValueError(f"at_risk_masks: below must be in (0, 1], got {below}")
    cut = math.log(below)
    out = []
    for i, (lp, mask) in enumerate(zip(logprobs, loss_masks)):
        if len(lp) < len(mask):
            raise ValueError(f"at_risk_masks: row {i} has {len(lp)} log-probs for {len(mask)} tokens")
        out.append([1 if m and lp[j] < cut else 0 for j, m in enumerate(mask)])
    return out


def through_last_marked(mask: Sequence[int]) -> int:
    """How many leading tokens a row needs for its marked ones: up to and including the last 1 (0 when none). A
    causal model's log-prob of a token depends only on the tokens before it, so the anchor's forward stops there --
    the tool outputs and replies after a demonstration's last at-risk token cost time and change nothing."""
    return max((i + 1 for i, m in enumerate(mask) if m), default=0)
