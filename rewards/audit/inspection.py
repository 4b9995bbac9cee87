"""The 50-100-sample inspection: score sampled completions, write a table a person labels, read the labels back
and measure how well the reward agrees with the person (accuracy, Cohen's kappa, every disagreement).

Sampling itself needs a model and lives above `rewards/` (see `studio/audit_sampling.py`); this module receives
the completions, so the reward package stays free of training imports.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Sequence

import polars as pl

from rewards.audit.context import AuditContext, Case, prompt_text
from schemas.audit import Disagreement, InspectionSummary
from schemas.rewards import RewardResult

LABEL_TRUE = {"pass", "passed", "1", "true", "yes", "y", "correct", "p", "ok"}
LABEL_FALSE = {"fail", "failed", "0", "false", "no", "n", "wrong", "f", "incorrect"}
COLUMNS = ["sample", "row", "id", "prompt", "completion", "length", "score", "passed", "components", "reason", "error",
           "label"]


class LabelError(ValueError):
    """A labels file is unreadable or holds a label that is neither pass nor fail; the message names the row."""


# ---- pure statistics -----------------------------------------------------------------------------------------
def cohens_kappa(a: Sequence[bool], b: Sequence[bool]) -> float | None:
    """Cohen's kappa of two binary raters. None when undefined (no items, or both raters constant and equal
    chance agreement of 1 with perfect agreement is reported as 1.0)."""
    n = len(a)
    if n == 0 or n != len(b):
        return None
    po = sum(x == y for x, y in zip(a, b)) / n
    pa, pb = sum(a) / n, sum(b) / n
    pe = pa * pb + (1 - pa) * (1 - pb)
    if pe >= 1.0:
        return 1.0 if po == 1.0 else None
    return (po - pe) / (1 - pe)


def _ranks(x: Sequence[float]) -> list[float]:
    order = sorted(range(len(x)), key=lambda i: x[i])
    ranks = [0.0] * len(x)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and x[order[j + 1]] == x[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rank correlation (average ranks for ties); None when either side is constant."""
    if len(x) != len(y) or len(x) < 2:
        return None
    rx, ry = _ranks(list(x)), _ranks(list(y))
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def parse_label(value: Any, where: str) -> bool | None:
    """pass/fail (or 1/0, true/false, yes/no) as a bool; empty is None (not labelled yet)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if not text:
        return None
    if text in LABEL_TRUE:
        return True
    if text in LABEL_FALSE:
        return False
    raise LabelError(f"{where}: label {value!r} is neither pass nor fail (use pass/fail, 1/0, true/false)")


# ---- scoring and the table -----------------------------------------------------------------------------------
def score_samples(ctx: AuditContext, samples: Sequence[tuple[int, str]]) -> list[tuple[int, str, RewardResult]]:
    """Score sampled completions (row index, text) through the audit's reward seam; kept on the context."""
    results = ctx.score([Case(i, text, "sample") for i, text in samples], source="inspection/sample")
    scored = [(i, text, r) for (i, text), r in zip(samples, results)]
    ctx.samples = scored
    return scored


def verdict(ctx: AuditContext, row: int, r: RewardResult) -> bool | None:
    if r.error is not None or r.score is None:
        return None
    return ctx.is_pass(row, r)


def inspection_frame(ctx: AuditContext, scored: Sequence[tuple[int, str, RewardResult]],
                     labels: Sequence[bool | None] | None = None) -> pl.DataFrame:
    records = []
    for n, (i, text, r) in enumerate(scored):
        records.append({
            "sample": n, "row": i, "id": ctx.row_id(i), "prompt": prompt_text(ctx.rows[i]), "completion": text,
            "length": len(text), "score": r.score, "passed": verdict(ctx, i, r),
            "components": json.dumps(r.components, sort_keys=True), "reason": r.reason, "error": r.error,
            "label": None if labels is None or labels[n] is None else ("pass" if labels[n] else "fail"),
        })
    schema = {"sample": pl.Int64, "row": pl.Int64, "id": pl.Utf8, "prompt": pl.Utf8, "completion": pl.Utf8,
              "length": pl.Int64, "score": pl.Float64, "passed": pl.Boolean, "components": pl.Utf8,
              "reason": pl.Utf8, "error": pl.Utf8, "label": pl.Utf8}
    return pl.DataFrame(records, schema=schema)


