"""The tokens where a failed episode parts from a passed one of the same prompt: what `loss.divergence_tokens` trains.

Why: a group's failed and passed episodes (a sampled one against the task's verified demonstration, under
guidance) share every token up to the first one where they differ. Before it the two gradients cancel; after it the
contexts differ, so GRPO's per-token loss pushes down every later token of the failed episode -- well-formed tool-call
syntax and right arguments included -- and pushes up every later token of the passed one. On the workplace tasks the
decisive difference is almost always that first token (the tool a turn opens with: benchmarks/decision_margin.py),
and the side effects of the rest are what broke the policy before any decision flipped (learn_workplace, session 25:
the focused stage at SGD peak 1.0 ended at 1/48 with format errors). Training only the first differing token on both
sides is the contrast the verifier actually supports: in the same context, this choice failed and that one passed
(the "critical token" of Lin et al. 2024, found here by alignment with a passing episode instead of by sampling).

Pure functions over token lists, so they are tested without a model.
"""

from __future__ import annotations

from collections.abc import Sequence


def first_divergence(a: Sequence[int], b: Sequence[int]) -> int | None:
    """Index of the first position where `a` and `b` hold different tokens, or where one ends and the other goes
    on; None when they are identical."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return None if len(a) == len(b) else n


def divergence_masks(completions: Sequence[Sequence[int]], loss_masks: Sequence[Sequence[int]],
                     passed: Sequence[bool], group_size: int) -> list[list[int]]:
    """Per row a 0/1 mask over its completion: for every (failed, passed) pair of rows in one group (rows
    `k * group_size ... (k + 1) * group_size - 1`), the first token where the two part, marked on each side that has
    a token there which the policy generated (`loss_masks` 1). A divergence inside a tool output (the environment
    answered differently to the same call) marks nothing: no choice of the policy is there to credit. Rows of groups
    that all passed or all failed get all zeros."""
    if len(completions) != len(loss_masks) or len(completions) != len(passed):
        raise ValueError(f"divergence_masks: {len(completions)} completions, {len(loss_masks)} loss masks and "
                         f"{len(passed)} outcomes; expected one of each per row")
    if group_size < 1 or len(completions) % group_size:
        raise ValueError(f"divergence_masks: {len(completions)} rows do not split into groups of {group_size}")
    out = [[0] * len(c) for c in completions]
    for start in range(0, len(completions), group_size):
        rows = range(start, start + group_size)
        for f in (r for r in rows if not passed[r]):
            for p in (r for r in rows if passed[r]):
                i = first_divergence(completions[f], completions[p])
                if i is None:
                    continue
                for r in (f, p):
                    if i < len(completions[r]) and loss_masks[r][i]:
                        out[r][i] = 1
    return out
