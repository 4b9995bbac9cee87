"""`rlvr checkpoints list | show | register | promote | rollback | history | verify | delete`: the registry."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from studio.commands.errors import fail

console = Console()
app_ck = typer.Typer(help="The checkpoint registry: register, promote, roll back (hash-verified), lineage.",
                     no_args_is_help=True)


def _registry():
    from training.registry import Registry

    return Registry()



def _when(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S") if ts else ""


@app_ck.command("list")
def list_() -> None:
    """Every registered checkpoint with its aliases, step, base model, parent and metrics."""
    with _registry() as reg:
        ckpts = reg.checkpoints()
        if not ckpts:
            console.print(f"no checkpoint registered in {reg.path}")
            return
        table = Table(title=f"checkpoints ({reg.path})")
        for col in ("name", "aliases", "step", "base", "parent", "weights", "metrics", "registered"):
            table.add_column(col)
        for c in ckpts:
            table.add_row(c.name, ", ".join(c.aliases), str(c.step), c.base_model, c.parent or "", c.weights_hash[:12],
                          ", ".join(f"{k}={v:.3g}" for k, v in list(c.metrics.items())[:3]), _when(c.created_at))
        console.print(table)
        for alias, name in reg.aliases().items():
            console.print(f"{alias} -> {name}", highlight=False)


@app_ck.command()
def show(name: str = typer.Argument(..., help="Checkpoint name or alias (production).")) -> None:
    """One checkpoint: manifest, lineage, evaluations, and whether its weights still match their hash."""
    from training.registry import RegistryError

    with _registry() as reg:
        try:
            c = reg.checkpoint(name)
            ok, msg = reg.verify(name)
            lineage = reg.lineage(name)
            evals = reg.evaluations(name)
        except RegistryError as exc:
            fail(console, str(exc))
        aliases = f"({', '.join(c.aliases)})" if c.aliases else ""
        console.print(f"[bold]{escape(c.name)}[/bold] {escape(aliases)}", highlight=False)
        for k, v in [("path", c.path), ("base model", c.base_model), ("weights", c.weights_hash),
                     ("dataset", c.dataset_hash), ("reward", c.reward_version), ("step", c.step),
                     ("run", c.run_id), ("registered", _when(c.created_at))]:
            console.print(f"  {k}: {v}", highlight=False)
        console.print(f"  weights check: {'[green]' if ok else '[red]'}{escape(msg)}[/]", highlight=False)
        console.print("  lineage: " + " <- ".join(x.name for x in lineage), highlight=False)
        if c.metrics:
            console.print("  metrics: " + ", ".join(f"{k}={v:.4g}" for k, v in c.metrics.items()), highlight=False)
        for e in evals:
            console.print(f"  eval {_when(e.created_at)}: pass@1 {e.pass_at_1:.3f} on {e.splits} ({e.report_path})",
                          highlight=False)


@app_ck.command("register")
def register_checkpoint(
    folder: Path = typer.Argument(..., help="A checkpoint folder holding manifest.json."),
    name: str = typer.Option(None, help="Register under this name (default: the manifest's)."),
    run_id: str = typer.Option(None, help="The run that produced it."),
) -> None:
    """Register a checkpoint after checking its weights against the manifest's hash."""
    from training.registry import RegistryError

    with _registry() as reg:
        try:
            c = reg.register_checkpoint(folder, name=name, run_id=run_id)
        except RegistryError as exc:
            fail(console, str(exc))
        console.print(f"registered [bold]{c.name}[/bold] ({c.weights_hash[:12]}) from {c.path}", highlight=False)


@app_ck.command()
def promote(
    name: str = typer.Argument(..., help="Checkpoint name."),
    as_: str = typer.Option("production", "--as", help="The alias to point at it."),
    note: str = typer.Option("", help="Why (kept in the history)."),
) -> None:
    """Point an alias (production) at a checkpoint, after re-hashing its weights."""
    from training.registry import RegistryError

    with _registry() as reg:
        try:
            p = reg.promote(name, alias=as_, note=note)
        except RegistryError as exc:
            fail(console, str(exc))
        console.print(f"{p.alias} -> [bold]{p.checkpoint}[/bold] (was {p.previous or 'nothing'}; weights verified)",
                      highlight=False)


@app_ck.command()
def rollback(
    alias: str = typer.Option("production", "--alias", help="The alias to roll back."),
    note: str = typer.Option("", help="Why (kept in the history)."),
) -> None:
    """Make the previously promoted checkpoint current again (its weights' hash verified first)."""
    from training.registry import RegistryError

    with _registry() as reg:
        try:
            p = reg.rollback(alias=alias, note=note)
        except RegistryError as exc:
            fail(console, str(exc))
        console.print(f"{p.alias} rolled back: {p.previous} -> [bold]{p.checkpoint}[/bold] (weights verified)",
                      highlight=False)


@app_ck.command()
def history(alias: str = typer.Option("production", "--alias")) -> None:
    """Every promote and rollback of an alias, oldest first."""
    with _registry() as reg:
        table = Table(title=f"{alias} history")
        for col in ("#", "when", "action", "checkpoint", "previous", "active", "note"):
            table.add_column(col)
        for h in reg.history(alias):
            table.add_row(str(h.id), _when(h.created_at), h.action, h.checkpoint, h.previous or "",
                          "yes" if h.active else "", h.note)
        console.print(table)


@app_ck.command()
def verify(name: str = typer.Argument(..., help="Checkpoint name or alias.")) -> None:
    """Re-hash a checkpoint's weights against the registered hash (exit 1 on a mismatch)."""
    from training.registry import RegistryError

    with _registry() as reg:
        try:
            ok, msg = reg.verify(name)
        except RegistryError as exc:
            fail(console, str(exc))
    console.print(("[green]ok[/green] " if ok else "[red]mismatch[/red] ") + escape(msg), highlight=False)
    if not ok:
        raise typer.Exit(1)


@app_ck.command()
def delete(
    name: str = typer.Argument(..., help="Checkpoint name."),
    yes: bool = typer.Option(False, "--yes", help="Really delete (without it, only says what would go)."),
    files: bool = typer.Option(False, "--files", help="Also remove the checkpoint folder from disk."),
) -> None:
    """Remove a checkpoint from the catalog (and with --files its folder). Nothing is deleted without --yes."""
    from training.registry import RegistryError

    with _registry() as reg:
        try:
            plan = reg.delete_checkpoint(name, yes=yes, remove_files=files)
        except RegistryError as exc:
            fail(console, str(exc), code=1)
        console.print(f"deleted {plan['checkpoint']}" + (f" and {plan['path']}" if files else "") +
                      (f"; children keep their parent name: {plan['children']}" if plan["children"] else ""),
                      highlight=False)


def register(app: typer.Typer) -> None:
    app.add_typer(app_ck, name="checkpoints")
