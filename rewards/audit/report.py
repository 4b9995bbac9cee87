"""The readable audit report (Markdown; the CLI prints it and writes it next to the JSON) and atomic JSON output."""

from __future__ import annotations

import json
from pathlib import Path

from rewards.atomic_write import atomic_write_text  # noqa: F401 - also used by the CLI and the demo
from schemas.audit import AuditReport


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def _num(x: float | None, nd: int = 3) -> str:
    return "-" if x is None else f"{x:.{nd}g}"


def render_markdown(report: AuditReport) -> str:
    lines = [f"# Reward audit: {report.reward}", ""]
    blocking = report.blocking
    lines.append(f"**Verdict: {report.verdict.upper()}** — {len(report.findings)} finding(s), {len(blocking)} at "
                 f"severity high or above; {report.rows} rows, {report.scored_samples} inputs scored in "
                 f"{report.seconds:.1f} s. Answer format: `{report.answer_format}`.")
    if report.baselines and report.baselines.policies:
        trivial = ", ".join(f"{k} {_pct(p.pass_rate)}" for k, p in report.baselines.policies.items())
        lines[-1] += f" Trivial policies pass: {trivial}."
    lines.append("")
    if report.baselines:
        b = report.baselines
        lines += ["## Baselines (pass rate of policies that solve nothing)", "",
                  f"- reference answer: {_pct(b.reference_pass_rate)} (should be 100%)"]
        for name, p in b.policies.items():
            lines.append(f"- {name}: **{_pct(p.pass_rate)}** pass, mean score {_num(p.mean_score)} — {p.description}")
        lines.append("")
    lines += ["## Findings", ""]
    if not report.findings:
        lines.append("No probe fooled the reward.")
    for f in report.findings:
        lines.append(f"### [{f.severity}] {f.family}/{f.probe}: {f.fooled_rows}/{f.tested_rows} rows")
        lines.append(f"{f.message}")
        for e in f.examples:
            text = e.input.replace("\n", "\\n")
            lines.append(f"- row {e.row}{f' ({e.row_id})' if e.row_id else ''}: score {_num(e.score)}"
                         f"{', passed' if e.passed else ''}{f' — {e.note}' if e.note else ''}: `{text[:240]}`")
        lines.append("")
    if report.inspection and report.inspection.samples:
        s = report.inspection
        lines += ["## Inspection", "",
                  f"{s.samples} sampled completions ({s.model or 'given'}): pass rate {_pct(s.pass_rate)}, mean "
                  f"score {_num(s.mean_score)}, {s.errors} error(s), Spearman(score, length) "
                  f"{_num(s.length_score_spearman, 2)}.",
                  f"Table to label: {s.table_csv or s.table or '-'} (fill the `label` column with pass/fail, then "
                  "rerun with `--labels`)."]
        if s.labelled:
            lines.append(f"Agreement with {s.labelled} human labels: accuracy {_pct(s.accuracy)}, Cohen's kappa "
                         f"{_num(s.kappa, 3)}; confusion {s.confusion}.")
            for d in s.disagreements[:20]:
                lines.append(f"- sample {d.sample} (row {d.row}): reward {'pass' if d.reward_passed else 'fail'} "
                             f"(score {_num(d.score)}), person {'pass' if d.human_label else 'fail'}: "
                             f"`{d.completion[:160].replace(chr(10), ' ')}`")
        lines.append("")
    counts = {"clean": 0, "finding": 0, "skipped": 0}
    for p in report.probes:
        counts[p.status] += 1
    lines += [f"## Coverage: {len(report.probes)} probes — {counts['clean']} clean, {counts['finding']} with findings, "
              f"{counts['skipped']} skipped", ""]
    for p in report.probes:
        if p.status == "skipped":
            lines.append(f"- skipped {p.family}/{p.probe}: {p.note}")
    return "\n".join(lines) + "\n"


def write_json(report: AuditReport, path: str | Path) -> Path:
    return atomic_write_text(path, json.dumps(report.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n")
