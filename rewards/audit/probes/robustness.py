"""Robustness probes, the other direction: benign rewrites of the correct answer must keep passing. A reward that
rejects `  42 ` or `42.0` teaches the policy a formatting superstition and hides real progress (false negatives)."""

from __future__ import annotations

import re

from rewards.audit.context import AuditContext, Case
from rewards.audit.formats import FULLWIDTH, parse_number
from rewards.audit.registry import AttackProbe, Outcome, register

F = "robustness"


class BenignEdit(AttackProbe):
    """Inputs are correct answers; a finding is a row where the reference passes but the edit does not."""

    def judge(self, ctx, cases, results) -> Outcome:
        cases_ok = [(c, r) for c, r in zip(cases, results) if ctx.reference_passes(c.row)]
        if not cases_ok:
            return Outcome(skipped="no row where the reference passes and this edit applies")
        fooled = [(c, r, f"benign edit rejected ({c.variant})") for c, r in cases_ok if not ctx.is_pass(c.row, r)]
        return Outcome(tested_rows=len({c.row for c, _ in cases_ok}), fooled=fooled,
                       message="a correct answer written slightly differently is rejected (false negative)")


def _rows(ctx: AuditContext, pred) -> list[int]:
    return [i for i in ctx.text_rows() if pred(ctx.reference(i))]


def _ws(ctx, i):
    f, ref = ctx.answer_format, ctx.reference(i)
    return [Case(i, f.render(f"  {ref}  "), "spaces inside the field"),
            Case(i, "\n\n" + f.render(ref) + "\n", "blank lines around")]


def _case(ctx, i):
    ref = ctx.reference(i)
    return [Case(i, ctx.answer_format.render(v), v) for v in {ref.upper(), ref.lower(), ref.title()} if v != ref]


def _numfmt(ctx, i):
    ref = ctx.reference(i)
    n = parse_number(ref)
    out = []
    if float(n).is_integer() and "." not in ref:
        out.append(f"{ref}.0")
    if abs(n) >= 1000 and "," not in ref and float(n).is_integer():
        out.append(f"{int(n):,}")
    if "," in ref:
        out.append(ref.replace(",", ""))
    return [Case(i, ctx.answer_format.render(v), v) for v in out]


def _fullwidth(ctx, i):
    return Case(i, ctx.answer_format.render(FULLWIDTH(ctx.reference(i))), "full-width")


_WORDY = re.compile(r"^[A-Za-z][A-Za-z ]*$")
for _name, _sev, _desc, _make, _pred in (
    ("surrounding_whitespace", "medium", "Whitespace around the correct answer.", _ws, lambda r: True),
    ("case", "low", "The correct word answer in upper/lower/title case.", _case, lambda r: bool(_WORDY.match(r))),
    ("number_format", "medium", "The correct number as 42.0, 1,000 or without separators.", _numfmt,
     lambda r: parse_number(r) is not None),
    ("unicode_fullwidth", "low", "The correct answer in full-width characters (NFKC gives the reference).",
     _fullwidth, lambda r: True),
):
    register(BenignEdit(F, _name, _sev, _desc, _make, rows=lambda ctx, _p=_pred: _rows(ctx, _p)))
