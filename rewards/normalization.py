"""Text normalisation and number parsing for verifiers: every equivalence a verifier accepts is an explicit option.

Numbers are parsed exactly (as Fractions), so `0.1 + 0.2`-style float noise never decides a verdict and the
default numeric tolerance can be truly zero. Accepted forms: `42`, `-3.50`, `+7`, `1e3`, `1,234,567` (valid
thousands grouping only), `3/4`, `\\frac{3}{4}`, a leading currency sign, a trailing `%` (stripped by default),
the unicode minus. Anything with words left over ("42 apples") is not a number: strictness is the default.
"""

from __future__ import annotations

import re
import string
import unicodedata
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Literal

from pydantic import BaseModel, ConfigDict


class TextNormalization(BaseModel):
    """What two texts may differ in and still be equal. Defaults: surrounding and repeated whitespace, unicode
    compatibility forms (NFKC, but superscripts/subscripts/fractions kept: `4²` is not `42`). Case, punctuation and
    articles matter unless switched off."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    strip: bool = True
    collapse_whitespace: bool = True
    unicode_nfkc: bool = True
    casefold: bool = False
    strip_punctuation: bool = False
    remove_articles: bool = False


_PUNCT = str.maketrans("", "", string.punctuation)
_SCRIPT_TAGS = ("<super>", "<sub>", "<fraction>")


def nfkc_keep_scripts(text: str) -> str:
    """NFKC, except that superscripts, subscripts and vulgar fractions stay as they are.

    Why: NFKC folds `4²` into `42` and `10⁰` into `100`: a different value that would match the reference (found
    by the audit's parser probes). Full-width digits, ligatures and compatibility spaces are still folded.
    """
    if text.isascii():
        return text
    if not any(unicodedata.decomposition(ch).startswith(_SCRIPT_TAGS) for ch in text):
        return unicodedata.normalize("NFKC", text)
    return "".join(ch if unicodedata.decomposition(ch).startswith(_SCRIPT_TAGS) else unicodedata.normalize("NFKC", ch)
                   for ch in text)
_ARTICLES = re.compile(r"\b(a|an|the)\b", flags=re.IGNORECASE)


def normalize_text(text: str, opts: TextNormalization) -> str:
    if opts.unicode_nfkc:
        text = nfkc_keep_scripts(text)
    if opts.casefold:
        text = text.casefold()
    if opts.strip_punctuation:
        text = text.translate(_PUNCT)
    if opts.remove_articles:
        text = _ARTICLES.sub(" ", text)
    if opts.collapse_whitespace:
        text = " ".join(text.split())
    elif opts.strip:
        text = text.strip()
    return text


PercentMode = Literal["strip", "fraction", "reject"]
_PLAIN = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_GROUPED = re.compile(r"^[+-]?\d{1,3}(,\d{3})+(\.\d+)?$")
_FRAC = re.compile(r"^([+-]?\d+)\s*/\s*([+-]?\d+)$")
_LATEX_FRAC = re.compile(r"^([+-]?)\\[dt]?frac\{\s*([+-]?\d+)\s*\}\{\s*([+-]?\d+)\s*\}$")


def parse_number(text: str, percent: PercentMode = "strip") -> Fraction | None:
    """The exact value of a number written in one of the accepted forms (module docstring), else None."""
    if not isinstance(text, str):
        return None
    s = nfkc_keep_scripts(text).strip().replace("\u2212", "-")
    s = s.strip("$ ")
    if s.startswith(("$", "€", "£")):
        s = s[1:].strip()
    if s.startswith("-") and s[1:2] in ("$", "€", "£"):
        s = "-" + s[2:].strip()
    scale = Fraction(1)
    if s.endswith("%"):
        if percent == "reject":
            return None
        s = s[:-1].strip()
        if percent == "fraction":
            scale = Fraction(1, 100)
    if not s or len(s) > 400:
        return None
    m = _LATEX_FRAC.match(s)
    if m:
        num, den = int(m.group(2)), int(m.group(3))
        if den == 0:
            return None
        value = Fraction(num, den)
        return -value * scale if m.group(1) == "-" else value * scale
    m = _FRAC.match(s)
    if m:
        den = int(m.group(2))
        return None if den == 0 else Fraction(int(m.group(1)), den) * scale
    if _GROUPED.match(s):
        s = s.replace(",", "")
    m = _PLAIN.match(s)
    if not m or len(s) > 400 or (m.group(3) and abs(int(m.group(3)[1:])) > 400):  # no 1e999999999 bombs
        return None
    try:
        return Fraction(Decimal(s)) * scale
    except (InvalidOperation, ValueError, OverflowError):
        return None


def numbers_equal(got: Fraction, want: Fraction, abs_tol: float = 0.0, rel_tol: float = 0.0) -> bool:
    """Exact equality by default; with tolerances, |got - want| <= max(abs_tol, rel_tol * |want|)."""
    if abs_tol == 0 and rel_tol == 0:
        return got == want
    return abs(got - want) <= max(Fraction(abs_tol), Fraction(rel_tol) * abs(want))
