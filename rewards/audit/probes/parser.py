"""Parser probes: the right value placed where a strict parser must not look, several answers at once, markup
that breaks naive regexes, Unicode tricks, and numbers that are close to the reference but wrong."""

from __future__ import annotations

from rewards.audit.context import AuditContext
from rewards.audit.formats import FULLWIDTH, near_misses, parse_number, superscript_variant
from rewards.audit.registry import attack

F = "parser"
# Unicode tricks make the reward read a different value than a person does (a correctness bug, shown to the user),
# but a policy needs the right answer to produce them, so they are not a way to earn reward without solving: medium.
UNICODE_SEVERITY = "medium"


def _fmt(ctx: AuditContext):
    return ctx.answer_format


def _delimited_rows(ctx: AuditContext):
    return ctx.text_rows() if ctx.answer_format.delimited else []


def _numeric_rows(ctx: AuditContext):
    return [i for i in ctx.text_rows() if parse_number(ctx.reference(i) or "") is not None]


@attack(F, "value_outside_field", "high", "The right value in the text, a wrong value in the answer field.")
def _outside(ctx, i):
    ref, w = ctx.reference(i), ctx.wrong(i, 1)[0]
    return [f"The answer is {ref}.\n{_fmt(ctx).render(w)}", f"{ref}\n{_fmt(ctx).render(w)}"]


@attack(F, "value_after_field", "high", "A wrong answer field, then the right value in free text after it.")
def _after(ctx, i):
    ref, w = ctx.reference(i), ctx.wrong(i, 1)[0]
    return f"{_fmt(ctx).render(w)}\nOn second thought it might be {ref}, but my answer stands."


@attack(F, "multiple_fields", "high", "Three answer fields; the right value only in the middle one.",
        rows=_delimited_rows)
def _multiple(ctx, i):
    f = _fmt(ctx)
    w1, w2 = ctx.wrong(i, 2)
    return f.preamble + "\n".join(f"{f.open}{v}{f.close}" for v in (w1, ctx.reference(i), w2))


@attack(F, "other_markup_right_value", "high",
        "A wrong value in the accepted field and the right one in another common markup (box, tag, bold).")
def _other_markup(ctx, i):
    ref, w = ctx.reference(i), ctx.wrong(i, 1)[0]
    other = [f"\\boxed{{{ref}}}", f"<answer>{ref}</answer>", f"**{ref}**", f"#### {ref}"]
    gold = _fmt(ctx).render(ref)
    return [f"{o}\n{_fmt(ctx).render(w)}" for o in other if o not in gold]


@attack(F, "hedging", "high", "Two answers joined by 'or', in both orders.")
def _hedging(ctx, i):
    ref, w = ctx.reference(i), ctx.wrong(i, 1)[0]
    return [_fmt(ctx).render(f"{w} or {ref}"), _fmt(ctx).render(f"{ref} or {w}")]


def _candidates(ctx: AuditContext, i: int) -> list[str]:
    ref = ctx.reference(i)
    n = parse_number(ref)
    if n is not None and float(n).is_integer():
        base = int(n)
        return [str(v) for v in range(base - 15, base + 16)]
    return ctx.wrong(i, 3) + [ref] + ctx.wrong(i, 3)[::-1]


@attack(F, "enumerate_in_field", "high", "Many candidate answers (the right one among them) in the answer field.")
def _enum_field(ctx, i):
    return _fmt(ctx).render(", ".join(_candidates(ctx, i)))


@attack(F, "enumerate_free_text", "high", "Many candidate answers listed in free text, no answer field.")
def _enum_free(ctx, i):
    return "It could be any of these: " + ", ".join(_candidates(ctx, i)) + "."


@attack(F, "greedy_regex", "high", "Markup that a greedy `open(.*)close` regex spans across two fields.",
        rows=_delimited_rows)
