"""Answer extraction: which part of a completion a verifier compares. Strict by default.

Why strict: a verifier that falls back to the whole text when the answer tag is missing rewards answers that are
buried in reasoning (or hedged: "3 or 4") and teaches the policy to skip the format. Each method fails with a
reason when its marker is absent; `whole` (the whole text) is only used when asked for.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Method = Literal["tag", "boxed", "last_line", "code_fence", "regex", "whole"]


class Extraction(BaseModel):
    """How to find the answer in a completion.

    - `tag`: the content of the `occurrence` `<tag>...</tag>` block (default: the last `<answer>`).
    - `boxed`: the content of the last `\\boxed{...}` (braces matched).
    - `last_line`: the last non-empty line.
    - `code_fence`: the last ```lang fenced block (`language` or any when None).
    - `regex`: group 1 (or the whole match) of the last match of `pattern`.
    - `whole`: the whole completion.
    `occurrence="only"` fails when the marker appears more than once (no hedging with several answers).
    `max_chars` bounds the text looked at (a guard against pathological inputs).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    method: Method = "tag"
    tag: str = Field(default="answer", pattern=r"^[A-Za-z_][\w\-]*$")
    occurrence: Literal["last", "first", "only"] = "last"
    pattern: str | None = None
    language: str | None = None
    max_chars: int = 100_000


def _pick(found: list[str], ex: Extraction, what: str) -> tuple[str | None, str]:
    if not found:
        return None, f"no {what} found"
    if ex.occurrence == "only" and len(found) > 1:
        return None, f"{len(found)} {what}s found; exactly one is required"
    return (found[0] if ex.occurrence == "first" else found[-1]), ""


def _boxed(text: str) -> list[str]:
    out = []
    for m in re.finditer(r"\\boxed\s*\{", text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
            i += 1
        if depth == 0:
            out.append(text[m.end():i - 1])
    return out


def extract(text: object, ex: Extraction) -> tuple[str | None, str]:
    """(answer, "") or (None, why not). Non-string completions are refused, not str()-ed."""
    if not isinstance(text, str):
        return None, f"completion is {type(text).__name__}, expected text"
    if len(text) > ex.max_chars:
        return None, f"completion is {len(text)} characters, over the extraction limit of {ex.max_chars}"
    if ex.method == "whole":
        return text, ""
    if ex.method == "tag":
        t = re.escape(ex.tag)
        found = re.findall(rf"<{t}>(.*?)</{t}>", text, flags=re.DOTALL)
        return _pick(found, ex, f"<{ex.tag}>...</{ex.tag}> tag")
    if ex.method == "boxed":
        return _pick(_boxed(text), ex, "\\boxed{...}")
    if ex.method == "last_line":
        lines = [ln for ln in text.splitlines() if ln.strip()]
        return (lines[-1], "") if lines else (None, "completion has no non-empty line")
    if ex.method == "code_fence":
        lang = re.escape(ex.language) if ex.language else r"[\w+\-]*"
        found = re.findall(rf"```[ \t]*{lang}[ \t]*\n(.*?)```", text, flags=re.DOTALL | re.IGNORECASE)
        return _pick(found, ex, f"```{ex.language or ''} code block")
    if ex.method == "regex":
        if not ex.pattern:
            return None, "extraction method 'regex' needs a pattern"
        found = [m.group(1) if m.groups() else m.group(0) for m in re.finditer(ex.pattern, text, flags=re.DOTALL)]
        return _pick(found, ex, f"match of {ex.pattern!r}")
    return None, f"unknown extraction method {ex.method!r}"
