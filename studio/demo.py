"""`rlvr demo`: every stage of the workflow that exists, in order, on the embedded defaults.

A stage is a module in `studio/demo_stages/` with `ORDER: int`, `TITLE: str` and `run(ctx: DemoContext) -> dict`;
the returned dict names what the stage produced (paths, numbers) and is printed at the end. A stage may put values
into `ctx.state` for later stages (the dataset path, the reward, the checkpoint). A stage raising `StageFailed`
stops the demo with its message (for example an audit that finds the reward gameable).
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

import studio.demo_stages
from studio.commands.errors import print_error


class StageFailed(RuntimeError):
    """A stage found a reason to stop the workflow; the message is shown to the user."""


@dataclass
class DemoContext:
    out: Path
    quick: bool
    console: Console
    state: dict[str, Any] = field(default_factory=dict)


def discover_stages() -> list[Any]:
    mods = [importlib.import_module(f"studio.demo_stages.{m.name}") for m in pkgutil.iter_modules(studio.demo_stages.__path__)]
    return sorted((m for m in mods if hasattr(m, "run")), key=lambda m: m.ORDER)


def run_demo(out: Path, *, quick: bool = False, console: Console | None = None) -> dict[str, dict]:
    console = console or Console()
    out.mkdir(parents=True, exist_ok=True)
    ctx = DemoContext(out=out, quick=quick, console=console)
    stages = discover_stages()
    results: dict[str, dict] = {}
    for i, stage in enumerate(stages, 1):
        console.rule(f"[bold]stage {i}/{len(stages)}: {stage.TITLE}")
        t0 = time.time()
        try:
            produced = stage.run(ctx)
        except StageFailed as exc:
            print_error(console, exc, label=f"stopped at {stage.TITLE}")
            _write_summary(out, results)
            raise SystemExit(1) from exc
        produced = dict(produced or {})
        produced["seconds"] = round(time.time() - t0, 1)
        results[stage.TITLE] = produced
    table = Table(title=f"rlvr demo: what was produced (under {out})")
    table.add_column("stage")
    table.add_column("result")
    for title, produced in results.items():
        table.add_row(title, "\n".join(f"{k}: {v}" for k, v in produced.items()))
    console.print(table)
    _write_summary(out, results)
    return results


def _write_summary(out: Path, results: dict) -> None:
    (out / "demo_summary.json").write_text(json.dumps(results, indent=2, default=str))
