"""A catalog writer run in a separate process by the concurrency test (no torch import: it starts fast)."""

from __future__ import annotations

import os
from pathlib import Path


def write_checkpoint(root: Path, name: str) -> Path:
    from training.registry import make_manifest

    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.safetensors").write_bytes(os.urandom(4096))
    make_manifest(folder, name=name, base_model="tiny-llama")
    return folder


def writer(db: str, root: str, tag: str, n: int, queue, barrier, rollback: bool = False) -> None:
    """Register n checkpoints, promote each (and with `rollback` roll back right after), log a run per checkpoint;
    report ok or the exception."""
    try:
        from training.registry import Registry

        reg = Registry(db)
        barrier.wait(60)  # both processes start writing together
        for i in range(n):
            reg.register_checkpoint(write_checkpoint(Path(root), f"{tag}-{i}"))
            reg.promote(f"{tag}-{i}")
            if rollback:
                reg.rollback()
            run = reg.start_run(f"{tag}-run", kind="grpo")
            reg.finish_run(run.id, metrics={"i": float(i)})
            barrier.wait(60)  # lockstep rounds: both writers race inside every round, so they interleave on any load
        reg.close()
        queue.put((tag, "ok"))
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        queue.put((tag, repr(exc)))
