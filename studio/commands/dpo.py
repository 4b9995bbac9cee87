"""`rlvr dpo CONFIG`: preference training (TRL's DPOTrainer) on pairs from verified outcomes."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from studio.commands.errors import print_error

console = Console()


def load_dpo_config(path: Path):
    import yaml
    from pydantic import ValidationError

    from schemas.dpo_config import DPOConfig

    if not path.is_file():
        raise ValueError(f"{path}: no such config file")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML ({exc})") from exc
    try:
        return DPOConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ValueError(f"{path}: field {'.'.join(str(x) for x in first['loc'])}: {first['msg']}") from exc


def dpo(
    config: Path = typer.Argument(..., help="DPO config (YAML): model, pairs (path + source), beta, lr, max_steps."),
    register_checkpoint: bool = typer.Option(True, "--register/--no-register", help="Record the result in the registry."),
) -> None:
    """Train on (chosen, rejected) pairs -- e.g. passing vs failing completions of the same prompt -- with DPO."""
    from training.dpo import DPOError, run_dpo
    from training.registry import Registry

    try:
        cfg = load_dpo_config(config)
    except ValueError as exc:
        print_error(console, exc)
        raise typer.Exit(2) from exc
    reg = Registry() if register_checkpoint and cfg.register_checkpoint else None
    try:
        with Progress(TextColumn("DPO"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console) as bar:
            job = bar.add_task("dpo", total=cfg.max_steps)
            res = run_dpo(cfg, base=config.resolve().parent, registry=reg,
                          progress=lambda step, total: bar.update(job, completed=step))
    except DPOError as exc:
        print_error(console, exc)
        raise typer.Exit(2) from exc
    m = res["metrics"]
    console.print(f"{res['pairs']} pairs, {res['steps']} steps in {res['seconds']} s; final loss "
                  f"{m.get('loss', float('nan')):.4f}, reward margin {m.get('rewards/margins', float('nan')):.4f}, "
                  f"accuracy {m.get('rewards/accuracies', float('nan')):.2f}", highlight=False)
    console.print(f"checkpoint: {res['checkpoint']}" + (f" (registered as {res['registered']})" if res["registered"]
                                                       else ""), highlight=False)


def register(app: typer.Typer) -> None:
    app.command()(dpo)
