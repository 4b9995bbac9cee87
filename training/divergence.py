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

`loss.divergence_within: arguments` keeps only the pairs that part inside the arguments of a tool call both
members opened with the same name (`ArgumentsOnly`): session 30 measured that a corrected tool-name token spreads to
the first call of other templates wherever in the episode it is taught, so a stage that trains no tool name at all
is the contrast left to try. The check reads the shared prefix's text (decoded), so it holds for any tokenizer.

Pure functions over token lists (and one over text), so they are tested without a model.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# a call block opened in the reply, its name written and closed, its arguments begun
_OPEN_ARGUMENTS = re.compile(r'^\s*\{\s*"name"\s*:\s*"[^"]+"\s*,\s*"arguments"\s*:')

PairFilter = Callable[[Sequence[int], Sequence[int], int], bool]


def first_divergence(a: Sequence[int], b: Sequence[int]) -> int | None:
    """Index of the first position where `a` and `b` hold different tokens, or where one ends and the other goes
    on; None when they are identical."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return None if len(a) == len(b) else n


def divergence_masks(completions: Sequence[Sequence[int]], loss_masks: Sequence[Sequence[int]],
                     passed: Sequence[bool], group_size: int, keep: PairFilter | None = None) -> list[list[int]]:
    """Per row a 0/1 mask over its completion: for every (failed, passed) pair of rows in one group (rows
    `k * group_size ... (k + 1) * group_size - 1`), the first token where the two part, marked on each side that has
    a token there which the policy generated (`loss_masks` 1). A divergence inside a tool output (the environment
    answered differently to the same call) marks nothing: no choice of the policy is there to credit. Rows of groups
    that all passed or all failed get all zeros. `keep(failed completion, failed loss mask, index)`, when given,
    says whether a pair's divergence is trained at all (`ArgumentsOnly`)."""
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
                if i is None or (keep is not None and not keep(completions[f], loss_masks[f], i)):
                    continue
                for r in (f, p):
                    if i < len(completions[r]) and loss_masks[r][i]:
                        out[r][i] = 1
    return out


def reply_start(loss_mask: Sequence[int], i: int) -> int:
    """Where the policy's reply that holds position `i` begins: just after the last position before `i` the policy
    did not generate (a tool result, the chat template's turn markers), or 0."""
    for j in range(i - 1, -1, -1):
        if not loss_mask[j]:
            return j + 1
    return 0


def inside_call_arguments(reply_prefix: str) -> bool:
    """Whether a reply's text so far ends inside the arguments of a call it opened: the last `<tool_call>` is not
    closed, and after it the name is written in full and `"arguments":` begun. A prefix ending in the tool's name,
    between two calls, or in an answer is not."""
    _, sep, call = reply_prefix.rpartition("<tool_call>")
    return bool(sep) and "</tool_call>" not in call and bool(_OPEN_ARGUMENTS.match(call))


@dataclass
class ArgumentsOnly:
    """`divergence_masks`' `keep` for `loss.divergence_within: arguments`: a pair is trained only when its members
    part inside the arguments of the same tool's call (`inside_call_arguments` on the decoded shared prefix of the
    reply). Counts what it saw, so each step logs how many pairs it dropped."""

    decode: Callable[[Sequence[int]], str]
    pairs: int = 0
    kept: int = 0

    def __call__(self, completion: Sequence[int], loss_mask: Sequence[int], i: int) -> bool:
        self.pairs += 1
        ok = inside_call_arguments(self.decode(list(completion[reply_start(loss_mask, i):i])))
        self.kept += ok
        return ok