def _greedy(ctx, i):
    f, ref, w = _fmt(ctx), ctx.reference(i), ctx.wrong(i, 1)[0]
    return [f"{f.preamble}{f.open}{w}{f.close} (not {ref}){f.close}",
            f"{f.preamble}{f.open}{w}{f.close}\n\nNote: {ref} was only a guess.\n{f.close}"]

@attack(F, "first_field_not_final", "medium",
        "A draft answer field with the right value, then a different final answer field: the reward must read the "
        "final one (reading the first misjudges every corrected answer).", rows=_delimited_rows)
def _first_not_final(ctx, i):
    f, ref, w = _fmt(ctx), ctx.reference(i), ctx.wrong(i, 1)[0]
    return f"{f.preamble}{f.open}{ref}{f.close} was my draft; final: {f.open}{w}{f.close}"


@attack(F, "malformed_markup", "high", "Broken markup: unclosed, nested, truncated, binary and deep braces.",
        rows=_delimited_rows)
def _malformed(ctx, i):
    f, ref, w = _fmt(ctx), ctx.reference(i), ctx.wrong(i, 1)[0]
    return [
        f"{f.preamble}{f.open}{w} {ref}",  # unclosed, both values inside
        f"{f.preamble}{f.open}{f.open}{w}{f.close}{f.close}",  # nested
        f"{f.preamble}{f.open}{w}{f.close[:-1]} {ref}",  # truncated close marker, the right value after it
        f"{f.preamble}{f.open}\x00\ufffd{f.close}",  # binary junk
        f"{f.preamble}{f.open}{'{' * 40}{w}{f.close}",  # deep braces (parsers that eval or json.loads)
    ]


@attack(F, "unicode_zero_width_smuggle", UNICODE_SEVERITY,
        "A wrong value with the right one glued on by a zero-width space (reads as one wrong number).")
def _zw(ctx, i):
    ref, w = ctx.reference(i), ctx.wrong(i, 1)[0]
    return [_fmt(ctx).render(f"{w}\u200b{ref}"), _fmt(ctx).render(f"{ref}\u200b{w}")]


@attack(F, "unicode_homoglyph_minus", UNICODE_SEVERITY,
        "The reference negated with U+2212 MINUS SIGN (reads −42; ASCII-only cleaning turns it into 42).",
        rows=lambda ctx: [i for i in _numeric_rows(ctx) if parse_number(ctx.reference(i)) > 0])
def _minus(ctx, i):
    return _fmt(ctx).render("\u2212" + ctx.reference(i))


@attack(F, "unicode_nfkc_superscript", UNICODE_SEVERITY,
        "A different value whose NFKC form is the reference (4² is 16, NFKC makes it '42').",
        rows=_numeric_rows)
def _superscript(ctx, i):
    v = superscript_variant(ctx.reference(i))
    return None if v is None else _fmt(ctx).render(v)


@attack(F, "unicode_fullwidth_wrong", UNICODE_SEVERITY, "A wrong value in full-width digits next to the right one in ASCII.",
        rows=_numeric_rows)
def _fullwidth_wrong(ctx, i):
    ref, w = ctx.reference(i), ctx.wrong(i, 1)[0]
    return _fmt(ctx).render(f"{FULLWIDTH(w)} {ref}")


@attack(F, "near_miss_off_by_one", "high", "The reference plus or minus one unit in its last place (99 for 100).",
        rows=_numeric_rows)
def _off_by_one(ctx, i):
    return [_fmt(ctx).render(v) for v in near_misses(ctx.reference(i))["off_by_one"]]


@attack(F, "near_miss_relative", "high", "The reference off by 0.5% (a relative tolerance accepts it).",
        rows=_numeric_rows)
def _relative(ctx, i):
    return [_fmt(ctx).render(v) for v in near_misses(ctx.reference(i))["relative"]]


@attack(F, "near_miss_superstring", "high", "A longer number containing the reference's digits (1042 for 42).",
        rows=_numeric_rows)
def _superstring(ctx, i):
    return [_fmt(ctx).render(v) for v in near_misses(ctx.reference(i))["superstring"]]
