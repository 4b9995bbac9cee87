"""Failure text reduced to its shape: what two failures have in common once their specifics are removed.

Why: rewards and tools explain failures in free text ("answered 12, expected 14", "Invalid date '2026-13-01'"),
and counting those strings verbatim gives one bucket per sample. Replacing ids, numbers, dates, quoted values and
e-mail addresses with placeholders turns them into a handful of failure modes; evaluation reports and triage both
group by this signature.
"""

from __future__ import annotations

import re

_PATTERNS = [
    (re.compile(r"[\w.+-]+@[\w-]+(\.[\w-]+)+"), "<email>"),
    (re.compile(r"\d{4}-\d{2}-\d{2}([ t]\d{2}:\d{2}(:\d{2})?)?"), "<date>"),
    (re.compile(r"'[^']*'|\"[^\"]*\""), "<value>"),
    (re.compile(r"\b[0-9a-f]{6,}\b"), "<id>"),
    (re.compile(r"\d+(\.\d+)?"), "<n>"),
    (re.compile(r"\s+"), " "),
]


def error_signature(text: str) -> str:
    """Error text with the specifics (ids, numbers, dates, quoted values, e-mails) replaced by placeholders."""
    s = text.lower()
    for pat, rep in _PATTERNS:
        s = pat.sub(rep, s)
    return s.strip()[:240]


def _tokens(sig: str) -> set[str]:
    return set(re.findall(r"<\w+>|[a-z_]+", sig))


def jaccard(a: str, b: str) -> float:
    ta, tb = _tokens(a), _tokens(b)
    return len(ta & tb) / len(ta | tb) if ta | tb else 1.0


def reason_label(reason: str, limit: int = 60) -> str:
    """A failure reason for grouping: the code when the reason starts with one (`wrong_tool: ...`), else the
    signature of the whole text (so `answered 3, expected 4` and `answered 9, expected 2` count together)."""
    head = reason.split(":", 1)[0].strip()
    if re.fullmatch(r"[a-z][a-z0-9_]*", head):
        return head
    return error_signature(reason)[:limit] or "failed"
