"""The default workplace dataset: world generated from its spec, tasks, demonstrations, NeMo Gym export, on disk.

Why in studio/: it composes generators (world + tasks) with rewards (the environment that replays ground truth into
demonstrations), and only studio/ and training/ may import both. The folder it writes is self-contained:

    DIR/train.parquet, validation.parquet, test.parquet   TaskRows (schemas.task), via generators.task_io
    DIR/demonstrations.jsonl                              ground-truth chat transcripts of the train split (SFT)
    DIR/world/<table>.parquet                             the seed world, so the verifier can be rebuilt
    DIR/nemo_gym/<split>.jsonl                            the tasks in NeMo Gym's example.jsonl format
    DIR/manifest.json                                     counts, today, seeds, what is where (written last)
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import polars as pl

from generators.task_io import atomic_write_bytes, atomic_write_parquet, read_tasks, write_tasks
from generators.workplace import CONTEXT, TODAY, generate_tasks, generate_world_tables
from rewards.environments.workplace import WorkplaceEnv, WorkplaceWorld
from rewards.environments.workplace.demonstrations import demonstration, demonstration_record
from rewards.environments.workplace.nemo_gym import export_tasks
from schemas.task import TaskRow

SPLITS = ("train", "validation", "test")


def build_dataset(out: str | Path, *, n: int = 1200, seed: int = 0, world_seed: int | None = None,
                  tools: str = "all", progress: Callable[[str, int, int], None] | None = None) -> dict[str, Any]:
    """Write the dataset folder; returns the manifest. `progress(stage, done, total)` is called along the way."""
    out = Path(out)
    t0 = time.time()
    tables = generate_world_tables(world_seed)
    world = WorkplaceWorld.from_tables(tables, today=TODAY, context=CONTEXT, name="workplace")
    tasks = generate_tasks(tables, today=TODAY, context=CONTEXT, n=n, seed=seed, world_seed=world_seed,
                           tools=tools)
    env = WorkplaceEnv(world)
    demos = []
    for i, task in enumerate(tasks):
        traj = demonstration(task, env)  # raises DemonstrationError naming the task if its ground truth is unclean
        if task.split == "train":
            demos.append(demonstration_record(traj, task))
        if progress and (i % 50 == 0 or i == len(tasks) - 1):
            progress("demonstrations", i + 1, len(tasks))
    paths: dict[str, str] = {}
    for split in SPLITS:
        part = [t for t in tasks if t.split == split]
        paths[split] = str(write_tasks(part, out / f"{split}.parquet"))
        export_tasks(part, out / "nemo_gym" / f"{split}.jsonl")
    atomic_write_bytes(out / "demonstrations.jsonl",
                       "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in demos).encode("utf-8"))
    for name, rows in tables.items():
        cols = list(rows[0]) if rows else []
        atomic_write_parquet(pl.DataFrame(rows, schema={c: pl.Utf8 for c in cols}), out / "world" / f"{name}.parquet")
    manifest = {
        "kind": "workplace_tasks", "n_tasks": len(tasks), "seed": seed, "world_seed": world_seed, "tools": tools,
        "today": TODAY, "context": CONTEXT,
        "splits": dict(Counter(t.split for t in tasks)),
        "categories": dict(Counter(t.metadata["category"] for t in tasks)),
        "difficulty": dict(Counter(t.metadata["difficulty"] for t in tasks)),
        "noop_tasks": sum(1 for t in tasks if t.metadata["noop"]),
        "distractor_tasks": sum(1 for t in tasks if t.metadata["distractor"]),
        "held_out_templates": sorted({t.metadata["template"] for t in tasks if t.metadata["held_out_template"]}),
        "templates": len({t.metadata["template"] for t in tasks}),
        "demonstrations": len(demos), "world_rows": {k: len(v) for k, v in tables.items()},
        "files": {**paths, "demonstrations": str(out / "demonstrations.jsonl"), "world": str(out / "world"),
                  "nemo_gym": str(out / "nemo_gym")},
        "seconds": round(time.time() - t0, 1),
    }
    atomic_write_bytes(out / "manifest.json", json.dumps(manifest, indent=2).encode("utf-8"))
    return manifest


def load_world(folder: str | Path) -> WorkplaceWorld:
    """The seed world of a dataset folder written by `build_dataset`."""
    folder = Path(folder)
    manifest = json.loads((folder / "manifest.json").read_text()) if (folder / "manifest.json").exists() else {}
    parts = sorted((folder / "world").glob("*.parquet"))
    if not parts:
        raise FileNotFoundError(f"{folder}: no world/*.parquet (not a workplace dataset folder from `rlvr env tasks`)")
    tables = {p.stem: pl.read_parquet(p).to_dicts() for p in parts}
    return WorkplaceWorld.from_tables(tables, today=manifest.get("today", TODAY),
                                      context=manifest.get("context", CONTEXT), name="workplace")


def load_split(folder: str | Path, split: str) -> list[TaskRow]:
    path = Path(folder) / f"{split}.parquet"
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such split file (expected one of {', '.join(SPLITS)})")
    return read_tasks(path)
