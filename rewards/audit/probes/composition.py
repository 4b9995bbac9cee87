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


def _samples_with_components(ctx: AuditContext):
    return [s for s in ctx.scored if not s.override and s.result.error is None and s.result.score is not None
            and s.result.components]


def _fit(samples, names: list[str]):
    """Least-squares effective weight of each named component in the score over `samples` (+ an intercept);
    None when there are too few samples. Also each component's spread and the score range."""
    if not names or len(samples) < len(names) + 3:
        return None
    X = np.array([[float(s.result.components.get(k, 0.0)) for k in names] + [1.0] for s in samples])
    y = np.array([float(s.result.score) for s in samples])
    if not np.all(np.isfinite(X)):
        return None
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    spread = X[:, :-1].max(axis=0) - X[:, :-1].min(axis=0)
    return dict(zip(names, coef[:-1])), dict(zip(names, spread)), max(float(y.max() - y.min()), 1e-9)


def _groups(samples):
    """Fit within the passing and the failing samples separately: a shaped score is `pass/fail base + signals`,
    and signals may apply to one group only, so one fit across both would mix the base into the weights."""
    has_verdict = [s for s in samples if s.result.passed is not None]
    if not has_verdict:
        return [("all", samples)]
    return [(g, [s for s in has_verdict if bool(s.result.passed) == (g == "pass")]) for g in ("pass", "fail")]


class ZeroWeight(Probe):
    family, name, severity = F, "zero_weight_component", "high"
    description = "A component declared with weight 0 does not move the score."
    kinds = ("text", "trajectory")
    phase = 1

    def judge(self, ctx, cases, results) -> Outcome:
        w = ctx.scorer.weights
        if not w or not any(v == 0 for v in w.values()):
            return Outcome(skipped="the reward declares no zero-weight component")
        samples = _samples_with_components(ctx)
        names = sorted(k for k in w if any(k in s.result.components for s in samples))
        fooled, fitted = [], False
        for group, part in _groups(samples):
            fit = _fit(part, names)
            if fit is None:
                continue
            fitted = True
            coef, spread, yr = fit
            for k in names:
                if w[k] == 0 and spread[k] > 0 and abs(coef[k]) * spread[k] > 1e-3 * yr:
                    s = max(part, key=lambda s, k=k: abs(s.result.components.get(k, 0.0)))
                    fooled.append((Case(s.row, s.item, k), s.result,
                                   f"{k}: declared 0, effective weight {coef[k]:.4g} on {group} samples"))
        if not fitted:
            return Outcome(skipped="too few samples with components")
        return Outcome(tested_rows=len({s.row for s in samples}), fooled=fooled,
                       message="a zero-weight component still changes the score")


class WrongSign(Probe):
    family, name, severity = F, "component_sign", "high"
    description = ("Each component moves the score in its declared direction (or, without declared weights, in "
                   "the direction that separates passing from failing samples).")
    kinds = ("text", "trajectory")
    phase = 1

    def judge(self, ctx, cases, results) -> Outcome:
        samples = _samples_with_components(ctx)
        w = ctx.scorer.weights or {}
        declared = sorted(k for k, v in w.items() if v != 0 and any(k in s.result.components for s in samples))
        fooled, fitted, blocking = [], False, False
        if declared:  # the declared signals, fitted within each verdict group
            for group, part in _groups(samples):
                fit = _fit(part, declared)
                if fit is None:
                    continue
                fitted = True
                coef, spread, yr = fit
                for k in declared:
                    if spread[k] > 0 and abs(coef[k]) * spread[k] > 0.02 * yr and \
                            math.copysign(1, coef[k]) != math.copysign(1, w[k]):
                        s = max(part, key=lambda s, k=k: abs(s.result.components.get(k, 0.0)))
                        fooled.append((Case(s.row, s.item, k), s.result,
                                       f"{k}: declared weight {w[k]:+g}, effective {coef[k]:+.3g} on {group} samples"))
                        blocking = True
        else:  # no declared weights: a component that tracks passing but lowers the score (a weak signal: medium)
            names = sorted({k for s in samples for k in s.result.components})
            fit = _fit(samples, names)
            verdicted = [s for s in samples if s.result.passed is not None]
            if fit is not None and verdicted:
                fitted = True
                coef, spread, yr = fit
                for k in names:
                    pos = [s.result.components.get(k, 0.0) for s in verdicted if s.result.passed]
                    neg = [s.result.components.get(k, 0.0) for s in verdicted if not s.result.passed]
                    if not pos or not neg or spread[k] <= 0 or abs(coef[k]) * spread[k] <= 0.02 * yr:
                        continue
                    d = float(np.mean(pos) - np.mean(neg))
                    if abs(d) > 0.05 * spread[k] and math.copysign(1, coef[k]) != math.copysign(1, d):
                        s = max(samples, key=lambda s, k=k: abs(s.result.components.get(k, 0.0)))
                        fooled.append((Case(s.row, s.item, k), s.result,
                                       f"{k}: higher on {'passing' if d > 0 else 'failing'} samples, yet effective "
                                       f"weight {coef[k]:+.3g}"))
        if not fitted:
            return Outcome(skipped="too few samples with components")
        return Outcome(tested_rows=len({s.row for s in samples}), fooled=fooled,
                       severity="high" if blocking else "medium",
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


@attack(F, "nan_reference", "medium",
        "With the reference set to NaN (a missing value read by pandas), 'nan' does not pass.", rows=_none_rows)
def _nan_reference(ctx: AuditContext, i: int):
    f, over = ctx.answer_format, {ctx.reference_field: float("nan")}
    return [Case(i, v, f"reference=NaN, answer {v!r}", row_override=over) for v in (f.render("nan"), f.render("NaN"))]


for _p in (Dominance(), ZeroWeight(), WrongSign(), NonFiniteComponent()):
    register(_p)
