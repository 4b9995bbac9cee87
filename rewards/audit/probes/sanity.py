"""Sanity probes: the reference passes and scores the maximum, scores are deterministic and finite, and nothing
(empty, whitespace, random text) passes."""

from __future__ import annotations

import random
import re

from rewards.audit.context import EPS, AuditContext, Case, item_key
from rewards.audit.registry import Outcome, Probe, attack, register
from schemas.rewards import RewardResult

F = "sanity"
_WORDS = ("river", "blue", "seven", "table", "quickly", "orbit", "lemon", "paper", "north", "signal", "maybe",
          "seventeen", "glass", "thirty", "answer", "cloud", "metal", "over", "under", "result")


@attack(F, "empty", "critical", "An empty completion.", kinds=("text",))
def _empty(ctx: AuditContext, i: int):
    return ""


@attack(F, "whitespace", "critical", "A completion of only whitespace.")
def _whitespace(ctx: AuditContext, i: int):
    return " \n\t \n"


@attack(F, "random_text", "high", "Random words, about as long as a short answer.")
def _random_text(ctx: AuditContext, i: int):
    rng = random.Random(1000 + i)
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 12)))


@attack(F, "random_in_field", "high", "Random words inside the accepted answer format.")
def _random_in_field(ctx: AuditContext, i: int):
    rng = random.Random(2000 + i)
    return ctx.answer_format.render(" ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 4))))


class ReferencePasses(Probe):
    family, name, severity = F, "reference_passes", "high"
    description = "The reference answer, in the accepted format, passes on every row."
    kinds = ("text", "trajectory")

    def judge(self, ctx, cases, results) -> Outcome:
        rows = [i for i in range(len(ctx.rows)) if i < len(ctx.reference_results) and ctx.reference_results[i]]
        if not rows:
            return Outcome(skipped="no row has a reference")
        fooled = [(Case(i, ctx.gold_item(i), "reference"), ctx.reference_results[i], "the correct answer is rejected")
                  for i in rows if not ctx.reference_passes(i)]
        out = Outcome(tested_rows=len(rows), fooled=fooled)
        scores = {round(s.result.score, 12) for s in ctx.scored if s.result.score is not None and not s.override}
        if fooled and len(scores) == 1:
            out.severity = "critical"
            out.message = (f"the reward gives every input the same score ({scores.pop():g}): it cannot tell a correct "
                           "answer from anything else")
        elif len(fooled) > len(rows) / 2:
            out.severity = "critical"
            out.message = (f"the reference fails on {len(fooled)}/{len(rows)} rows in every answer format tried; "
                           "the reward cannot be learned, or expects a format the audit does not know")
        else:
            out.message = "correct answers are rejected on these rows (false negatives)"
        return out


class ReferenceMax(Probe):
    family, name, severity = F, "reference_max", "high"
    description = "No other input scores above the reference answer on its row."
    kinds = ("text", "trajectory")
    phase = 1

    def judge(self, ctx, cases, results) -> Outcome:
        best: dict[int, tuple[float, object, RewardResult]] = {}
        gold_keys = {i: item_key(ctx.gold_item(i)) for i in range(len(ctx.rows)) if ctx.gold_item(i) is not None}
        for s in ctx.scored:
            if s.result.score is None or s.result.error or s.override or s.source == "format" or s.source.startswith("robustness/"):
                continue
            if gold_keys.get(s.row) == item_key(s.item):
                continue
            if s.row not in best or s.result.score > best[s.row][0]:
                best[s.row] = (s.result.score, s.item, s.result)
        fooled, tested = [], 0
        for i, (score, item, res) in best.items():
            ref = ctx.reference_score(i)
            if ref is None or not ctx.reference_passes(i):
                continue
            tested += 1
            if score > ref + EPS * max(1.0, abs(ref)):
                fooled.append((Case(i, item, "above reference"), res, f"scored {score:.4g} > reference {ref:.4g}"))
        if not tested:
            return Outcome(skipped="the reference passes on no row")
        return Outcome(tested_rows=tested, fooled=fooled,
                       message="an input that is not the reference scores higher than the reference")


class Determinism(Probe):
    family, name, severity = F, "determinism", "high"
    description = "The same input scored again gets the same score and verdict."
    kinds = ("text", "trajectory")
    phase = 1
    sample_rows = 40
    repeats = 2

    def judge(self, ctx, cases, results) -> Outcome:
        by_row: dict[int, list] = {}
        for s in ctx.scored:
            if s.override:
                continue
            if len(by_row.setdefault(s.row, [])) < 3:
                by_row[s.row].append(s)
        picked = [s for row in sorted(by_row)[: self.sample_rows] for s in by_row[row]]
        if not picked:
            return Outcome(skipped="nothing was scored")
        again = [ctx.rescore([Case(s.row, s.item) for s in picked]) for _ in range(self.repeats)]
        fooled = []
        for n, s in enumerate(picked):
            for res in (a[n] for a in again):
                if _differs(s.result, res):
                    fooled.append((Case(s.row, s.item, "rescored"), res,
                                   f"first {s.result.score} ({s.result.passed}), then {res.score} ({res.passed})"))
                    break
        return Outcome(tested_rows=len({s.row for s in picked}), fooled=fooled,
                       message="the same input gets different scores: the policy is trained on noise")


def _differs(a: RewardResult, b: RewardResult) -> bool:
    if (a.error is None) != (b.error is None) or a.passed != b.passed:
        return True
    if a.score is None or b.score is None:
        return a.score != b.score
    return abs(a.score - b.score) > 1e-9 * max(1.0, abs(a.score))


_NONFINITE = re.compile(r"nan|inf|finite", re.I)


class NonFinite(Probe):
    family, name, severity = F, "non_finite", "high"
    description = "No input makes the reward return NaN or infinity."
    kinds = ("text", "trajectory")
    phase = 1

    def judge(self, ctx, cases, results) -> Outcome:
        fooled = [(Case(s.row, s.item), s.result, (s.result.error or "")[:120]) for s in ctx.scored
                  if s.result.error and _NONFINITE.search(s.result.error.splitlines()[0] if s.result.error else "")]
        return Outcome(tested_rows=len({s.row for s in ctx.scored}), fooled=fooled,
                       message="the reward returns non-finite scores (shown as errors)")


class Crashes(Probe):
    family, name, severity = F, "crashes", "medium"
    description = "The reward does not raise on adversarial inputs (a raise is an error result in training)."
    kinds = ("text", "trajectory")
    phase = 1

    def judge(self, ctx, cases, results) -> Outcome:
        # raising on a row whose reference was removed (the missing-reference probes) is a visible error, fine
        errs = [s for s in ctx.scored if s.result.error and not s.override
                and not _NONFINITE.search(s.result.error.splitlines()[0])]
        fooled = [(Case(s.row, s.item), s.result, s.result.error.splitlines()[0][:160]) for s in errs]
        out = Outcome(tested_rows=len({s.row for s in ctx.scored}), fooled=fooled,
                      message=f"the reward raised on {len(errs)} of {len(ctx.scored)} inputs")
        if errs and len(errs) > 0.5 * len(ctx.scored):
            out.severity = "high"
        return out


class ScoreRange(Probe):
    family, name, severity = F, "range", "medium"
    description = "Scores stay in a bounded range (|score| <= 100), so advantages are not dominated by outliers."
    kinds = ("text", "trajectory")
    phase = 1
    bound = 100.0

    def judge(self, ctx, cases, results) -> Outcome:
        scored = [s for s in ctx.scored if s.result.score is not None]
        fooled = [(Case(s.row, s.item), s.result, f"score {s.result.score:.4g}") for s in scored
                  if abs(s.result.score) > self.bound]
        return Outcome(tested_rows=len({s.row for s in scored}), fooled=fooled,
                       message=f"scores outside [-{self.bound:g}, {self.bound:g}]")


for _p in (ReferencePasses(), ReferenceMax(), Determinism(), NonFinite(), Crashes(), ScoreRange()):
    register(_p)
