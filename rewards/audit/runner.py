"""Running an audit: find the accepted answer format, run every probe in one scoring batch, score the sampled
outputs, compute the baselines, run the cross-sample probes, and turn it all into an AuditReport."""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

from rewards.audit import trajectories as T
from rewards.audit.baselines import compute_baselines
from rewards.audit.context import AuditContext, Case, item_text
from rewards.audit.formats import FORMATS
from rewards.audit.inspection import score_samples, summarize
from rewards.audit.registry import Outcome, Probe, all_probes
from rewards.audit.scoring import AuditScorer
from schemas.audit import AuditReport, Example, Finding, InspectionSummary, ProbeRun, severity_at_least

Progress = Callable[[str, int, int], None]


class AuditMisuse(ValueError):
    """The audit cannot run on these inputs (no rows, missing reference field, ...); the message says why."""


def detect_format(ctx: AuditContext) -> None:
    """Pick the answer rendering the reward passes on most rows (ties: higher mean score, then list order)."""
    rows = [i for i in range(len(ctx.rows)) if ctx.reference(i)]
    if not rows:
        ctx.reference_results = [None] * len(ctx.rows)
        return
    # every format in one batch: the correct answer in each accepted form is also evidence for dominance
    cases = [Case(i, fmt.render(ctx.reference(i)), f"format:{fmt.name}", source="format")
             for fmt in FORMATS for i in rows]
    all_results = ctx.score(cases, source="format")
    best = None
    for rank, fmt in enumerate(FORMATS):
        results = all_results[rank * len(rows):(rank + 1) * len(rows)]
        passes = sum(r.error is None and r.score is not None and (r.passed is None or r.passed) for r in results)
        scores = [r.score for r in results if r.error is None and r.score is not None]
        key = (passes, (sum(scores) / len(scores)) if scores else float("-inf"), -rank)
        if best is None or key > best[0]:
            best = (key, fmt, results)
    _, fmt, results = best
    ctx.answer_format = fmt
    ctx.format_detected = best[0][0] > 0
    ctx.reference_results = [None] * len(ctx.rows)
    for i, r in zip(rows, results):
        ctx.reference_results[i] = r
        ctx.gold_items[i] = fmt.render(ctx.reference(i))


def gold_trajectories(ctx: AuditContext) -> None:
    """For trajectory rewards the reference is the task's ground-truth calls, replayed, then a final answer."""
    ctx.reference_results = [None] * len(ctx.rows)
    rows = [i for i in range(len(ctx.rows)) if T.calls_of(ctx.rows[i]) is not None]
    cases = []
    for i in rows:
        final = ctx.rows[i].get("answer") or T.FINAL
        item = T.build(ctx.rows[i], T.calls_of(ctx.rows[i]), str(final), episode=ctx.episode)
        ctx.gold_items[i] = item
        cases.append(Case(i, item, "reference", source="reference"))
    for c, r in zip(cases, ctx.score(cases, source="reference")):
        ctx.reference_results[c.row] = r


def to_finding(probe: Probe, out: Outcome, ctx: AuditContext) -> Finding:
    rows = out.fooled_rows
    examples, seen = [], set()
    for c, r, note in out.fooled:
        if c.row in seen:
            continue
        seen.add(c.row)
        examples.append(Example(row=c.row, row_id=ctx.row_id(c.row), input=item_text(c.item), score=r.score,
                                passed=r.passed if r.passed is not None else ctx.is_pass(c.row, r),
                                note=note or c.variant))
        if len(examples) == 3:
            break
    return Finding(family=probe.family, probe=probe.name, severity=out.severity or probe.severity,
                   fooled_rows=len(rows), tested_rows=out.tested_rows,
                   message=out.message or probe.description, rows=rows[:50], examples=examples)


