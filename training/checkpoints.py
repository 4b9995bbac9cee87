"""Training checkpoints: weights (full or adapter), optimizer and trainer state, and the manifest, written so that a
SIGKILL at any instant leaves either the previous complete checkpoint or the new complete one, never a half.

How: everything is written into `.tmp-step-N` inside the run's `checkpoints/` folder, each file fsynced; the
manifest (`manifest.json`, the proof of completeness) is written last, and then the folder is renamed to `step-N`
(an atomic rename on one file system). A folder without a manifest, or whose weight files do not match the
manifest's hash, is ignored by `latest_complete` and removed by the next save.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import torch

from schemas.checkpoint import CheckpointManifest

MANIFEST = "manifest.json"
STATE = "trainer_state.json"
OPTIMIZER = "optimizer.pt"


def _fsync_tree(folder: Path) -> None:
    for p in folder.rglob("*"):
        if p.is_file():
            with open(p, "rb") as f:
                os.fsync(f.fileno())
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def weights_digest(folder: Path, files: list[str]) -> str:
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode())
        with open(folder / name, "rb") as f:
            while chunk := f.read(1 << 22):
                h.update(chunk)
    return h.hexdigest()


def weight_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.suffix in (".safetensors", ".bin") and p.is_file())


def save_checkpoint(
    root: Path,
    step: int,
    *,
    model: Any,
    tokenizer: Any,
    optimizer: torch.optim.Optimizer | None,
    trainer_state: dict[str, Any],
    manifest_fields: dict[str, Any],
    keep: int = 2,
    protect: frozenset[str] = frozenset(),
) -> Path:
    """Write checkpoint `step-<step>` under `root` atomically and prune to the newest `keep` complete ones (and the
    ones named in `protect`: the run's best)."""
    root.mkdir(parents=True, exist_ok=True)
    for stale in root.glob(".tmp-step-*"):
        shutil.rmtree(stale, ignore_errors=True)
    final = root / f"step-{step}"
    tmp = root / f".tmp-step-{step}"
    tmp.mkdir()
    unwrapped = getattr(model, "module", model)
    unwrapped.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    if optimizer is not None:
        torch.save(optimizer.state_dict(), tmp / OPTIMIZER)
    (tmp / STATE).write_text(json.dumps(trainer_state, indent=1, default=str))
    files = weight_files(tmp)
    manifest = CheckpointManifest(
        name=f"step-{step}",
        weights_hash=weights_digest(tmp, files),
        weights_files=files,
        adapter=(tmp / "adapter_config.json").exists(),
        step=step,
        created_at=time.time(),
        **manifest_fields,
    )
    _fsync_tree(tmp)
    mtmp = tmp / (MANIFEST + ".tmp")
    mtmp.write_text(manifest.model_dump_json(indent=1))
    with open(mtmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(mtmp, tmp / MANIFEST)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    fd = os.open(root, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    prune(root, keep, protect)
    return final


def read_manifest(folder: Path) -> CheckpointManifest | None:
    p = folder / MANIFEST
    if not p.is_file():
        return None
    try:
        return CheckpointManifest.model_validate_json(p.read_text())
    except ValueError:
        return None


def is_complete(folder: Path, verify_hash: bool = True) -> bool:
    m = read_manifest(folder)
    if m is None or not (folder / STATE).is_file():
        return False
    if not all((folder / f).is_file() for f in m.weights_files):
        return False
    return not verify_hash or weights_digest(folder, m.weights_files) == m.weights_hash


def complete_checkpoints(root: Path, verify_hash: bool = False) -> list[Path]:
    if not root.is_dir():
        return []
    found = [p for p in root.glob("step-*") if p.is_dir() and is_complete(p, verify_hash)]
    return sorted(found, key=lambda p: int(p.name.split("-", 1)[1]))


def latest_complete(root: Path) -> Path | None:
    """The newest checkpoint whose manifest exists and whose weights match its hash (half-written ones skipped)."""
    for folder in reversed(complete_checkpoints(root)):
        if is_complete(folder, verify_hash=True):
            return folder
    return None


def prune(root: Path, keep: int, protect: frozenset[str] = frozenset()) -> None:
    """Remove complete checkpoints older than the newest `keep`, except those named in `protect`, and any folder
    without a manifest."""
    done = complete_checkpoints(root)
    for old in done[:-keep] if keep > 0 else []:
        if old.name not in protect:
            shutil.rmtree(old, ignore_errors=True)
    for p in root.glob("step-*"):
        if p.is_dir() and read_manifest(p) is None:
            shutil.rmtree(p, ignore_errors=True)


def load_trainer_state(folder: Path) -> dict[str, Any]:
    return json.loads((folder / STATE).read_text())


def load_optimizer_state(folder: Path) -> dict[str, Any] | None:
    p = folder / OPTIMIZER
    return torch.load(p, map_location="cpu", weights_only=False) if p.is_file() else None


def file_digest(path: Path) -> str | None:
    """Digest of a dataset file or folder (every file in it), for the manifest's dataset_hash."""
    if not path.exists():
        return None
    h = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for p in files:
        h.update(p.name.encode())
        with open(p, "rb") as f:
            while chunk := f.read(1 << 22):
                h.update(chunk)
    return h.hexdigest()[:16]
