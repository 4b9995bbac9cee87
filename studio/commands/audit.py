"""`rlvr audit REWARD --dataset DATA [--reference-field answer] [--samples N] [--model default] [--json OUT]`.

Attack a reward the way a policy would, before training on it; sample N completions from a model for a person to
label; exit 0 when no finding reaches severity "high", 1 when one does, 2 on misuse (unreadable reward or
dataset, missing field). The contract above is relied on by other tools: keep it exactly. Added options:
`--labels TABLE` (a labelled inspection table: re-score its completions and report agreement instead of sampling),
`--table PATH` (where the inspection table goes), `--max-rows N` and `--families a,b` (for slow rewards such as an
LLM judge: audit a prefix of the rows, or only some probe families).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markdown import Markdown
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from studio.commands.errors import print_error

console = Console()


class AuditUsageError(ValueError):
    """Misuse of `rlvr audit` (exit 2); the message says what to fix."""


def load_rows(dataset: Path, reference_field: str, kind: str, limit: int | None = None) -> list[dict[str, Any]]:
    from generators.task_io import DatasetError, read_records

    try:
        rows = read_records(dataset)
    except (DatasetError, OSError) as exc:
        raise AuditUsageError(str(exc)) from exc
    rows = rows[:limit] if limit else rows
    if not rows:
        raise AuditUsageError(f"{dataset}: the dataset has no rows")
    for i, r in enumerate(rows):
        if "prompt" not in r or r["prompt"] in (None, "", []):
            raise AuditUsageError(f"{dataset}: row {i}: field 'prompt' is missing or empty (a prompt column is required)")
    if kind == "text" and not any(reference_field in r for r in rows):
        raise AuditUsageError(f"{dataset}: no column {reference_field!r} (the --reference-field); columns: "
                              f"{sorted(rows[0])}")
    return rows


def run_audit_job(
    reward: Any,
    dataset: Path,
    *,
    reference_field: str = "answer",
    samples: int = 50,
    model: str = "default",
    loaded_model: tuple[Any, Any] | None = None,
    labels: Path | None = None,
    table: Path | None = None,
    sandbox: Any = "auto",
    progress: Progress | None = None,
    max_new_tokens: int = 160,
    limit: int | None = None,
    families: list[str] | None = None,
):
    """Load the reward and the dataset, sample (or read labelled) completions, run the audit, write the table.

    Raises AuditUsageError for misuse; returns (report, ctx). Shared by the CLI and the demo stage.
    """
    from rewards.audit import AuditMisuse, run_audit, scorer_from_callable
    from rewards.audit.inspection import LabelError, inspection_frame, samples_and_labels, write_table
    from rewards.loading import RewardSpecError

    try:
        scorer = scorer_from_callable(reward, sandbox=sandbox)
    except RewardSpecError as exc:
        raise AuditUsageError(str(exc)) from exc
    rows = load_rows(dataset, reference_field, scorer.kind, limit)
    drawn: list[tuple[int, str]] | None = None
    human: list[bool | None] | None = None
    used_model = None
    if labels is not None:
        try:
            drawn, human = samples_and_labels(labels, len(rows))
        except LabelError as exc:
            raise AuditUsageError(str(exc)) from exc
        used_model = f"labelled table {labels}"
    elif samples > 0 and scorer.kind == "text":
        from studio.audit_sampling import sample_completions
        from training.model import ModelLoadError

        task = progress.add_task(f"sampling {samples} completions ({model})", total=samples) if progress else None
        try:
            drawn = sample_completions(
                rows, samples, model=model, loaded=loaded_model, max_new_tokens=max_new_tokens,
                progress=(lambda done, total: progress.update(task, completed=done)) if progress else None)
        except ModelLoadError as exc:
            raise AuditUsageError(str(exc)) from exc
        used_model = model
    ptask = progress.add_task("probing the reward", total=None) if progress else None

    def tick(step: str, done: int, total: int) -> None:
        if progress is not None:
            progress.update(ptask, description=f"audit: {step}", completed=done, total=total or None)

    try:
        report, ctx = run_audit(scorer, rows, reference_field=reference_field, samples=drawn, labels=human,
                                model=used_model, dataset=str(dataset), progress=tick,
                                families=families)
    except AuditMisuse as exc:
        raise AuditUsageError(str(exc)) from exc
    if ctx.samples and report.inspection is not None:
        frame = inspection_frame(ctx, ctx.samples, human)
        pq, csv = write_table(frame, table or Path("audit_inspection.parquet"))
        report.inspection.table, report.inspection.table_csv = str(pq), str(csv)
    elif samples > 0 and scorer.kind == "trajectory" and labels is None:
        from schemas.audit import InspectionSummary

        report.inspection = InspectionSummary(note="sampling is for completion rewards; roll out a tool policy with "
                                                   "`rlvr env rollout` and audit its trajectories")
    return report, ctx


def audit(
    reward: str = typer.Argument(..., help="file.py:function or module:function (as in `rlvr reward test`)."),
    dataset: Path = typer.Option(..., "--dataset", help="Parquet or JSONL with a `prompt` column and the reference."),
    reference_field: str = typer.Option("answer", "--reference-field", help="The column holding the reference."),
    samples: int = typer.Option(50, "--samples", min=0, help="Completions to sample for inspection (0 = none)."),
    model: str = typer.Option("default", "--model", help="'default' (embedded model), a folder or a .gguf file."),
    json_out: Path | None = typer.Option(None, "--json", help="Write the report as JSON here (and Markdown beside)."),
    labels: Path | None = typer.Option(None, "--labels", help="A labelled inspection table: report agreement."),
    table: Path | None = typer.Option(None, "--table", help="Where to write the inspection table (.parquet + .csv)."),
    max_rows: int | None = typer.Option(None, "--max-rows", min=1, help="Audit only the first N rows (slow rewards, "
                                        "e.g. LLM judges)."),
    families: str | None = typer.Option(None, "--families", help="Only these probe families, comma-separated "
                                        "(bypass,parser,length,judge,tools,composition,robustness); sanity always "
                                        "runs."),
) -> None:
    """Find reward gaming before training: >= 40 probes, trivial-policy baselines, a sample to inspect."""
    from rewards.audit.report import render_markdown, write_json, atomic_write_text

    from rewards.audit import all_probes

    fams = [f.strip() for f in families.split(",") if f.strip()] if families else None
    known = {p.family for p in all_probes()}
    if fams and set(fams) - known:
        print_error(console, f"unknown probe families {sorted(set(fams) - known)}; known: {sorted(known)}")
        raise typer.Exit(2)
    if table is None and json_out is not None:
        table = json_out.with_name(json_out.stem + ".inspection.parquet")
    try:
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console, transient=True) as progress:
            report, _ = run_audit_job(reward, dataset, reference_field=reference_field, samples=samples, model=model,
                                      labels=labels, table=table, progress=progress,
                                      limit=max_rows, families=fams)
    except AuditUsageError as exc:
        print_error(console, exc)
        raise typer.Exit(2) from exc
    text = render_markdown(report)
    console.print(Markdown(text))
    if json_out is not None:
        write_json(report, json_out)
        md = atomic_write_text(json_out.with_suffix(".md"), text)
        console.print(f"report: {json_out} and {md}")
    raise typer.Exit(1 if report.verdict == "fail" else 0)


def register(app: typer.Typer) -> None:
    app.command()(audit)