def run_audit(
    scorer: AuditScorer,
    rows: Sequence[dict[str, Any]],
    *,
    reference_field: str = "answer",
    samples: Sequence[tuple[int, str]] | None = None,
    labels: Sequence[bool | None] | None = None,
    model: str | None = None,
    families: Sequence[str] | None = None,
    dataset: str | None = None,
    episode: T.Episode | None = None,
    progress: Progress | None = None,
) -> tuple[AuditReport, AuditContext]:
    """Audit `scorer` on `rows`. `samples` are (row index, completion) pairs drawn from a model; `labels` the
    person's pass/fail for each sample (None: not labelled). `episode` gives tool probes a live environment
    (see `rewards.audit.trajectories.Episode`); a reward may also carry one as its `audit_episode` attribute."""
    t0 = time.time()
    rows = [dict(r) for r in rows]
    if not rows:
        raise AuditMisuse("the dataset has no rows")
    tick = progress or (lambda step, done, total: None)
    ctx = AuditContext(rows=rows, reference_field=reference_field, scorer=scorer)
    ctx.episode = episode if episode is not None else getattr(scorer, "episode", None)
    if scorer.kind == "text":
        if not any(reference_field in r for r in rows):
            raise AuditMisuse(f"reference field {reference_field!r} is in no row (columns: {sorted(rows[0])})")
        if not ctx.text_rows():
            raise AuditMisuse(f"reference field {reference_field!r} is empty on every row")
        detect_format(ctx)
    else:
        if not any(T.calls_of(r) is not None for r in rows):
            raise AuditMisuse("a trajectory reward needs rows with `ground_truth_calls`; none has them")
        gold_trajectories(ctx)
    tick("reference", 1, 1)

    # the sanity family always runs: without it a reward that errors on everything could "pass" a partial audit
    probes = [p for p in all_probes() if not families or p.family in families or p.family == "sanity"]
    runs: list[ProbeRun] = []
    findings: list[Finding] = []
    built: list[tuple[Probe, list[Case]]] = []
    for p in probes:
        why = p.applies(ctx)
        if why:
            runs.append(ProbeRun(family=p.family, probe=p.name, status="skipped", note=why))
            continue
        if p.phase == 0:
            cases = p.build(ctx)
            for c in cases:
                c.source = p.key
            built.append((p, cases))
    all_cases = [c for _, cases in built for c in cases]
    tick("probes", 0, len(all_cases))
    ctx.score(all_cases, source="probe")
    tick("probes", len(all_cases), len(all_cases))
    floor = [s.result.score for s in ctx.scored if s.result.score is not None and not s.override]
    ctx.score_floor = min(floor) if floor else None

    inspection: InspectionSummary | None = None
    if samples:
        scored = score_samples(ctx, list(samples))
        inspection = summarize(ctx, scored, labels, model=model)
    tick("samples", 1, 1)
    baselines = compute_baselines(ctx)
    tick("baselines", 1, 1)

    def record(p: Probe, out: Outcome) -> None:
        if out.skipped:
            runs.append(ProbeRun(family=p.family, probe=p.name, status="skipped", note=out.skipped))
            return
        status = "finding" if out.fooled else "clean"
        runs.append(ProbeRun(family=p.family, probe=p.name, status=status, tested_rows=out.tested_rows,
                             fooled_rows=len(out.fooled_rows), note=out.message if not out.fooled else ""))
        if out.fooled:
            findings.append(to_finding(p, out, ctx))

    for p, cases in built:
        record(p, p.judge(ctx, cases, ctx.score(cases)) if cases else p.judge(ctx, [], []))
    for p in probes:
        if p.phase == 1 and not p.applies(ctx):
            record(p, p.judge(ctx, [], []))
    tick("judged", 1, 1)

    findings.sort(key=lambda f: (-_rank(f.severity), -f.fooled_rows, f.family, f.probe))
    verdict = "fail" if any(severity_at_least(f.severity) for f in findings) else "pass"
    report = AuditReport(
        verdict=verdict, reward=scorer.name, dataset=dataset, reference_field=reference_field,
        reward_kind=scorer.kind, rows=len(rows),
        answer_format=ctx.answer_format.name if scorer.kind == "text" else "ground_truth_calls",
        findings=findings, probes=runs, baselines=baselines, inspection=inspection,
        seconds=round(time.time() - t0, 3), scored_samples=len(ctx.scored),
        meta={"reward_calls": scorer.calls, "probes_registered": len(probes),
              "format_detected": ctx.format_detected},
    )
    return report, ctx


def _rank(sev: str) -> int:
    from schemas.audit import SEVERITY_RANK

    return SEVERITY_RANK[sev]
