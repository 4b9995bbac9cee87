"""`rlvr env tasks|rollout|verify`: the workplace tool-calling environment from the command line (thin: it calls the
library in rewards/environments/workplace, generators/workplace and studio/workplace_dataset)."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from studio.commands.errors import print_error

console = Console()
env_app = typer.Typer(help="The workplace tool-calling environment: tasks, rollouts, NeMo Gym scoring.",
                      no_args_is_help=True)

ROOT = Path(__file__).resolve().parents[2]
NEMO_GYM_DATA = ROOT.parent / "shared" / "external" / "nemo_gym_workplace_assistant"


def _progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=True)


def default_dataset_dir() -> Path:
    from training.model import rlvr_home

    return rlvr_home() / "workplace" / "default"


def ensure_dataset(folder: Path | None) -> Path:
    """The dataset folder to use: the given one, or the default one (built on first use)."""
    from studio.workplace_dataset import build_dataset

    if folder is not None:
        if not (folder / "manifest.json").exists():
            raise typer.BadParameter(f"{folder}: not a workplace dataset folder (no manifest.json); "
                                     "create one with `rlvr env tasks -o DIR`")
        return folder
    folder = default_dataset_dir()
    if not (folder / "manifest.json").exists():
        with _progress() as p:
            t = p.add_task("building the default workplace dataset", total=None)
            build_dataset(folder, progress=lambda s, d, n: p.update(t, completed=d, total=n, description=s))
    return folder


@env_app.command("tasks")
def tasks_cmd(
    out: Path = typer.Option(..., "--out", "-o", help="Folder for train/validation/test Parquet, demonstrations, world."),
    n: int = typer.Option(1200, "-n", min=1, help="Number of tasks."),
    seed: int = typer.Option(0, help="Task sampling seed."),
    world_seed: int | None = typer.Option(None, help="Seed of the world spec (default: the spec's own)."),
    tools: str = typer.Option("all", help="'all' 27 tools per task (as WorkBench), or 'relevant': the category's "
                                          "toolkits + directory (shorter prompts for small models)."),
) -> None:
    """Write the default workplace task dataset (world from its spec, tasks, demonstrations, NeMo Gym export)."""
    from studio.workplace_dataset import build_dataset

    with _progress() as p:
        t = p.add_task("generating world and tasks", total=None)
        if tools not in ("all", "relevant"):
            raise typer.BadParameter(f"--tools must be 'all' or 'relevant', got {tools!r}")
        manifest = build_dataset(out, n=n, seed=seed, world_seed=world_seed, tools=tools,
                                 progress=lambda s, d, total: p.update(t, completed=d, total=total, description=s))
    table = Table(title=f"workplace tasks -> {out}")
    table.add_column("what")
    table.add_column("value")
    for key in ("n_tasks", "splits", "categories", "difficulty", "noop_tasks", "distractor_tasks", "templates",
                "held_out_templates", "demonstrations", "seconds"):
        table.add_row(key, str(manifest[key]))
    console.print(table)


@env_app.command("rollout")
def rollout_cmd(
    model: str = typer.Option("default", help="'default' (embedded SmolLM2-135M-Instruct), a folder or a .gguf."),
    split: str = typer.Option("test", help="train | validation | test"),
    n: int = typer.Option(20, "-n", min=1, help="Number of tasks to roll out."),
    tasks: Path | None = typer.Option(None, help="Dataset folder from `rlvr env tasks` (default: built on first use)."),
    max_turns: int = typer.Option(6, min=1),
    max_new_tokens: int = typer.Option(160, min=8),
    out: Path | None = typer.Option(None, "--out", "-o", help="Write trajectories with verdicts as JSONL here."),
) -> None:
    """Roll the model out on workplace tasks and print a verdict table with reasons."""
    from generators.task_io import atomic_write_bytes
    from rewards.environments.loop import run_episode
    from rewards.environments.workplace import WorkplaceEnv, reason_code
    from studio.workplace_dataset import load_split, load_world
    from training.chat import generate_reply
    from training.model import ModelLoadError, load_model

    folder = ensure_dataset(tasks)
    rows = load_split(folder, split)[:n]
    world = load_world(folder)
    try:
        with console.status("loading model"):
            m, tok = load_model(model)
    except ModelLoadError as exc:
        print_error(console, exc)
        raise typer.Exit(2) from exc

    def policy(messages):
        return generate_reply(m, tok, messages, max_new_tokens=max_new_tokens)

    trajs = []
    with _progress() as p:
        t = p.add_task(f"rolling out {len(rows)} {split} tasks", total=len(rows))
        for task in rows:
            trajs.append(run_episode(task, WorkplaceEnv(world), policy, max_turns=max_turns))
            p.advance(t)
    table = Table(title=f"rlvr env rollout: {model} on {len(rows)} {split} tasks")
    for col in ("task", "category", "difficulty", "verdict", "reason", "calls", "turns"):
        table.add_column(col)
    for task, tr in zip(rows, trajs):
        r = tr.reward
        table.add_row(task.id, task.metadata.get("category", ""), str(task.metadata.get("difficulty", "")),
                      "[green]pass[/green]" if r.passed else "[red]fail[/red]", r.reason[:90],
                      str(int(r.components.get("calls_used", 0))), str(tr.turns))
    console.print(table)
    codes = Counter(reason_code(tr.reward) for tr in trajs)
    passed = sum(1 for tr in trajs if tr.reward.passed)
    console.print(f"passed {passed}/{len(trajs)}; reasons: {dict(codes)}")
    if out:
        atomic_write_bytes(out, "".join(tr.model_dump_json() + "\n" for tr in trajs).encode("utf-8"))
        console.print(f"trajectories: {out}")


def _find_csv_world(start: Path) -> Path | None:
    for d in [start, *start.parents]:
        if (d / "csv_data" / "processed").is_dir():
            return d
    return None


@env_app.command("verify")
def verify_cmd(
    nemo_gym: Path = typer.Option(..., "--nemo-gym", help="Rollouts in NeMo Gym's format (JSONL)."),
    tasks: Path = typer.Option(..., "--tasks", help="Tasks in NeMo Gym's example.jsonl format."),
    world: Path | None = typer.Option(None, help="Folder holding NeMo Gym's csv_data (default: found beside the "
                                                 "tasks file, else the shared copy)."),
) -> None:
    """Score NeMo Gym rollouts with our verifier: one JSON line per rollout, in input order (reward, reason)."""
    from rewards.environments.workplace.nemo_gym import NemoGymFormatError, read_csv_world, read_tasks, verify_rollouts

    folder = world or _find_csv_world(tasks.resolve().parent) or (NEMO_GYM_DATA if NEMO_GYM_DATA.exists() else None)
    if folder is None:
        print_error(console, "no NeMo Gym CSV world found; pass --world FOLDER (holding csv_data/)")
        raise typer.Exit(2)
    try:
        w = read_csv_world(folder)
        verdicts = verify_rollouts(nemo_gym, read_tasks(tasks), w)
    except NemoGymFormatError as exc:
        print_error(console, exc)
        raise typer.Exit(2) from exc
    for v in verdicts:
        sys.stdout.write(json.dumps(v, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def register(app: typer.Typer) -> None:
    app.add_typer(env_app, name="env")
