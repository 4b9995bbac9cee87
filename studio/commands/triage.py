"""`rlvr triage FAILURES.jsonl`: production failures -> buckets, regression tasks, recommended interventions."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from studio.commands.errors import print_error

console = Console()


def triage(
    failures: Path = typer.Argument(..., help="JSONL of failed traces: trajectories, OpenAI chat messages with tool "
                                             "calls, or NeMo Gym rollouts."),
    tasks: Path = typer.Option(None, "--tasks", help="The task dataset the traces came from (enables re-verification "
                                                    "and ground-truth demonstrations)."),
    out: Path = typer.Option(None, "--out", help="Where to write the regression tasks (default: beside FAILURES)."),
    into: Path = typer.Option(None, "--into", help="Merge the regression tasks into this dataset instead."),
    json_out: Path = typer.Option(None, "--json", help="Write the triage report here."),
    verify: bool = typer.Option(True, help="Re-verify traces whose task has ground truth (workplace verifier)."),
    world_seed: int = typer.Option(None, help="Seed of the workplace world the tasks were generated over."),
) -> None:
    """Re-verify, bucket by failure mode, write regression tasks (split `regression`), recommend the lightest fix."""
    from generators.task_io import DatasetError, atomic_write_bytes, read_tasks
    from training.triage import TriageError, triage as run_triage, workplace_verifier

    task_rows = None
    verifier = None
    try:
        if tasks is not None:
            task_rows = read_tasks(tasks)
            if verify and any(t.tools and t.ground_truth_calls is not None for t in task_rows):
                from training.eval_environment import default_world_resolver

                verifier = workplace_verifier(default_world_resolver(world_seed, data_path=tasks))
        with console.status("triaging"):
            rep = run_triage(failures, tasks=task_rows, verifier=verifier, out=out, into=into)
    except (TriageError, DatasetError) as exc:
        print_error(console, exc)
        raise typer.Exit(2) from exc
    console.print(f"{rep.traces} traces ({', '.join(f'{k} {v}' for k, v in rep.formats.items())}); re-verified "
                  f"{rep.reverified}, unverifiable {rep.unverifiable}", highlight=False)
    if rep.passed_on_reverification:
        console.print(f"[yellow]{len(rep.passed_on_reverification)} trace(s) pass on re-verification (lines "
                      f"{rep.passed_on_reverification[:10]}): not failures of the model[/yellow]", highlight=False)
    table = Table(title="failure buckets (largest first)")
    for col in ("bucket", "by", "traces", "example", "recommended", "why"):
        table.add_column(col, overflow="fold")
    for b in rep.buckets:
        r = b.recommendation
        table.add_row(b.name, b.key_kind, str(b.count), (b.examples[0] if b.examples else "")[:90],
                      r.intervention if r else "", (r.why if r else "")[:160])
    console.print(table)
    if rep.regression_path:
        console.print(f"{rep.regression_tasks} regression tasks (split regression) -> {rep.regression_path}; "
                      f"evaluate them with: rlvr eval --dataset {rep.regression_path} --split regression ...",
                      highlight=False)
    if json_out is not None:
        atomic_write_bytes(json_out, rep.model_dump_json(indent=1).encode())
        console.print(f"report: {json_out}")


def register(app: typer.Typer) -> None:
    app.command()(triage)
