"""`rlvr eval`: held-out evaluation of a model or checkpoint, and `rlvr eval compare A B`."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from studio.commands.errors import fail

console = Console()
eval_app = typer.Typer(help="Held-out evaluation (pass@1, pass@k, per category and failure reason) and A/B compare.",
                       invoke_without_command=True, no_args_is_help=False)



def print_report(report) -> None:
    o = report.overall
    ks = ", ".join(f"pass@{k} {v:.3f}" for k, v in o.pass_at_k.items())
    console.print(f"[bold]{report.model}[/bold] on {report.dataset} ({', '.join(report.splits)}): "
                  f"{o.tasks} tasks x {report.n_samples} samples; {ks}; mean reward "
                  f"{'n/a' if o.mean_reward is None else f'{o.mean_reward:.3f}'}; reward errors {o.errors}",
                  highlight=False)
    table = Table(title="by category")
    for col in ("category", "tasks", "pass@1", f"pass@{report.k}", "mean reward", "top failure"):
        table.add_column(col)
    for name, g in report.by_category.items():
        top = next(iter(g.failure_reasons.items()), None)
        table.add_row(name, str(g.tasks), f"{g.pass_at_1:.3f}", f"{g.pass_at_k.get(str(report.k), float('nan')):.3f}",
                      "n/a" if g.mean_reward is None else f"{g.mean_reward:.3f}", f"{top[0]} ({top[1]})" if top else "")
    console.print(table)
    if len(report.by_split) > 1:
        console.print("by split: " + "; ".join(f"{s}: pass@1 {g.pass_at_1:.3f} ({g.tasks} tasks)"
                                               for s, g in report.by_split.items()), highlight=False)
    if o.failure_reasons:
        console.print("failure reasons: " + ", ".join(f"{r} {n}" for r, n in o.failure_reasons.items()),
                      highlight=False)


def run_evaluation(model: str, dataset: Path, splits: list[str], k: int, samples: int | None, temperature: float | None,
                   max_new_tokens: int, reward: str | None, json_out: Path | None, seed: int, limit: int | None,
                   register: bool, max_turns: int = 6):
    """The library calls behind `rlvr eval` (also used by the demo stage)."""
    from generators.task_io import DatasetError, read_tasks
    from training.evaluation import (
        CompletionRunner, EvaluationError, evaluate, load_eval_model, load_report, save_report, select_split,
    )
    from training.registry import Registry, file_digest

    try:
        tasks = select_split(read_tasks(dataset), splits)
    except (DatasetError, EvaluationError) as exc:
        fail(console, str(exc))
    if limit:
        tasks = tasks[:limit]
    n = samples or k
    if n < k:
        fail(console, f"--samples {n} is below -k {k}: pass@k needs at least k samples per task")
    temp = temperature if temperature is not None else (0.0 if n == 1 else 0.8)
    if n > 1 and temp == 0:
        fail(console, "several samples per task need --temperature > 0 (greedy decoding repeats the same completion)")
    reg = Registry() if register else None
    with console.status(f"loading {model}"):
        m, tok, label = load_eval_model(model, reg)
    env_tasks = [t for t in tasks if t.tools]
    if env_tasks and reward is None:
        from training.eval_environment import EnvironmentRunner

        from training.eval_environment import default_world_resolver

        runner = EnvironmentRunner(m, tok, temperature=temp, max_new_tokens=max_new_tokens, max_turns=max_turns,
                                   world_resolver=default_world_resolver(data_path=dataset))
        mode, reward_label = "environment", "workplace verifier"
    else:
        if reward is None:
            fail(console,
                 "this dataset has no tool tasks: pass --reward file.py:function (or module:function) to score it")
        from training.scoring import RewardLoadError, load_reward

        try:
            loaded = load_reward(reward)
        except RewardLoadError as exc:
            fail(console, str(exc))
        runner = CompletionRunner(m, tok, loaded, temperature=temp, max_new_tokens=max_new_tokens)
        mode, reward_label = "single_turn", loaded.version
    with Progress(TextColumn("evaluating"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console) as bar:
        job = bar.add_task("eval", total=len(tasks))
        report = evaluate(tasks, runner, n_samples=n, k=k, model=model, dataset=str(dataset), seed=seed,
                          progress=lambda i, total: bar.update(job, completed=i), mode=mode, reward=reward_label,
                          temperature=temp, max_new_tokens=max_new_tokens, dataset_hash=file_digest(dataset))
    if json_out is not None:
        save_report(report, json_out)
        report = load_report(json_out)
        if reg is not None:
            checkpoint = None
            try:
                checkpoint = reg.resolve(model)
            except Exception:  # noqa: BLE001 - a model that is not a registered checkpoint
                checkpoint = None
            reg.record_evaluation(json_out, checkpoint=checkpoint)
    return report


@eval_app.callback()
def eval_main(
    ctx: typer.Context,
    model: str = typer.Option(None, "--model", "-m", help="Checkpoint name/alias, model folder, or 'default'."),
    dataset: Path = typer.Option(None, "--dataset", "-d", help="Task dataset (.parquet, folder, .jsonl)."),
    split: list[str] = typer.Option(["test"], "--split", help="Split(s) to evaluate; 'all' for every row."),
    k: int = typer.Option(1, "-k", min=1, help="Report pass@k (needs at least k samples per task)."),
    samples: int = typer.Option(None, "--samples", "-n", min=1, help="Samples per task (default k)."),
    temperature: float = typer.Option(None, min=0.0, help="Default 0 (greedy) for 1 sample, 0.8 for more."),
    max_new_tokens: int = typer.Option(128, min=1),
    reward: str = typer.Option(None, help="file.py:function or module:function for single-turn tasks."),
    json_out: Path = typer.Option(None, "--json", help="Write the report here (plots beside it)."),
    seed: int = typer.Option(0),
    limit: int = typer.Option(None, min=1, help="Evaluate only the first N tasks."),
    max_turns: int = typer.Option(6, min=1, help="Turn limit of tool episodes."),
    register: bool = typer.Option(True, help="Record the evaluation in the registry."),
) -> None:
    """Evaluate a model on held-out tasks: pass@1, unbiased pass@k, mean reward, per category and failure reason."""
    if ctx.invoked_subcommand is not None:
        return
    if model is None or dataset is None:
        fail(console, "rlvr eval needs --model and --dataset (or a subcommand: rlvr eval compare A B)")
    report = run_evaluation(model, dataset, split, k, samples, temperature, max_new_tokens, reward, json_out, seed,
                            limit, register, max_turns)
    print_report(report)
    if json_out is not None:
        console.print(f"report: {json_out}" + (f"; plots: {', '.join(report.plots)}" if report.plots else ""),
                      highlight=False)


def _report_for(ref: str):
    """A report path, or a registered checkpoint/alias whose latest evaluation is used."""
    from training.evaluation import EvaluationError, load_report
    from training.registry import Registry, RegistryError

    p = Path(ref)
    if p.is_file():
        return load_report(p), str(p)
    try:
        reg = Registry()
        evals = reg.evaluations(ref)
    except RegistryError as exc:
        raise EvaluationError(f"{ref}: neither a report file nor a registered checkpoint ({exc})") from exc
    if not evals:
        raise EvaluationError(f"checkpoint {ref!r} has no recorded evaluation; run rlvr eval --model {ref} --json ...")
    return load_report(evals[-1].report_path), f"{ref} ({evals[-1].report_path})"


@eval_app.command("compare")
def compare(
    a: str = typer.Argument(..., help="Report JSON (or a registered checkpoint) for A, the baseline."),
    b: str = typer.Argument(..., help="Report JSON (or a registered checkpoint) for B, the candidate."),
    metric: str = typer.Option("pass_at_1", help="pass_at_1 or mean_score (per task)."),
    resamples: int = typer.Option(10_000, min=100),
    confidence: float = typer.Option(0.95, min=0.5, max=0.999),
    seed: int = typer.Option(0),
    json_out: Path = typer.Option(None, "--json", help="Write the comparison here."),
    show_flips: int = typer.Option(20, help="How many flipped tasks to list."),
) -> None:
    """B vs A on the same tasks: paired bootstrap confidence interval of the difference and the per-task flips."""
    from generators.task_io import atomic_write_bytes
    from training.evaluation import EvaluationError, compare_reports

    try:
        ra, la = _report_for(a)
        rb, lb = _report_for(b)
        cmp = compare_reports(ra, rb, metric=metric, n_resamples=resamples, confidence=confidence, seed=seed,
                              a_name=la, b_name=lb)
    except EvaluationError as exc:
        fail(console, str(exc))
    verdict = ("[green]B is better[/green]" if cmp.ci_low > 0 else "[red]B is worse[/red]" if cmp.ci_high < 0
               else "[yellow]no significant difference[/yellow]")
    console.print(f"{metric} over {cmp.n_tasks} shared tasks: A {cmp.mean_a:.3f}, B {cmp.mean_b:.3f}, "
                  f"B-A {cmp.delta:+.3f} [{int(confidence * 100)}% CI {cmp.ci_low:+.3f} .. {cmp.ci_high:+.3f}], "
                  f"P(B<=A) {cmp.p_not_better:.3f}: {verdict}")
    if cmp.only_in_a or cmp.only_in_b:
        console.print(f"[yellow]tasks only in A: {cmp.only_in_a}, only in B: {cmp.only_in_b} (not compared)[/yellow]")
    fixed = [f for f in cmp.flips if f.kind == "fixed"]
    broken = [f for f in cmp.flips if f.kind == "broken"]
    console.print(f"flips: {len(fixed)} fixed, {len(broken)} broken")
    if cmp.flips and show_flips:
        table = Table()
        for col in ("task", "category", "A", "B", "flip"):
            table.add_column(col)
        for f in (broken + fixed)[:show_flips]:
            table.add_row(f.task_id, f.category, f"{f.a:.2f}", f"{f.b:.2f}",
                          "[red]broken[/red]" if f.kind == "broken" else "[green]fixed[/green]")
        console.print(table)
    if json_out is not None:
        atomic_write_bytes(json_out, cmp.model_dump_json(indent=1).encode())
        console.print(f"comparison: {json_out}")


def register(app: typer.Typer) -> None:
    app.add_typer(eval_app, name="eval")
