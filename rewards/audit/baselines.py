"""Trivial-policy baselines: how often the reward passes a policy that solves nothing.

Why first in the report: a do-nothing pass rate of 30% means 30% of the training signal rewards doing nothing;
for tool tasks it is the base rate of no-op tasks (NeMo Gym's Workplace Assistant set scores 1 for no-ops on every
task whose ground truth is empty).
"""

from __future__ import annotations

from collections import Counter

from rewards.audit.context import AuditContext, Case, prompt_text
from schemas.audit import BaselinePolicy, Baselines


def _policy(ctx: AuditContext, cases: list[Case], description: str) -> BaselinePolicy:
    results = ctx.score(cases, source="baseline")
    scores = [r.score for r in results if r.score is not None and r.error is None]
    return BaselinePolicy(
        pass_rate=(sum(ctx.is_pass(c.row, r) for c, r in zip(cases, results)) / len(cases)) if cases else 0.0,
        mean_score=(sum(scores) / len(scores)) if scores else None,
        rows=len(cases), errors=sum(r.error is not None for r in results), description=description,
    )


def compute_baselines(ctx: AuditContext) -> Baselines:
    n = len(ctx.rows)
    ref_rows = [i for i in range(n) if ctx.gold_item(i) is not None]
    ref_rate = sum(ctx.reference_passes(i) for i in ref_rows) / len(ref_rows) if ref_rows else 0.0
    out = Baselines(reference_pass_rate=ref_rate)
    if ctx.kind == "trajectory":
        from rewards.audit.probes.tools import noop_trajectory

        out.policies["do_nothing"] = _policy(ctx, [Case(i, noop_trajectory(ctx, i)) for i in range(n)],
                                             "no tool call, then 'I have completed the task.'")
        return out
    out.policies["do_nothing"] = _policy(ctx, [Case(i, "") for i in range(n)], "an empty completion")
    refs = [ctx.reference(i) for i in ctx.text_rows()]
    if refs:
        mode = Counter(refs).most_common(1)[0][0]
        out.policies["constant_answer"] = _policy(
            ctx, [Case(i, ctx.answer_format.render(mode)) for i in range(n)],
            f"the most common answer {mode!r} on every row (fair share: "
            f"{sum(ctx.is_reference(i, mode) for i in range(n)) / n:.0%} of rows have it)")
    out.policies["echo_prompt"] = _policy(ctx, [Case(i, prompt_text(ctx.rows[i])) for i in range(n)],
                                          "the prompt repeated back")
    out.policies["format_only"] = _policy(ctx, [Case(i, ctx.answer_format.render("")) for i in range(n)],
                                          "the answer format with nothing in it")
    return out
