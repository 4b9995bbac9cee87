"""Answer formats and answer values the probes build their inputs from.

Why: probes attack the reward through the format it actually accepts. The audit first finds which rendering of
the reference answer (a tag, a box, plain text, ...) the reward passes on most rows, then builds every attack in
that rendering, so that a wrong answer is wrong for its content and not merely for its format.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class AnswerFormat:
    """A way to write an answer: `open + value + close`, optionally after a preamble."""

    name: str
    open: str
    close: str
    preamble: str = ""

    def render(self, value: str) -> str:
        return f"{self.preamble}{self.open}{value}{self.close}"

    @property
    def delimited(self) -> bool:
        """True when the answer sits between two markers (so multi-field and greedy-regex probes apply)."""
        return bool(self.open.strip()) and bool(self.close.strip())


FORMATS: list[AnswerFormat] = [
    AnswerFormat("answer_tag", "<answer>", "</answer>"),
    AnswerFormat("think_answer_tag", "<answer>", "</answer>", preamble="<think>\nI work it out.\n</think>\n"),
    AnswerFormat("boxed", "\\boxed{", "}"),
    AnswerFormat("plain", "", ""),
    AnswerFormat("the_answer_is", "The answer is ", "."),
    AnswerFormat("hash", "#### ", ""),
]
FORMAT_BY_NAME = {f.name: f for f in FORMATS}

_NUMBER = re.compile(r"^[+-]?(\d{1,3}(,\d{3})+|\d+)(\.\d+)?$")


def as_text(value: Any) -> str:
    """The reference value as the text a model would write."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def parse_number(text: str) -> float | None:
    """A plain decimal number (optionally with thousands separators); None for anything else."""
    t = text.strip()
    if not _NUMBER.match(t):
        return None
    try:
        v = float(t.replace(",", ""))
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def decimals(text: str) -> int:
    t = text.strip()
    return len(t.split(".", 1)[1]) if "." in t else 0


def format_number(value: float, places: int) -> str:
    if places == 0:
        return str(int(round(value)))
    return f"{value:.{places}f}"


def normal(text: str) -> str:
    """Loose comparison key, used only to avoid calling a correct answer wrong when building attacks."""
    t = text.strip().casefold()
    n = parse_number(t)
    return repr(n) if n is not None else re.sub(r"\s+", " ", t)


def wrong_values(reference: str, others: list[str], k: int = 3) -> list[str]:
    """`k` clearly wrong answers for `reference`: far-off numbers for numeric answers, other rows' answers or
    nonsense words for text. Far off on purpose: near misses are a probe of their own."""
    n = parse_number(reference)
    out: list[str] = []
    if n is not None:
        places = decimals(reference)
        for mult, add in ((2, 17), (3, 29), (5, 41), (7, 53)):
            v = n * mult + add
            if abs(v - n) < 1:
                v = n + add
            out.append(format_number(v, places))
    else:
        ref = normal(reference)
        seen = {ref}
        for o in others:
            if normal(o) not in seen and o.strip():
                seen.add(normal(o))
                out.append(o)
            if len(out) >= k:
                break
        for filler in ("zebra", "quartz", "nimbus", "falcon"):
            if len(out) >= k:
                break
            if filler not in seen:
                out.append(filler)
    return out[:k]


def near_misses(reference: str) -> dict[str, list[str]]:
    """Numbers close to the reference that are still wrong: off by one, 0.5% off, the reference inside a longer
    number (1042 for 42). Empty for non-numeric references."""
    n = parse_number(reference)
    if n is None:
        return {}
    places = decimals(reference)
    step = 10 ** -places
    digits = reference.strip().lstrip("+-").replace(",", "")
    relative = [format_number(n * (1 + s * 0.005), max(places, 3 if abs(n) < 200 else places)) for s in (1, -1)]
    relative = [r for r in relative if parse_number(r) is not None and parse_number(r) != n]
    return {
        "off_by_one": [format_number(n - step, places), format_number(n + step, places)],
        "relative": relative,
        "superstring": [f"10{digits}", f"{digits}7"],
    }


def superscript_variant(reference: str) -> str | None:
    """`42` -> `4²`: visibly a different value (4 squared) whose NFKC normal form is `42`."""
    sup = {"0": "⁰", "1": "¹", "2": "²", "3": "³", "4": "⁴", "5": "⁵", "6": "⁶", "7": "⁷", "8": "⁸", "9": "⁹"}
    t = reference.strip()
    if len(t) >= 2 and t[-1] in sup and t[:-1] and t[-2].isdigit():
        return t[:-1] + sup[t[-1]]
    return None


FULLWIDTH: Callable[[str], str] = lambda s: "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in s)  # noqa: E731
