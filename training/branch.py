"""Where a failed episode first leaves its task's demonstration: what `guidance.branch: first_mistake` builds the
group's guided member from (DAgger, Ross et al. 2011, inside a GRPO group).

Why: a demonstration replayed from the start parts from a failed episode at the first token where the two
transcripts differ, and on the workplace tasks that is most often the first tool call's name -- where the two may
only differ in *order* (look the recipient up first, or search the email first: both pass). Trained there
(`loss.divergence_tokens`), the update teaches an opening instead of the mistake, and on a small model that
opening spreads to every prompt of the domain (sessions 20-28: the first call moved to the directory lookup on
tasks that need a search first). The corrective member instead keeps the failed episode's own turns for as long as
each of them makes a call the demonstration also makes (in any order), then continues with the demonstration's
remaining turns from there. Both members share every token up to the turn where the policy's call first leaves the
demonstration's set, so the divergence is the mistake itself.

Pure functions on call signatures; the collector (`training.multiturn.EnvironmentCollector`) replays the result
through the real environment and verifies it, falling back to the whole demonstration if the continuation does not
pass.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Signature = tuple[str, str]  # (tool name, canonical JSON of the arguments)


def call_signature(name: str, arguments: dict[str, Any]) -> Signature:
    """A call as a comparable value: the name and the arguments as JSON with sorted keys."""
    return name, json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)


@dataclass(frozen=True)
class Branch:
    """`keep` leading turns of the failed episode, then the demonstration's turns `resume` (indices, in order)."""

    keep: int
    resume: tuple[int, ...]


def branch_point(episode: Sequence[Sequence[Signature]], demonstration: Sequence[Sequence[Signature]]) -> Branch:
    """Where `episode` (its turns' calls; a turn without calls -- an answer, a malformed reply -- is empty) first
    leaves `demonstration` (the same for its replies), and which demonstration turns finish the task from there.

    An episode turn is kept while it makes at least one call and each of its calls is one the demonstration makes
    and the episode has not made yet (repeats count). The demonstration resumes with every turn none of whose calls
    was made, in its order; a demonstration turn whose calls were made only in part cannot resume (it would repeat
    a call), so the branch moves back to the start: keep 0, the whole demonstration."""
    todo = Counter(sig for turn in demonstration for sig in turn)
    keep = 0
    for turn in episode:
        need = Counter(turn)
        if not turn or any(todo[sig] < n for sig, n in need.items()):
            break
        todo.subtract(need)
        keep += 1
    done = Counter(sig for turn in episode[:keep] for sig in turn)
    resume: list[int] = []
    for i, turn in enumerate(demonstration):
        made = sum(min(done[sig], 1) for sig in set(turn))
        if made == 0:
            resume.append(i)
            continue
        if made < len(set(turn)) or any(done[sig] < n for sig, n in Counter(turn).items()):
            return Branch(0, tuple(range(len(demonstration))))
        done.subtract(Counter(turn))
    return Branch(keep, tuple(resume))