def write_table(frame: pl.DataFrame, path: str | Path) -> tuple[Path, Path]:
    """Write the inspection table atomically as Parquet and CSV (a person labels the CSV's `label` column)."""
    path = Path(path)
    pq = path if path.suffix == ".parquet" else path.with_suffix(".parquet")
    csv = pq.with_suffix(".csv")
    pq.parent.mkdir(parents=True, exist_ok=True)
    for target, writer in ((pq, frame.write_parquet), (csv, frame.write_csv)):
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        os.close(fd)
        try:
            writer(tmp)
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return pq, csv


def read_table(path: str | Path) -> pl.DataFrame:
    """An inspection table (Parquet or CSV) with at least `row`, `completion` and `label` columns."""
    path = Path(path)
    if not path.exists():
        raise LabelError(f"{path}: no such labels file")
    try:
        frame = pl.read_parquet(path) if path.suffix == ".parquet" else pl.read_csv(
            path, infer_schema_length=0)  # all text: labels like "1" stay labels
    except Exception as exc:  # noqa: BLE001 - polars raises several types for a bad file
        raise LabelError(f"{path}: not a readable Parquet/CSV inspection table ({exc})") from exc
    missing = [c for c in ("row", "completion", "label") if c not in frame.columns]
    if missing:
        raise LabelError(f"{path}: missing column(s) {missing}; expected the table `rlvr audit` wrote")
    return frame


def samples_and_labels(path: str | Path, n_rows: int) -> tuple[list[tuple[int, str]], list[bool | None]]:
    frame = read_table(path)
    samples, labels = [], []
    for k, rec in enumerate(frame.iter_rows(named=True)):
        where = f"{path}: table row {k}"
        try:
            row = int(rec["row"])
        except (TypeError, ValueError) as exc:
            raise LabelError(f"{where}: field row {rec['row']!r} is not a row index") from exc
        if not 0 <= row < n_rows:
            raise LabelError(f"{where}: field row {row} is outside the dataset (0..{n_rows - 1})")
        samples.append((row, "" if rec["completion"] is None else str(rec["completion"])))
        labels.append(parse_label(rec["label"], where))
    return samples, labels


def summarize(ctx: AuditContext, scored: Sequence[tuple[int, str, RewardResult]], labels: Sequence[bool | None] | None,
              model: str | None = None) -> InspectionSummary:
    """Pass rate, errors, length correlation and, for labelled samples, agreement with the person."""
    verdicts = [verdict(ctx, i, r) for i, _, r in scored]
    ok = [(len(t), r.score) for (_, t, r) in scored if r.score is not None and r.error is None]
    out = InspectionSummary(
        samples=len(scored), model=model,
        pass_rate=(sum(bool(v) for v in verdicts) / len(verdicts)) if verdicts else None,
        mean_score=(sum(s for _, s in ok) / len(ok)) if ok else None,
        errors=sum(1 for _, _, r in scored if r.error is not None),
        length_score_spearman=spearman([a for a, _ in ok], [b for _, b in ok]) if len(ok) >= 3 else None,
    )
    if labels:
        pairs = [(n, bool(v), lab) for n, (v, lab) in enumerate(zip(verdicts, labels)) if lab is not None]
        out.labelled = len(pairs)
        if pairs:
            rew, hum = [p[1] for p in pairs], [p[2] for p in pairs]
            out.accuracy = sum(a == b for a, b in zip(rew, hum)) / len(pairs)
            out.kappa = cohens_kappa(rew, hum)
            out.confusion = {"tp": sum(a and b for a, b in zip(rew, hum)),
                             "tn": sum((not a) and (not b) for a, b in zip(rew, hum)),
                             "fp": sum(a and not b for a, b in zip(rew, hum)),
                             "fn": sum(b and not a for a, b in zip(rew, hum))}
            for n, rv, lab in pairs:
                if rv != lab:
                    i, text, r = scored[n]
                    out.disagreements.append(Disagreement(sample=n, row=i, row_id=ctx.row_id(i), completion=text[:2000],
                                                          score=r.score, reward_passed=verdicts[n],
                                                          human_label=lab))
    return out
