"""`rlvr doctor`, `rlvr chat`, `rlvr demo`: the commands every install has."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from studio.commands.errors import print_error

console = Console()

REQUIRED = ["torch", "transformers", "outlines", "trl", "polars", "streamlit", "pydantic", "peft", "accelerate"]


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def doctor() -> None:
    """Report versions, the embedded model's cache, threads, GPU and vLLM; exit 1 when something required is missing."""
    from training.model import check_cache, configure_threads, embedded_cache_dir, embedded_gguf_path, rlvr_home

    problems: list[str] = []
    table = Table(title="rlvr doctor", show_lines=False)
    table.add_column("check")
    table.add_column("state")
    table.add_row("python", platform.python_version())
    for dist in REQUIRED:
        v = _version(dist)
        table.add_row(dist, v or "[red]missing[/red]")
        if v is None:
            problems.append(f"{dist} is not installed (run `make setup`)")
    try:
        gguf = embedded_gguf_path()
        table.add_row("embedded model", f"{gguf.name} ({gguf.stat().st_size / 1e6:.0f} MB)")
    except Exception as exc:  # noqa: BLE001 - any failure here is the message to show
        table.add_row("embedded model", f"[red]{escape(str(exc))}[/red]")
        problems.append(str(exc))
    state = check_cache(embedded_cache_dir(), full_hash=False)
    table.add_row("model cache", f"{state.path}: {'ready' if state.ok else state.reason + ' (built on first use)'}")
    table.add_row("RLVR_HOME", str(rlvr_home()))
    threads = configure_threads()
    table.add_row("torch threads", f"{threads} of {os.cpu_count()} cores (set RLVR_THREADS to change)")
    gpu = "none"
    if _version("torch"):
        import torch

        if torch.cuda.is_available():
            gpu = ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
    table.add_row("GPU", gpu)
    vllm = _version("vllm")
    table.add_row("vLLM", vllm or "not installed (optional: pip install 'rlvr-studio\\[vllm]' on a GPU machine)")
    console.print(table)
    if problems:
        for p in problems:
            print_error(console, p, label="problem")
        raise typer.Exit(1)
    console.print("[green]ready[/green]")


def chat(
    question: str = typer.Argument(..., help="The user message."),
    model: str = typer.Option("default", help="'default' (embedded SmolLM2-135M-Instruct), a folder or a .gguf file."),
    max_new_tokens: int = typer.Option(128, min=1),
    temperature: float = typer.Option(0.0, min=0.0, help="0 = greedy (deterministic)."),
    system: str | None = typer.Option(None, help="Optional system message."),
) -> None:
    """One answer from a model through its chat template."""
    from training.chat import generate_reply
    from training.model import ModelLoadError, load_model

    try:
        with console.status("loading model"):
            m, tok = load_model(model)
    except ModelLoadError as exc:
        print_error(console, exc)
        raise typer.Exit(2) from exc
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": question}]
    with console.status("generating"):
        reply = generate_reply(m, tok, messages, max_new_tokens=max_new_tokens, temperature=temperature)
    console.print(reply, markup=False, highlight=False)


def demo(
    out: Path = typer.Option(Path("demo_out"), "--out", "-o", help="Folder for everything the demo produces."),
    quick: bool = typer.Option(False, help="Smaller sizes everywhere (for tests)."),
) -> None:
    """Run every stage of the workflow end to end on the embedded defaults and say what was produced where."""
    from studio.demo import run_demo

    run_demo(out, quick=quick, console=console)


def register(app: typer.Typer) -> None:
    app.command()(doctor)
    app.command()(chat)
    app.command()(demo)
