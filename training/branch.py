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
import re
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


def grounded(signature: Signature, text: str) -> bool:
    """Whether every word of a call's argument values occurs in `text` (the task's prompt), case aside: such a call
    needs nothing an earlier tool result told, so it can be made earlier than the demonstration makes it. A call
    carrying an id or an address a search returned is not grounded and keeps its place."""
    words = set(re.findall(r"[a-z0-9]+", text.lower()))
    values = json.loads(signature[1]).values()
    return all(w in words for v in values for w in re.findall(r"[a-z0-9]+", str(v).lower()))


def reply_signatures(text: str) -> list[Signature]:
    """The calls one assistant reply makes, as signatures; an answer or a reply with a format error makes none (the
    tool loop runs the well-formed calls of a malformed reply, but the reply is a mistake all the same)."""
    from rewards.environments.toolcalls import parse_reply

    parsed = parse_reply(text)
    if parsed.errors or parsed.is_final:
        return []
    return [call_signature(c.name, c.arguments) for c in parsed.calls]


def leading_turns(episode: Sequence[Sequence[Signature]], truth: Sequence[Signature]) -> int:
    """How many of the episode's first turns are right: each makes at least one call, and each call is one of
    `truth` (the task's ground-truth calls, any order) that the episode has not made yet (repeats count). The turn
    after them -- if the episode failed -- is where its first mistake is; 0 means the first reply was already wrong."""
    todo = Counter(truth)
    keep = 0
    for turn in episode:
        need = Counter(turn)
        if not turn or any(todo[sig] < n for sig, n in need.items()):
            break
        todo.subtract(need)
        keep += 1
    return keep


@dataclass(frozen=True)
class FirstMistake:
    """Where and how a failed episode first left its task's ground truth: `turn` right replies came first; `kind` is
    "answer" (it answered or wrote a malformed reply there), "arguments" (every tool that reply called is one a
    ground-truth call not yet made uses: the right tools, other arguments or order) or "tool" (a tool no remaining
    ground-truth call uses); `tools` are that reply's tools and `left` the tools the remaining ground truth uses."""

    turn: int
    kind: str
    tools: tuple[str, ...]
    left: tuple[str, ...]


def first_mistake(episode: Sequence[Sequence[Signature]], truth: Sequence[Signature]) -> FirstMistake:
    """`leading_turns`, and what the next reply did wrong. Why the kind matters: a correction of a *tool* choice
    trains a tool-name token, and on learn_workplace such a token spread to the first call of other templates
    wherever in the episode it was taught (session 30); a correction inside the arguments of the right tool trains
    no tool name."""
    turn = leading_turns(episode, truth)
    left = Counter(truth) - Counter(sig for reply in episode[:turn] for sig in reply)
    left_tools = tuple(sorted({name for name, _ in left}))
    reply = episode[turn] if turn < len(episode) else []
    tools = tuple(name for name, _ in reply)
    kind = "answer" if not reply else "arguments" if all(t in left_tools for t in tools) else "tool"
    return FirstMistake(turn, kind, tools, left_tools)


def branch_point(episode: Sequence[Sequence[Signature]], demonstration: Sequence[Sequence[Signature]],
                 movable: Sequence[bool] | None = None) -> Branch:
    """Where `episode` (its turns' calls; a turn without calls -- an answer, a malformed reply -- is empty) first
    leaves `demonstration` (the same for its replies), and which demonstration turns finish the task from there.

    An episode turn is kept while it makes at least one call and each of its calls is one the demonstration makes
    and the episode has not made yet (repeats count). The demonstration resumes with every turn none of whose calls
    was made, in its order -- except that, when `movable` (per demonstration turn) allows it, the first turn calling
    the mistaken turn's tool goes first (the policy picked the right tool with wrong arguments: the members should
    part at the arguments; `grounded` says which turns can move); a demonstration turn whose calls
    were made only in part cannot resume (it would repeat a call), so the branch moves back to the start: keep 0,
    the whole demonstration in its order. The collector verifies the result and falls back to the whole
    demonstration when a reordered continuation does not pass (a write needing a read it moved past)."""
    keep = leading_turns(episode, [sig for turn in demonstration for sig in turn])
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
    mistake = episode[keep] if keep < len(episode) else []
    return Branch(keep, _mistaken_tool_first(resume, demonstration, mistake, movable))


def _mistaken_tool_first(resume: list[int], demonstration: Sequence[Sequence[Signature]],
                         mistake: Sequence[Signature], movable: Sequence[bool] | None) -> tuple[int, ...]:
    """`resume` with the first demonstration turn that calls the mistaken turn's first tool moved to the front: when
    the policy chose the right tool with other arguments, the guided member makes the same choice of tool there and
    the two members part inside the arguments -- the actual mistake -- rather than at the tool name the
    demonstration happens to call first."""
    if not mistake or movable is None:
        return tuple(resume)
    tool = mistake[0][0]
    j = next((j for j, i in enumerate(resume) if any(name == tool for name, _ in demonstration[i])), 0)
    if not movable[resume[j]]:
        return tuple(resume)
    return tuple([resume[j]] + resume[:j] + resume[j + 1:])
