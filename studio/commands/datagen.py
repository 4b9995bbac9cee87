"""`rlvr validate`, `rlvr preview`, `rlvr generate`, `rlvr report`: the dataset engine's command line.

Thin: every command calls `generators`; this module only parses options, draws progress and tables, and maps
errors to exit codes (2 = the spec or output is invalid, 1 = a declared relation fails on the output).
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from studio.commands.errors import fail

console = Console()


def _llm_provider():
    """The embedded model (or any `model:` a column names), loaded once on first use by an LLM column."""
    from generators.llm import LLMRunner
    from training.model import load_model

    return lambda: LLMRunner(load_model)



def validate(spec: Path = typer.Argument(..., help="Dataset spec (YAML or JSON).")) -> None:
    """Check a dataset spec: every problem is listed with its path and what was expected."""
    from generators.graph import table_order
    from generators.spec_io import SpecError, load_spec

    try:
        s = load_spec(spec)
    except SpecError as exc:
        fail(console, exc)
    tables = ", ".join(f"{t} ({len(s.tables[t].columns)} columns)" for t in table_order(s))
    console.print(f"[green]valid[/green]: {s.name}: {tables}", highlight=False)


def _frame_table(title: str, frame, limit: int = 20) -> Table:
    t = Table(title=title, show_lines=False)
    for c in frame.columns:
        t.add_column(c, overflow="fold", max_width=36)
    for row in frame.head(limit).iter_rows():
        t.add_row(*["" if v is None else str(v) for v in row])
    return t


def preview(
    spec: Path = typer.Argument(..., help="Dataset spec (YAML or JSON)."),
    n: int = typer.Option(10, "-n", min=1, help="Rows of each table without a fixed row count."),
    seed: int | None = typer.Option(None, help="Override the spec's seed."),
    json_out: Path | None = typer.Option(None, "--json", help="Also write the profile report as JSON here."),
) -> None:
    """Generate a few rows in memory and show them with a per-column profile and the relation checks."""
    from generators.report import build_report, summary_lines
    from generators.spec_io import SpecError, load_spec
    from generators.writer import generate_frames

    try:
        s = load_spec(spec)
        if seed is not None:
            s = s.model_copy(update={"seed": seed})
        with console.status("generating preview"):
            frames = generate_frames(s, n, llm=_llm_provider())
    except SpecError as exc:
        fail(console, exc)
    except Exception as exc:  # noqa: BLE001 - GenerationError, UserCodeError: shown as they are
        fail(console, exc, 1)
    for t in s.tables:
        console.print(_frame_table(f"{t} ({frames[t].height} rows)", frames[t]))
        q = frames.get(f"_quarantine/{t}")
        if q is not None and q.height:
            console.print(_frame_table(f"{t}: quarantined", q))
    rep = build_report(s, {t: frames[t] for t in s.tables})
    prof = Table(title="profile")
    for h in ("column", "dtype", "nulls", "unique", "summary"):
        prof.add_column(h)
    for t, e in rep["tables"].items():
        for c, p in e["columns"].items():
            summ = ", ".join(f"{k}={v}" for k, v in p.items() if k in ("min", "max", "mean", "true_rate"))
            if "top" in p:
                summ = (summ + " " if summ else "") + ", ".join(f"{k}:{v:.0%}" for k, v in list(p["top"].items())[:4])
            prof.add_row(f"{t}.{c}", p["dtype"], str(p["nulls"]), str(p.get("unique", "")), summ)
    console.print(prof)
    console.print("\n".join(summary_lines(rep)), highlight=False, markup=False)
    if json_out:
        json_out.write_text(json.dumps(rep, indent=2, default=str))


def generate(
    spec: Path = typer.Argument(..., help="Dataset spec (YAML or JSON)."),
    n: int = typer.Option(..., "-n", min=1, help="Rows of each table without a fixed row count."),
    out: Path = typer.Option(..., "-o", "--out", help="Output folder (Parquet parts, manifest, report)."),
    seed: int | None = typer.Option(None, help="Override the spec's seed."),
    resume: bool = typer.Option(False, help="Continue an interrupted run in OUT (same spec, seed and -n)."),
    overwrite: bool = typer.Option(False, help="Replace a dataset already in OUT."),
) -> None:
    """Write the dataset as Parquet parts plus manifest.json and report.json; exit 1 if a relation fails."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from generators.report import report_for_dir, summary_lines
    from generators.spec_io import SpecError
    from generators.task_io import atomic_write_bytes
    from generators.writer import OutputExists, Progress as Hooks, generate_dataset

    bars = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console)
    tasks: dict[str, int] = {}

    def on_table(name: str, total: int) -> None:
        tasks[name] = bars.add_task(name, total=total)

    def on_rows(name: str, rows: int) -> None:
        bars.advance(tasks[name], rows)

    try:
        with bars:
            manifest = generate_dataset(spec, n, out, seed=seed, resume=resume, overwrite=overwrite,
                                        llm=_llm_provider(), progress=Hooks(on_table, on_rows))
    except (SpecError, OutputExists) as exc:
        fail(console, exc)
    except Exception as exc:  # noqa: BLE001 - GenerationError, UserCodeError
        fail(console, exc, 1)
    rep = report_for_dir(out)
    atomic_write_bytes(out / "report.json", json.dumps(rep, indent=2, default=str).encode())
    console.print("\n".join(summary_lines(rep)), highlight=False, markup=False)
    console.print(f"wrote {out} in {manifest.get('seconds', 0):.2f} s (manifest.json, report.json)", highlight=False)
    if not rep["ok"]:
        raise typer.Exit(1)


def report(out: Path = typer.Argument(..., help="A folder written by rlvr generate.")) -> None:
    """Re-check a generated dataset: profile, relations, validators, quarantine; exit 1 if a relation fails."""
    from generators.report import report_for_dir, summary_lines
    from generators.task_io import atomic_write_bytes

    try:
        rep = report_for_dir(out)
    except FileNotFoundError as exc:
        fail(console, exc)
    atomic_write_bytes(out / "report.json", json.dumps(rep, indent=2, default=str).encode())
    console.print("\n".join(summary_lines(rep)), highlight=False, markup=False)
    if not rep["ok"]:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command()(validate)
    app.command()(preview)
    app.command()(generate)
    app.command()(report)
