"""`rlvr plan CONFIG`: tokens, tool calls, FLOPs, memory and time of a run before it starts, and what to cut."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from studio.commands.errors import print_error

console = Console()


def _gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


def _dur(s: float) -> str:
    return f"{s:.1f} s" if s < 120 else (f"{s / 60:.1f} min" if s < 7200 else f"{s / 3600:.1f} h")


def plan(
    config: Path = typer.Argument(..., help="Training config (YAML)."),
    gpu: list[str] = typer.Option(None, "--gpu", help="Also estimate on this GPU (H100, H200, A100-80GB, L40S, L4, "
                                                      "A10G, RTX4090, T4); repeatable."),
    probe: bool = typer.Option(True, help="Measure this machine for ~10 s on the configured model."),
    probe_seconds: float = typer.Option(10.0, min=2.0, max=60.0),
    json_out: Path = typer.Option(None, "--json", help="Write the plan here."),
) -> None:
    """Estimate a run's cost before it starts; list the reductions that save most, with their new estimates."""
    from generators.task_io import atomic_write_bytes
    from training.config_io import ConfigError, load_train_config
    from training.planner import PlanError, plan as make_plan

    try:
        cfg = load_train_config(config, check_files=False)
        with console.status(f"measuring this machine on the configured model (~{probe_seconds:.0f} s)" if probe
                            else "estimating"):
            rep = make_plan(cfg, config_name=str(config), gpus=gpu or None, probe=probe, probe_s=probe_seconds)
    except (ConfigError, PlanError, ValueError) as exc:
        print_error(console, exc)
        raise typer.Exit(2) from exc
    e = rep.estimate
    w, m, f = e.workload, e.memory, e.flops
    console.print(f"[bold]{config}[/bold]: {e.model.params / 1e6:.1f}M parameters ({e.model.trainable_params / 1e6:.2f}M "
                  f"trainable), {cfg.steps} steps x {w.completions_per_step} completions "
                  f"({w.prompts_per_step} prompts x {cfg.rollout.num_generations})", highlight=False)
    t = Table(title="workload (upper bounds)")
    t.add_column("quantity")
    t.add_column("per step", justify="right")
    t.add_column("whole run", justify="right")
    t.add_row("prompt tokens (measured mean)", str(w.prompt_tokens), "")
    t.add_row("rollout tokens", f"{w.rollout_tokens_per_step:,}", f"{w.total_rollout_tokens:,}")
    t.add_row("generated tokens", f"{w.generated_tokens_per_step:,}", f"{w.total_generated_tokens:,}")
    t.add_row("turns per episode", str(w.turns), "")
    t.add_row("tool calls / environment steps", f"{w.env_steps_per_step:,}", f"{w.total_env_steps:,}")
    t.add_row("generation FLOPs", f"{f.generation_per_step:.3g}", "")
    t.add_row("training FLOPs (fwd+bwd)", f"{f.training_per_step:.3g}", "")
    t.add_row("reference FLOPs", f"{f.reference_per_step:.3g}", f"total {f.total:.3g}")
    console.print(t)
    mt = Table(title="memory")
    mt.add_column("part")
    mt.add_column("bytes", justify="right")
    for k in ("weights", "gradients", "optimizer", "activations", "logits", "kv_cache", "reference",
              "peak_training", "peak_generation"):
        mt.add_row(k.replace("_", " "), _gb(getattr(m, k)))
    console.print(mt)
    tt = Table(title="time")
    for col in ("where", "generation/step", "training/step", "environment/step", "step", "whole run", "basis"):
        tt.add_column(col, overflow="fold")
    for x in e.time:
        tt.add_row(x.target, _dur(x.generation_s_per_step), _dur(x.training_s_per_step),
                   _dur(x.environment_s_per_step), _dur(x.step_s), _dur(x.total_s), x.basis)
    console.print(tt)
    if rep.reductions:
        rt = Table(title=f"reductions, most saving first (on {e.time[0].target})")
        for col in ("change", "setting", "new step", "new run", "saves", "peak memory", "note"):
            rt.add_column(col, overflow="fold")
        for r in rep.reductions:
            rt.add_row(r.change, r.setting, _dur(r.step_s), _dur(r.total_s), f"{r.saves_fraction:.0%}",
                       _gb(r.peak_memory), r.note)
        console.print(rt)
    for wmsg in rep.warnings:
        console.print(f"[yellow]note:[/yellow] {wmsg}", highlight=False)
    if json_out is not None:
        atomic_write_bytes(json_out, rep.model_dump_json(indent=1).encode())
        console.print(f"plan: {json_out}")


def register(app: typer.Typer) -> None:
    app.command()(plan)
