"""Demo stage: generate the example project-management world (employees, projects, tasks) and a structured LLM
column on the embedded model, each with its report; stop the demo if a declared relation fails.

Puts the world's folder in `ctx.state["world_dir"]` and its tasks table in `ctx.state["world_tasks"]` (a Parquet
folder); `ctx.state["dataset"]` is left to the stages that build training tasks.
"""

from __future__ import annotations

import json
from pathlib import Path

ORDER = 10
TITLE = "dataset generation"

ROOT = Path(__file__).resolve().parents[2]
WORLD = ROOT / "examples" / "datasets" / "project_world.yaml"
TICKETS = ROOT / "examples" / "datasets" / "llm_tickets.yaml"


def run(ctx) -> dict:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from generators.llm import LLMRunner
    from generators.report import report_for_dir, summary_lines
    from generators.task_io import atomic_write_bytes
    from generators.writer import Progress as Hooks, generate_dataset
    from studio.demo import StageFailed

    # quick mode (tests) skips the LLM column: a few seconds a row on a busy 2-core machine
    n_tasks, n_llm = (300, 0) if ctx.quick else (20_000, 4)
    results: dict = {}
    if "model" in ctx.state:
        model, tok = ctx.state["model"]
        runner = LLMRunner(model=model, tokenizer=tok)
    else:
        from training.model import load_model
        runner = LLMRunner(load_model)
    jobs = [("world", WORLD, n_tasks)] + ([("llm_tickets", TICKETS, n_llm)] if n_llm else [])
    for name, spec, n in jobs:
        out = ctx.out / "datasets" / name
        bars = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=ctx.console, transient=True)
        ids: dict[str, int] = {}
        hooks = Hooks(lambda t, total: ids.__setitem__(t, bars.add_task(f"{name}.{t}", total=total)),
                      lambda t, rows: bars.advance(ids[t], rows))
        with bars:
            manifest = generate_dataset(spec, n, out, overwrite=True, llm=runner, progress=hooks)
        report = report_for_dir(out)
        atomic_write_bytes(out / "report.json", json.dumps(report, indent=2, default=str).encode())
        ctx.console.print("\n".join(summary_lines(report)), highlight=False, markup=False)
        if not report["ok"]:
            bad = [c["name"] for c in report["relations"] if not c["ok"]]
            raise StageFailed(f"{name}: declared relations fail on the generated data: {bad}")
        rows = {t: m["rows"] for t, m in manifest["tables"].items()}
        results[f"{name} rows"] = ", ".join(f"{t} {r}" for t, r in rows.items())
        results[f"{name} folder"] = str(out)
        results[f"{name} seconds"] = manifest["seconds"]
        q = sum(m["quarantined"] for m in manifest["tables"].values())
        if q:
            results[f"{name} quarantined"] = q
    ctx.state["world_dir"] = str(ctx.out / "datasets" / "world")
    ctx.state["world_tasks"] = str(ctx.out / "datasets" / "world" / "tasks")
    results["relations checked"] = "all hold"
    return results
