"""Demo stage: audit the reward the demo will train with, before any training; stop the demo if it is gameable.

Reads `ctx.state["reward"]` (a `file.py:function` spec, a callable or a Reward) and `ctx.state["dataset"]` (a
dataset path) when earlier stages set them, else the arithmetic example's shaped reward and tasks. Writes the
report (JSON + Markdown) and the inspection table into `ctx.out/audit/`, puts the AuditReport in
`ctx.state["audit_report"]` and its JSON path in `ctx.state["audit_report_path"]` (a training config's
`reward.audit_report`), and records the audit in the studio's catalog. `ctx.state["audit_samples"]` overrides how many completions are sampled for inspection.
"""

from __future__ import annotations

from pathlib import Path

ORDER = 30
TITLE = "reward audit"

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_REWARD = str(ROOT / "examples" / "arithmetic" / "reward.py") + ":tagged_answer_shaped"
DEFAULT_DATASET = ROOT / "examples" / "arithmetic" / "tasks.jsonl"


def run(ctx) -> dict:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from rewards.audit.report import atomic_write_text, render_markdown, write_json
    from studio.commands.audit import AuditUsageError, run_audit_job
    from studio.demo import StageFailed

    reward = ctx.state.get("reward") or DEFAULT_REWARD
    dataset = Path(ctx.state.get("dataset") or DEFAULT_DATASET)
    out = ctx.out / "audit"
    samples, tokens, limit = (8, 48, 120) if ctx.quick else (50, 128, None)
    samples = int(ctx.state.get("audit_samples", samples))
    try:
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=ctx.console, transient=True) as progress:
            report, _ = run_audit_job(reward, dataset, reference_field=ctx.state.get("reference_field", "answer"),
                                      samples=samples, loaded_model=ctx.state.get("model"),
                                      table=out / "inspection.parquet", progress=progress, max_new_tokens=tokens,
                                      limit=limit)
    except AuditUsageError as exc:
        raise StageFailed(f"the reward could not be audited: {exc}") from exc
    json_path = write_json(report, out / "audit_report.json")
    md_path = atomic_write_text(out / "audit_report.md", render_markdown(report))
    ctx.state["audit_report"] = report
    ctx.state["audit_report_path"] = str(json_path)
    recorded = _record(ctx, report, dataset, json_path)
    b = report.baselines
    worst = b.worst if b else None
    ctx.console.print(f"audit verdict [bold]{report.verdict}[/bold]: {len(report.findings)} finding(s), "
                      f"{len(report.blocking)} blocking; {report.rows} rows in {report.seconds:.1f} s")
    if report.verdict == "fail":
        lines = [f"[{f.severity}] {f.family}/{f.probe}: fooled on {f.fooled_rows}/{f.tested_rows} rows"
                 + (f", e.g. {f.examples[0].input[:100]!r} scored {f.examples[0].score}" if f.examples else "")
                 for f in report.blocking]
        raise StageFailed(f"the reward {report.reward} failed its audit (report: {json_path}):\n" + "\n".join(lines))
    return {
        "verdict": report.verdict,
        "findings": f"{len(report.findings)} ({len(report.blocking)} blocking)",
        "probes": len(report.probes),
        "worst trivial-policy pass rate": f"{worst[0]} {worst[1]:.1%}" if worst else "-",
        "inspection": (f"{report.inspection.samples} samples -> {report.inspection.table_csv}"
                       if report.inspection and report.inspection.samples else "-"),
        "report": str(md_path),
        "catalog": recorded,
    }


def _record(ctx, report, dataset: Path, json_path: Path) -> str:
    """Record the audit in the studio's catalog (the same registry the evaluation stage uses)."""
    import hashlib
    import os

    from training.registry import Registry

    try:
        reg = Registry(ctx.state.get("registry_path") or os.environ.get("RLVR_REGISTRY") or None)
        digest = hashlib.sha256(dataset.read_bytes()).hexdigest() if dataset.is_file() else None
        rec = reg.record_audit(report.reward, report.verdict == "pass", dataset_hash=digest,
                               report_path=str(json_path),
                               summary={"findings": len(report.findings), "blocking": len(report.blocking),
                                        "rows": report.rows})
        return f"audit #{rec.id}"
    except Exception as exc:  # noqa: BLE001 - the catalog is a convenience; the report on disk is the record
        return f"not recorded ({exc})"
