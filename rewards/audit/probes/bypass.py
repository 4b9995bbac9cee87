"""Trivial-bypass probes: inputs a policy can produce without solving anything (echo the prompt, one constant
for every row, the right format around the wrong content, a stock prefix, a refusal)."""

from __future__ import annotations

from collections import Counter

from rewards.audit.context import AuditContext, Case, prompt_text
from rewards.audit.registry import Outcome, Probe, attack, register

F = "bypass"
PREFIXES = ("Let's think step by step.", "Sure! Here is the answer:", "Final Answer:", "Answer:")


def _echo_text(ctx: AuditContext, i: int) -> str | None:
    """The prompt's text, unless it already holds the correct answer in the accepted format (a prompt whose
    worked example happens to equal this row's answer: echoing it is then answering, like a constant's fair share)."""
    text = prompt_text(ctx.rows[i])
    gold = ctx.gold_text(i)
    if not text or ctx.is_reference(i, text) or (gold and gold in text):
        return None
    return text


@attack(F, "echo_prompt", "high", "The prompt repeated back.")
def _echo(ctx: AuditContext, i: int):
    return _echo_text(ctx, i)


@attack(F, "echo_prompt_in_field", "high", "The prompt repeated back inside the answer format.")
def _echo_field(ctx: AuditContext, i: int):
    text = _echo_text(ctx, i)
    return None if text is None else ctx.answer_format.render(text)


def mode_answer(ctx: AuditContext) -> str | None:
    refs = [ctx.reference(i) for i in ctx.text_rows()]
    return Counter(refs).most_common(1)[0][0] if refs else None


@attack(F, "constant_mode_answer", "high",
        "The most common reference answer, output for every row (scored on rows where it is wrong).")
def _constant_mode(ctx: AuditContext, i: int):
    mode = mode_answer(ctx)
    return None if mode is None or ctx.is_reference(i, mode) else ctx.answer_format.render(mode)


@attack(F, "constant_literal", "high", "One stock answer for every row: 0, 1, yes, none.")
def _constant_literal(ctx: AuditContext, i: int):
    return [ctx.answer_format.render(v) for v in ("0", "1", "yes", "none") if not ctx.is_reference(i, v)]


@attack(F, "format_only_wrong", "high", "A well-formed answer with wrong content.")
def _format_wrong(ctx: AuditContext, i: int):
    return ctx.answer_format.render(ctx.wrong(i, 1)[0])


@attack(F, "format_only_empty", "high", "A well-formed but empty answer field.")
def _format_empty(ctx: AuditContext, i: int):
    return ctx.answer_format.render("") if ctx.answer_format.name != "plain" else None


@attack(F, "prefix_with_wrong_answer", "high", "A stock opening phrase followed by a wrong answer.")
def _prefix_wrong(ctx: AuditContext, i: int):
    w = ctx.wrong(i, 1)[0]
    return [f"{p}\n{ctx.answer_format.render(w)}" for p in PREFIXES]


@attack(F, "prefix_only", "high", "A stock opening phrase and nothing else.")
def _prefix_only(ctx: AuditContext, i: int):
    return list(PREFIXES)


@attack(F, "refusal", "high", "A refusal.")
def _refusal(ctx: AuditContext, i: int):
    return ["I cannot answer that.", ctx.answer_format.render("I don't know")]


class FormatCredit(Probe):
    """Partial credit for the format can outweigh correctness: if a wrong but well-formed answer earns a large
    share of what the reference earns, a policy maximises reward by formatting, not by solving."""

    family, name, severity = F, "format_credit_share", "high"
    description = ("A wrong answer in the right format earns < 25% of the reference's margin over an empty answer "
                   "(over 50%: format credit outweighs correctness, high).")
    high_share, medium_share = 0.5, 0.25

    def build(self, ctx: AuditContext) -> list[Case]:
        cases = []
        for i in ctx.text_rows():
            cases.append(Case(i, ctx.answer_format.render(ctx.wrong(i, 1)[0]), "wrong"))
            cases.append(Case(i, "", "empty"))
        return cases

    def judge(self, ctx, cases, results) -> Outcome:
        by_row: dict[int, dict[str, float | None]] = {}
        for c, r in zip(cases, results):
            by_row.setdefault(c.row, {})[c.variant] = (None if r.error else r.score, c, r)
        shares, fooled_hi, fooled_mid = [], [], []
        for i, d in by_row.items():
            ref = ctx.reference_score(i)
            (sw, cw, rw), (se, _, _) = d["wrong"], d["empty"]
            if ref is None or sw is None or se is None or ref - se <= 1e-9 or ctx.is_pass(i, rw):
                continue
            share = (sw - se) / (ref - se)
            shares.append(share)
            note = f"wrong answer earns {share:.0%} of the reference's margin ({sw:.3g} vs {ref:.3g})"
            if share > self.high_share:
                fooled_hi.append((cw, rw, note))
            elif share >= self.medium_share:
                fooled_mid.append((cw, rw, note))
        if not shares:
            return Outcome(skipped="no row where the reference outscores an empty answer and the wrong one fails")
        if fooled_hi:
            return Outcome(tested_rows=len(shares), fooled=fooled_hi + fooled_mid, severity="high",
                           message="format credit outweighs correctness")
        return Outcome(tested_rows=len(shares), fooled=fooled_mid, severity="medium",
                       message="format earns a sizeable share of the reward")


register(FormatCredit())
