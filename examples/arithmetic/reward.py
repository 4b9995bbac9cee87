"""Rewards for the arithmetic example tasks (single-turn): the answer must be inside <answer>...</answer>.

`tagged_answer` is the strict binary verifier. `tagged_answer_shaped` adds a small format signal so that a model
that never answers correctly still gets a gradient, while every correct sample (1.0) stays strictly above every
incorrect one (at most 0.2): the dominance invariant the audit checks. `letter_share` is a dense, meaningless reward
used only by the tiny CI config, whose random-initialised model can never be right.
"""

from __future__ import annotations

import re

from schemas.rewards import RewardResult

TAG = re.compile(r"<answer>\s*(-?\d+)\s*</answer>")


def _extract(completion: str) -> str | None:
    m = TAG.search(completion)
    return m.group(1) if m else None


def tagged_answer(completion: str, answer: str | None = None, **_: object) -> RewardResult:
    got = _extract(completion)
    ok = got is not None and answer is not None and int(got) == int(answer)
    reason = "correct" if ok else ("no <answer> tag" if got is None else f"answered {got}, expected {answer}")
    return RewardResult(score=1.0 if ok else 0.0, passed=ok, components={"correct": float(ok)}, reason=reason)


def tagged_answer_shaped(completion: str, answer: str | None = None, **_: object) -> RewardResult:
    base = tagged_answer(completion, answer)
    has_tag = _extract(completion) is not None
    has_number = bool(re.search(r"-?\d+", completion))
    fmt = 0.15 * has_tag + 0.05 * has_number
    score = 1.0 if base.passed else fmt
    return RewardResult(score=score, passed=base.passed, reason=base.reason,
                        components={"correct": float(bool(base.passed)), "tag": float(has_tag), "number": float(has_number)})


def letter_share(completion: str, **_: object) -> float:
    """Share of non-space characters that are ASCII letters (tiny CI config only: varies even for random text)."""
    chars = [c for c in completion if not c.isspace()]
    return sum(c.isascii() and c.isalpha() for c in chars) / len(chars) if chars else 0.0
