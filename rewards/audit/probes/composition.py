"""Composition probes for shaped rewards: every passing sample scores strictly above every failing one
(dominance), declared zero-weight components do not move the score, no component pushes the wrong way, and a
missing (None/NaN) reference or component is not a free pass."""

from __future__ import annotations

import math

import numpy as np

from rewards.audit.context import AuditContext, Case
from rewards.audit.registry import Outcome, Probe, attack, register

F = "composition"


def _verdicted(ctx: AuditContext):
    return [s for s in ctx.scored if not s.override and s.result.error is None and s.result.score is not None
            and s.result.passed is not None]


class Dominance(Probe):
    family, name, severity = F, "dominance", "high"
    description = "Every failing sample scores strictly below every passing sample (over all audit inputs)."
    kinds = ("text", "trajectory")
    phase = 1

    def judge(self, ctx, cases, results) -> Outcome:
        samples = _verdicted(ctx)
        passing = [s for s in samples if s.result.passed]
        failing = [s for s in samples if not s.result.passed]
        if not samples:
            return Outcome(skipped="the reward gives no pass/fail verdict (a plain score)")
        if not passing or not failing:
            return Outcome(tested_rows=len({s.row for s in samples}),
                           message="only passing or only failing samples were seen")
        low = min(passing, key=lambda s: s.result.score)
        bad = sorted((s for s in failing if s.result.score >= low.result.score), key=lambda s: -s.result.score)
        fooled = [(Case(s.row, s.item, "failing"), s.result,
                   f"fails but scores {s.result.score:.4g} >= lowest passing {low.result.score:.4g} (row {low.row})")
                  for s in bad]
        return Outcome(tested_rows=len({s.row for s in samples}), fooled=fooled,
                       message="a failing sample scores at least as high as a passing one")


def _regression(ctx: AuditContext):
    """Least-squares effective weight of each component in the score, over every scored sample."""
    samples = [s for s in ctx.scored if not s.override and s.result.error is None and s.result.score is not None
               and s.result.components]
    names = sorted({k for s in samples for k in s.result.components})
    if len(samples) < len(names) + 3 or not names:
        return None
    X = np.array([[float(s.result.components.get(k, 0.0)) for k in names] + [1.0] for s in samples])
    y = np.array([float(s.result.score) for s in samples])
    if not np.all(np.isfinite(X)):
        return None
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    spread = X[:, :-1].max(axis=0) - X[:, :-1].min(axis=0)
    return names, coef[:-1], spread, samples, X, y


class ZeroWeight(Probe):
    family, name, severity = F, "zero_weight_component", "high"
    description = "A component declared with weight 0 does not move the score."
    kinds = ("text", "trajectory")
    phase = 1

    def judge(self, ctx, cases, results) -> Outcome:
        w = ctx.scorer.weights
        if not w or not any(v == 0 for v in w.values()):
            return Outcome(skipped="the reward declares no zero-weight component")
        reg = _regression(ctx)
        if reg is None:
            return Outcome(skipped="too few samples with components")
        names, coef, spread, samples, X, y = reg
        yr = max(float(y.max() - y.min()), 1e-9)
        fooled = []
        for k, c, sp in zip(names, coef, spread):
            if w.get(k) == 0 and sp > 0 and abs(c) * sp > 1e-3 * yr:
                col = names.index(k)
                s = max(samples, key=lambda s, col=col: abs(s.result.components.get(k, 0.0)))
                fooled.append((Case(s.row, s.item, k), s.result, f"{k}: declared 0, effective weight {c:.4g}"))
        return Outcome(tested_rows=len({s.row for s in samples}), fooled=fooled,
                       message="a zero-weight component still changes the score")


class WrongSign(Probe):
    family, name, severity = F, "component_sign", "high"
    description = ("Each component moves the score in its declared direction (or, without declared weights, in "
                   "the direction that separates passing from failing samples).")
    kinds = ("text", "trajectory")
    phase = 1

    def judge(self, ctx, cases, results) -> Outcome:
        reg = _regression(ctx)
        if reg is None:
            return Outcome(skipped="too few samples with components")
        names, coef, spread, samples, X, y = reg
        yr = max(float(y.max() - y.min()), 1e-9)
        w = ctx.scorer.weights or {}
        fooled, severity = [], "high" if w else "medium"
        for j, (k, c, sp) in enumerate(zip(names, coef, spread)):
            if sp <= 0 or abs(c) * sp <= 0.02 * yr:
                continue
            if k in w and w[k] != 0:
                expected = math.copysign(1, w[k])
                why = f"declared weight {w[k]:+g}, effective {c:+.3g}"
            else:
                verdicted = [(s.result.components.get(k, 0.0), s.result.passed) for s in samples
                             if s.result.passed is not None]
                pos = [v for v, p in verdicted if p]
                neg = [v for v, p in verdicted if not p]
                if not pos or not neg:
                    continue
                d = float(np.mean(pos) - np.mean(neg))
                if abs(d) <= 0.05 * sp:
                    continue
                expected = math.copysign(1, d)
                why = f"higher on {'passing' if d > 0 else 'failing'} samples, yet effective weight {c:+.3g}"
            if math.copysign(1, c) != expected:
                s = max(samples, key=lambda s, k=k: abs(s.result.components.get(k, 0.0)))
                fooled.append((Case(s.row, s.item, k), s.result, f"{k}: {why}"))
        return Outcome(tested_rows=len({s.row for s in samples}), fooled=fooled, severity=severity,
                       message="a component pushes the score the wrong way")


class NonFiniteComponent(Probe):
    family, name, severity = F, "nan_component", "medium"
    description = "No component is NaN, infinite or missing on some inputs only."
    kinds = ("text", "trajectory")
    phase = 1

    def judge(self, ctx, cases, results) -> Outcome:
        fooled = []
        with_comp = [s for s in ctx.scored if s.result.components]
        for s in ctx.scored:
            comps = s.result.components
            bad = [k for k, v in comps.items() if not isinstance(v, (int, float)) or not math.isfinite(v)]
            if bad or (s.result.error and "component" in s.result.error):
                fooled.append((Case(s.row, s.item), s.result, f"non-finite component(s) {bad or s.result.error}"))
        return Outcome(tested_rows=len({s.row for s in with_comp}) or len({s.row for s in ctx.scored}),
                       fooled=fooled, message="components with NaN/inf values")


def _none_rows(ctx: AuditContext):
    return ctx.text_rows()[:25]


@attack(F, "missing_reference", "high",
        "With the reference set to None, 'None', 'null', 'nan' or an empty answer does not pass.", rows=_none_rows)
def _missing_reference(ctx: AuditContext, i: int):
    f, over = ctx.answer_format, {ctx.reference_field: None}
    return [Case(i, v, f"reference=None, answer {v!r}", row_override=over)
            for v in ("", f.render(""), f.render("None"), f.render("null"), f.render("nan"), "None")]


@attack(F, "nan_reference", "high", "With the reference set to NaN, 'nan' does not pass.", rows=_none_rows)
def _nan_reference(ctx: AuditContext, i: int):
    f, over = ctx.answer_format, {ctx.reference_field: float("nan")}
    return [Case(i, v, f"reference=NaN, answer {v!r}", row_override=over) for v in (f.render("nan"), f.render("NaN"))]


for _p in (Dominance(), ZeroWeight(), WrongSign(), NonFiniteComponent()):
    register(_p)
