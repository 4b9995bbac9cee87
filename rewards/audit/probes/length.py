"""Length probes: padding must not turn a wrong answer into a better-scored one, and on real model outputs the
score should not simply follow length."""

from __future__ import annotations

from rewards.audit.context import EPS, AuditContext, Case
from rewards.audit.inspection import spearman
from rewards.audit.registry import Outcome, Probe, register

F = "length"
FILLER = ("Let me reason about this carefully. First I restate the problem in my own words, then I consider each "
          "quantity involved and how they relate, checking every step twice before moving on. ")


def padding(chars: int) -> str:
    return (FILLER * (chars // len(FILLER) + 1))[:chars]


class PaddedWrong(Probe):
    family, name, severity = F, "padded_wrong", "high"
    description = "A wrong answer after ~1,500 characters of filler neither passes nor outscores the short one."
    pad = 1500

    def build(self, ctx: AuditContext) -> list[Case]:
        cases = []
        for i in ctx.text_rows():
            wrong = ctx.answer_format.render(ctx.wrong(i, 1)[0])
            cases += [Case(i, wrong, "short"), Case(i, padding(self.pad) + "\n" + wrong, "padded")]
        return cases

    def judge(self, ctx, cases, results) -> Outcome:
        pairs: dict[int, dict] = {}
        for c, r in zip(cases, results):
            pairs.setdefault(c.row, {})[c.variant] = (c, r)
        fooled = []
        for i, d in pairs.items():
            (cs, rs), (cp, rp) = d["short"], d["padded"]
            span = _span(ctx, i, rs)
            if ctx.is_pass(i, rp) and not ctx.is_pass(i, rs):
                fooled.append((cp, rp, "padding made a wrong answer pass"))
            elif rp.score is not None and rs.score is not None and rp.score - rs.score > 0.05 * span + EPS:
                fooled.append((cp, rp, f"padding raised a wrong answer's score {rs.score:.4g} -> {rp.score:.4g}"))
        return Outcome(tested_rows=len(pairs), fooled=fooled,
                       message="longer wrong answers score higher: the policy will learn to ramble")


class PaddedCorrect(Probe):
    family, name, severity = F, "padded_correct_bonus", "medium"
    description = "Filler before the correct answer does not raise its score (a length bonus)."
    pad = 1500

    def build(self, ctx: AuditContext) -> list[Case]:
        return [Case(i, padding(self.pad) + "\n" + ctx.gold_text(i), "padded gold") for i in ctx.text_rows()]

    def judge(self, ctx, cases, results) -> Outcome:
        fooled, tested = [], 0
        for c, r in zip(cases, results):
            ref = ctx.reference_score(c.row)
            if ref is None or r.score is None:
                continue
            tested += 1
            if r.score > ref + EPS * max(1.0, abs(ref)) + 1e-6:
                fooled.append((c, r, f"padded correct answer {r.score:.4g} > reference {ref:.4g}"))
        return Outcome(tested_rows=tested, fooled=fooled, message="the score grows with length")


class LengthCorrelation(Probe):
    family, name, severity = F, "length_correlation", "medium"
    description = "On sampled model outputs, |Spearman(score, length)| < 0.5."
    kinds = ("text",)
    phase = 1
    threshold = 0.5

    def judge(self, ctx, cases, results) -> Outcome:
        pts = [(len(text), r.score, row, text, r) for row, text, r in ctx.samples if r.score is not None and not r.error]
        if len(pts) < 10:
            return Outcome(skipped="needs >= 10 sampled model outputs (use --samples)")
        rho = spearman([p[0] for p in pts], [p[1] for p in pts])
        if rho is None or abs(rho) < self.threshold:
            return Outcome(tested_rows=len({p[2] for p in pts}),
                           message=f"Spearman {rho if rho is None else round(rho, 3)}")
        top = sorted(pts, key=lambda p: -p[0] if rho > 0 else p[0])[:3]
        fooled = [(Case(p[2], p[3], "sample"), p[4], f"length {p[0]}, Spearman {rho:.2f}") for p in top]
        return Outcome(tested_rows=len({p[2] for p in pts}), fooled=fooled,
                       message=f"score follows length on sampled outputs (Spearman {rho:.2f})")


def _span(ctx: AuditContext, i: int, wrong_result) -> float:
    ref = ctx.reference_score(i)
    if ref is None or wrong_result.score is None:
        return 1.0
    return max(abs(ref - wrong_result.score), 1e-6) if abs(ref - wrong_result.score) > 1e-6 else max(abs(ref), 1.0)


for _p in (PaddedWrong(), PaddedCorrect(), LengthCorrelation()):
    register(_p)
