"""Exact-match, numeric and regex verifiers over an explicitly extracted answer."""

from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import Field, field_validator

from rewards.extraction import Extraction, extract
from rewards.normalization import PercentMode, TextNormalization, normalize_text, numbers_equal, parse_number
from rewards.verifiers.base import Verifier, verdict
from schemas.rewards import RewardResult


def _format_fail(why: str) -> RewardResult:
    return verdict(False, f"format: {why}", format_ok=0.0)


class ExactMatch(Verifier):
    """Passes when the extracted answer equals the row's reference (`reference_field`, default `answer`) after the
    normalisation options; a list of references means any of them."""

    name: ClassVar[str] = "exact_match"
    extraction: Extraction = Extraction()
    normalization: TextNormalization = TextNormalization()
    reference_field: str = "answer"

    def verify(self, completion: Any, fields: dict[str, Any]) -> RewardResult:
        ref = self.field(fields, self.reference_field)
        refs = ref if isinstance(ref, list) else [ref]
        got, why = extract(completion, self.extraction)
        if got is None:
            return _format_fail(why)
        norm = normalize_text(got, self.normalization)
        for r in refs:
            if norm == normalize_text(str(r), self.normalization):
                return verdict(True, "answer matches", format_ok=1.0)
        return verdict(False, f"answer {norm[:80]!r} != expected {str(refs[0])[:80]!r}", format_ok=1.0)


class NumericMatch(Verifier):
    """Passes when the extracted answer is a number equal to the reference. Exact by default: `abs_tol` and
    `rel_tol` are 0 unless set (|got - want| <= max(abs_tol, rel_tol * |want|)). See `rewards.normalization` for
    the number formats accepted; text around the number fails (strict)."""

    name: ClassVar[str] = "numeric_match"
    extraction: Extraction = Extraction()
    reference_field: str = "answer"
    abs_tol: float = Field(default=0.0, ge=0)
    rel_tol: float = Field(default=0.0, ge=0)
    percent: PercentMode = "strip"

    def verify(self, completion: Any, fields: dict[str, Any]) -> RewardResult:
        raw_ref = self.field(fields, self.reference_field)
        want = parse_number(str(raw_ref), self.percent)
        if want is None:
            raise ValueError(f"reference {self.reference_field}={raw_ref!r} is not a number")
        got_text, why = extract(completion, self.extraction)
        if got_text is None:
            return _format_fail(why)
        got = parse_number(got_text, self.percent)
        if got is None:
            return verdict(False, f"answer {got_text.strip()[:60]!r} is not a number", format_ok=0.0)
        ok = numbers_equal(got, want, self.abs_tol, self.rel_tol)
        err = float(abs(got - want))
        return verdict(ok, "number matches" if ok else f"{float(got):g} != expected {float(want):g}",
                       format_ok=1.0, abs_error=min(err, 1e300))


_FLAGS = {"IGNORECASE": re.IGNORECASE, "MULTILINE": re.MULTILINE, "DOTALL": re.DOTALL, "VERBOSE": re.VERBOSE}


class RegexMatch(Verifier):
    """Passes when the extracted answer matches `pattern` (or the row's `pattern_field`): the whole answer by
    default (`full=True`), or anywhere in it with `full=False`."""

    name: ClassVar[str] = "regex_match"
    pattern: str | None = None
    pattern_field: str | None = None
    flags: tuple[str, ...] = ()
    full: bool = True
    extraction: Extraction = Extraction()

    @field_validator("flags")
    @classmethod
    def _known_flags(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [f for f in v if f not in _FLAGS]
        if bad:
            raise ValueError(f"unknown regex flags {bad}; use {sorted(_FLAGS)}")
        return v

    def model_post_init(self, _: Any) -> None:
        if (self.pattern is None) == (self.pattern_field is None):
            raise ValueError("RegexMatch needs exactly one of pattern= or pattern_field=")
        if self.pattern is not None:
            re.compile(self.pattern)

    def verify(self, completion: Any, fields: dict[str, Any]) -> RewardResult:
        pattern = self.pattern if self.pattern is not None else str(self.field(fields, self.pattern_field or ""))
        flags = 0
        for f in self.flags:
            flags |= _FLAGS[f]
        got, why = extract(completion, self.extraction)
        if got is None:
            return _format_fail(why)
        text = got.strip()
        m = re.fullmatch(pattern, text, flags) if self.full else re.search(pattern, text, flags)
        return verdict(m is not None, "matches" if m else f"{text[:60]!r} does not match {pattern[:60]!r}",
                       format_ok=1.0)
