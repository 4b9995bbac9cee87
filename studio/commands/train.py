"""`rlvr sft CONFIG` and `rlvr train CONFIG`: SFT warm start and GRPO-family training from one YAML TrainConfig."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from studio.commands.errors import fail, print_error

console = Console()


def _overrides(sets: list[str] | None) -> dict[str, Any]:
    import yaml

    out: dict[str, Any] = {}
    for item in sets or []:
        if "=" not in item:
            raise typer.BadParameter(f"--set expects KEY=VALUE (dotted key), got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = yaml.safe_load(v)
    return out


def _load(config: Path, sets: list[str] | None):
    from training.config_io import ConfigError, load_train_config

    try:
        return load_train_config(config, overrides=_overrides(sets))
    except ConfigError as exc:
        print_error(console, exc, label="config error")
        raise typer.Exit(2) from exc


def _progress() -> Progress:
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TimeRemainingColumn(), TextColumn("{task.fields[info]}"), console=console)


def _sft(cfg) -> Path:
    from training.model import ModelLoadError
    from training.sft import run_sft

    with _progress() as prog:
        task = prog.add_task("SFT", total=None, info="")

        def on_log(rec: dict) -> None:
            prog.update(task, total=rec.get("max_steps") or None, completed=rec["step"],
                        info=f"loss {rec['loss']:.3f}" if "loss" in rec else "")

        try:
            out = run_sft(cfg, on_log=on_log)
        except ModelLoadError as exc:  # e.g. model.device: cuda on a machine without a GPU
            fail(console, exc, 1, label="model")
    console.print(f"SFT model: [bold]{out}[/bold]")
    return out


def sft(
    config: Path = typer.Argument(..., help="YAML TrainConfig with an `sft:` section."),
    set_: list[str] = typer.Option(None, "--set", help="Override a field, e.g. --set sft.max_steps=20"),
) -> None:
    """Supervised warm start on demonstrations (TRL SFTTrainer; LoRA or full), saved to OUTPUT/sft/final."""
    cfg = _load(config, set_)
    if cfg.sft is None:
        print_error(console, "no `sft:` section (set sft.data_path to a demonstrations file)", label="config error")
        raise typer.Exit(2)
    _sft(cfg)


def train(
    config: Path = typer.Argument(..., help="YAML TrainConfig (see examples/configs/)."),
    set_: list[str] = typer.Option(None, "--set", help="Override a field, e.g. --set steps=50"),
    skip_sft: bool = typer.Option(False, help="Start GRPO from model.name even when the config has an sft section."),
    register_run: bool = typer.Option(True, "--register/--no-register",
                                      help="Record the run and its final checkpoint in the registry (rollback, lineage)."),
) -> None:
    """GRPO / DAPO / Dr. GRPO / GSPO training; resumes from the last complete checkpoint in OUTPUT/checkpoints."""
    from training.grpo import GRPOTrainer, TrainingError
    from training.model import ModelLoadError

    cfg = _load(config, set_)
    init_from = None
    if cfg.sft is not None and not skip_sft:
        final = Path(cfg.output_dir) / "sft" / "final"
        init_from = str(final if (final / "config.json").exists() else _sft(cfg))
    console.print(f"training [bold]{cfg.name}[/bold]: loss {cfg.loss.type}, {cfg.steps} steps x {cfg.batch_size} "
                  f"completions, output {cfg.output_dir}", highlight=False)
    book = _RunBook(cfg) if register_run else None
    with _progress() as prog:
        task = prog.add_task("GRPO", total=cfg.steps, info="")

        def on_step(rec: dict) -> None:
            prog.update(task, completed=rec["step"], info=(
                f"reward {rec.get('reward_mean', float('nan')):.3f}  pass {rec.get('pass_rate', float('nan')):.2f}  "
                f"kept {int(rec.get('groups_kept', 0))}/{int(rec.get('groups_sampled', 0))}  "
                f"{rec['step_time_s']:.1f}s/step"
                + (f"  guard kept {rec['guard_scale']:g}" if "guard_scale" in rec else "")))

        try:
            trainer = GRPOTrainer(cfg, init_from=init_from, on_step=on_step)
            result = trainer.train()
        except (TrainingError, ModelLoadError) as exc:
            if book:
                book.finish("failed", {})
            fail(console, exc, 1, label="training stopped")
        except KeyboardInterrupt:
            if book:
                book.finish("interrupted", {})
            raise
    if result.resumed_from:
        console.print(f"resumed from {result.resumed_from}")
    if trainer.focus is not None:
        from training.focus import describe

        console.print(describe(trainer.focus), highlight=False)
    if trainer.held is not None:
        from training.guard import describe as describe_guard
        from training.metrics import MetricsLog

        console.print(describe_guard(trainer.held, MetricsLog(result.metrics_path).read()), highlight=False)
    console.print(f"checkpoint: [bold]{result.final_checkpoint}[/bold]\nmetrics: {result.metrics_path}\n"
                  f"plot: {result.plot_path}", highlight=False)
    best = None
    if result.best is not None:
        b = result.best
        what = (f"{b.checkpoint} ({b.path})" if b.checkpoint else
                f"the starting policy ({b.path}): no checkpoint beat it")
        console.print(f"best by eval pass@1 on {b.eval_tasks} held-out tasks: [bold]{what}[/bold], {b.value:.3f} "
                      f"(start {b.start_value:.3f})", highlight=False)
        if b.checkpoint and result.final_checkpoint and Path(b.path).resolve() != result.final_checkpoint.resolve():
            best = Path(b.path)
    if book and result.final_checkpoint:
        names = book.finish("finished", result.last, result.final_checkpoint, best)
        if names:
            console.print(f"registered as [bold]{names[0]}[/bold]" + (f", the best as [bold]{names[1]}[/bold]"
                          if len(names) > 1 else "") + f" (run {book.run_id}) in {book.path}", highlight=False)


class _RunBook:
    """The run's row in the registry: opened before training (status running), closed with the final metrics and
    the final checkpoint registered under the run, or marked failed / interrupted. A registry that cannot be
    written is reported and training goes on: losing the catalog entry must not cost the run."""

    def __init__(self, cfg: Any):
        from training.registry import Registry, default_registry_path

        self.path = default_registry_path()
        self.run_id: str | None = None
        try:
            with Registry(self.path) as reg:
                self.run_id = reg.start_run(cfg.name, kind=f"grpo:{cfg.loss.type}", config=cfg.model_dump(mode="json")).id
        except Exception as exc:  # noqa: BLE001 - reported, never fatal
            console.print(f"[yellow]registry not written ({self.path}): {exc}[/yellow]", highlight=False)

    def finish(self, status: str, metrics: dict, checkpoint: Path | None = None, best: Path | None = None) -> list[str]:
        """Close the run's row; register its final checkpoint and, with checkpoint.keep_best, the best one when that
        is another (so either can be promoted). Returns the registered names, final first."""
        from training.registry import Registry

        if self.run_id is None:
            return []
        nums = {k: float(v) for k, v in (metrics or {}).items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        try:
            with Registry(self.path) as reg:
                recs = [reg.register_checkpoint(c, run_id=self.run_id) for c in (checkpoint, best) if c]
                reg.finish_run(self.run_id, status=status, metrics=nums)
            return [r.name for r in recs]
        except Exception as exc:  # noqa: BLE001
            console.print(f"[yellow]registry not updated ({self.path}): {exc}[/yellow]", highlight=False)
            return []


def register(app: typer.Typer) -> None:
    app.command()(sft)
    app.command()(train)
