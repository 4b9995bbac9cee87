"""`rlvr studio`: serve the Streamlit studio, on 127.0.0.1 unless told otherwise."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import typer
from rich.console import Console

console = Console()

APP = Path(__file__).resolve().parents[1] / "app.py"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def streamlit_command(host: str, port: int, app: Path = APP) -> list[str]:
    """The exact server command (also used by the end-to-end test): headless, no usage stats, no file watcher."""
    return [
        sys.executable, "-m", "streamlit", "run", str(app),
        "--server.address", host, "--server.port", str(port), "--server.headless", "true",
        "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none", "--client.toolbarMode", "viewer",
    ]


def studio(
    host: str = typer.Option("127.0.0.1", help="Address to bind. Anything but loopback exposes the studio to the network."),
    port: int = typer.Option(8501, min=1, max=65535),
    workspace: Path | None = typer.Option(
        None, help="The one folder the studio reads and writes (default $RLVR_STUDIO_WORKSPACE or $RLVR_HOME/workspace)."),
) -> None:
    """Serve the studio (datasets, rewards, audit, training, evaluation, triage) in the browser."""
    from studio.workspace import ENV_VAR, Workspace

    ws = Workspace.open(workspace)
    if host not in LOOPBACK:
        console.print(f"[yellow]warning:[/yellow] binding {host}: anyone who can reach this machine can use the studio")
    console.print(f"RLVR Studio on http://{'127.0.0.1' if host == '0.0.0.0' else host}:{port}  (workspace {ws.root})")
    env = {**os.environ, ENV_VAR: str(ws.root)}
    try:
        rc = subprocess.call(streamlit_command(host, port), env=env)
    except KeyboardInterrupt:
        rc = 0
    raise typer.Exit(rc)


def register(app: typer.Typer) -> None:
    app.command()(studio)
