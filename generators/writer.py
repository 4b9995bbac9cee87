"""Creating a dataset on disk: batched, resumable, byte-reproducible.

Layout of an output folder:
    <table>/part-00000.parquet ...      the rows, one part per batch
    _quarantine/<table>/part-....parquet rows set aside, with `_quarantine_reason`
    _state.json                          progress, rewritten (atomically) after each part
    manifest.json                        written last: spec hash, seed, counts, schema, part digests

Why this resumes exactly: a batch's rows depend only on (spec, seed, table, batch index, rows still wanted); the
state after each part records what was written, de-duplication keys are re-read from the parts, and every file is
written to a temporary name and renamed. Killed anywhere, a resumed run regenerates the same remaining batches and
ends with the same bytes as an uninterrupted run.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import polars as pl

from generators.engine import (
    ROW, GenerationError, TableRuntime, assign_split, generate_batch, public_columns, runtimes,
)
from generators.spec_io import load_spec, spec_hash
from generators.task_io import atomic_write_bytes, atomic_write_parquet
from schemas.dataset_spec import DatasetSpec

STATE = "_state.json"
MANIFEST = "manifest.json"
MAX_BATCH_FACTOR = 4  # top-up batches allowed (dedup, quarantine) before giving up short
MIN_KEEP_RATE = 0.05


class OutputExists(FileExistsError):
    pass


@dataclass
class Progress:
    """Callbacks so the CLI can draw progress bars without the engine knowing about rich."""

    on_table: Callable[[str, int], None] = lambda table, total: None
    on_rows: Callable[[str, int], None] = lambda table, rows: None


@dataclass
class TableState:
    parts: list[str] = field(default_factory=list)
    quarantine_parts: list[str] = field(default_factory=list)
    rows: int = 0
    candidates: int = 0
    quarantined: int = 0
    duplicates: int = 0
    surplus: int = 0  # valid rows of the last top-up batch beyond the count asked for
    exhausted: bool = False
    resampled: dict[str, int] = field(default_factory=dict)
    validators: dict[str, dict[str, int]] = field(default_factory=dict)
    done: bool = False


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _key_hash(frame: pl.DataFrame, keys: list[str]) -> pl.Series:
    return frame.select(pl.struct([pl.col(k).cast(pl.String) for k in keys]).hash(seed=7).alias("h")).to_series()


def read_table(out: Path, table: str) -> pl.DataFrame:
    parts = sorted((out / table).glob("part-*.parquet"))
    return pl.concat([pl.read_parquet(p) for p in parts]) if parts else pl.DataFrame()


def _rows_wanted(spec: DatasetSpec, table: str, n: int) -> int:
    return spec.tables[table].rows or n


def generate_frames(spec: DatasetSpec, n: int, *, llm: Any = None) -> dict[str, pl.DataFrame]:
    """In-memory generation (preview, tests): the same batches as `generate_dataset`, nothing written."""
    result = {}
    rts = runtimes(spec)
    for name, rt in rts.items():
        rt.parents = {t: result[t] for t in result}
        _attach_llm(rt, llm)
        frames, quarantine, st = [], [], TableState()
        seen = None
        for frame, q, seen in _table_batches(spec, rt, _rows_wanted(spec, name, n), st, seen):
            frames.append(frame)
            quarantine.append(q)
        out = pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()
        result[name] = out
        qs = [q for q in quarantine if q.height]
        result[f"_quarantine/{name}"] = pl.concat(qs, how="diagonal_relaxed") if qs else pl.DataFrame()
        result[f"_stats/{name}"] = st  # type: ignore[assignment]
    return result


def _attach_llm(rt: TableRuntime, llm: Any) -> None:
    if llm is None:
        return
    rt.llm_factory = llm if callable(llm) and not hasattr(llm, "run_column") else (lambda: llm)


def _table_batches(spec: DatasetSpec, rt: TableRuntime, wanted: int, st: TableState, seen: pl.Series | None):
    """Yield (kept rows, quarantined rows, dedup keys seen) batch by batch, continuing from `st`."""
    b = spec.batch_size
    max_batches = (wanted + b - 1) // b * MAX_BATCH_FACTOR + 8
    keys = rt.spec.dedup_by
    cols = public_columns(rt)
    batch = len(st.parts)
    while st.rows < wanted and not st.exhausted:
        if batch >= max_batches or st.candidates >= wanted * MAX_BATCH_FACTOR + 16:
            break
        remaining = wanted - st.rows
        # top-up batches ask for more candidates when de-duplication or quarantine has been dropping rows
        keep = st.rows / st.candidates if st.candidates else 1.0
        size = min(b, max(remaining, int(remaining / max(keep, 0.1)) + (0 if keep == 1.0 else 1)))
        res = generate_batch(rt, batch, size, st.candidates)
        frame = res.frame
        st.candidates += size
        for k, v in res.resampled.items():
            st.resampled[k] = st.resampled.get(k, 0) + v
        for k, v in res.validators.items():
            cur = st.validators.setdefault(k, {"checked": 0, "failed": 0})
            cur["checked"] += v["checked"]
            cur["failed"] += v["failed"]
        if keys and frame.height:
            h = _key_hash(frame, keys)
            fresh = h.is_first_distinct()
            if seen is not None and seen.len():
                fresh = fresh & ~h.is_in(seen)
            st.duplicates += int(frame.height - fresh.sum())
            frame = frame.filter(fresh)
            h = h.filter(fresh)
            seen = h if seen is None else pl.concat([seen, h])
        if rt.spec.split is not None:
            frame = assign_split(rt, frame, batch)
        frame = frame.select(cols)
        st.surplus += max(0, frame.height - (wanted - st.rows))
        frame = frame.head(wanted - st.rows)
        st.rows += frame.height
        # stop topping up when the spec keeps almost nothing (every LLM row invalid, a tiny key space): more of
        # the same would only spend LLM calls; the manifest and report say how many rows are missing
        st.exhausted = ((st.candidates >= wanted and st.rows < MIN_KEEP_RATE * st.candidates)
                        or (frame.height == 0 and size >= 32))
        st.quarantined += res.quarantine.height
        quarantine = res.quarantine.drop(ROW, strict=False)
        batch += 1
        yield frame, quarantine, seen


def _write_state(out: Path, meta: dict, states: dict[str, TableState]) -> None:
    payload = dict(meta, tables={k: v.__dict__ for k, v in states.items()})
    atomic_write_bytes(out / STATE, json.dumps(payload, indent=1, sort_keys=True).encode())


def generate_dataset(
    spec_or_path: Any,
    n: int,
    out: str | Path,
    *,
    seed: int | None = None,
    resume: bool = False,
    overwrite: bool = False,
    llm: Any = None,
    progress: Progress | None = None,
    stop_after_parts: int | None = None,
) -> dict:
    """Generate every table into `out`; returns the manifest. `stop_after_parts` stops early (tests of resume)."""
    spec = load_spec(spec_or_path)
    if seed is not None:
        spec = spec.model_copy(update={"seed": seed})
    out = Path(out)
    progress = progress or Progress()
    shash = spec_hash(spec)
    meta = {"spec_hash": shash, "seed": spec.seed, "n": n, "batch_size": spec.batch_size, "format": 1}
    states: dict[str, TableState] = {}
    if (out / STATE).exists() or (out / MANIFEST).exists():
        if resume and (out / STATE).exists():
            old = json.loads((out / STATE).read_text())
            for k in ("spec_hash", "seed", "n", "batch_size"):
                if old.get(k) != meta[k]:
                    raise GenerationError(f"{out}: cannot resume: {k} was {old.get(k)!r}, now {meta[k]!r} "
                                          "(use another output folder or the same spec, seed and -n)")
            states = {k: TableState(**v) for k, v in old["tables"].items()}
        elif resume and (out / MANIFEST).exists():
            return json.loads((out / MANIFEST).read_text())
        elif overwrite:
            import shutil
            shutil.rmtree(out)
        else:
            raise OutputExists(f"{out} already holds a dataset; pass --resume to continue it or --overwrite")
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    parts_written = 0
    rts = runtimes(spec)
    for name, rt in rts.items():
        rt.parents = {t: read_table(out, t) for t in rts if t != name and states.get(t, TableState()).done}
        _attach_llm(rt, llm)
        st = states.setdefault(name, TableState())
        wanted = _rows_wanted(spec, name, n)
        progress.on_table(name, wanted)
        progress.on_rows(name, st.rows)
        if st.done:
            continue
        seen = None
        if rt.spec.dedup_by and st.parts:
            seen = _key_hash(pl.concat([pl.read_parquet(out / p) for p in st.parts]), rt.spec.dedup_by)
        for frame, quarantine, seen in _table_batches(spec, rt, wanted, st, seen):
            i = len(st.parts)
            if quarantine.height:
                qrel = f"_quarantine/{name}/part-{i:05d}.parquet"
                atomic_write_parquet(quarantine, out / qrel)
                st.quarantine_parts.append(qrel)
            rel = f"{name}/part-{i:05d}.parquet"
            atomic_write_parquet(frame, out / rel)
            st.parts.append(rel)
            _write_state(out, meta, states)
            progress.on_rows(name, frame.height)
            parts_written += 1
            if stop_after_parts is not None and parts_written >= stop_after_parts:
                return {"stopped": True, **meta}
        st.done = True
        _write_state(out, meta, states)
    manifest = _manifest(out, spec, meta, states, rts)
    manifest["seconds"] = round(time.time() - t0, 3)
    atomic_write_bytes(out / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True, default=str).encode())
    return manifest


def _manifest(out: Path, spec: DatasetSpec, meta: dict, states: dict[str, TableState], rts) -> dict:
    tables = {}
    for name, st in states.items():
        schema = {}
        if st.parts:
            schema = {k: str(v) for k, v in pl.read_parquet_schema(out / st.parts[0]).items()}
        tables[name] = {
            "rows": st.rows, "wanted": _rows_wanted(spec, name, meta["n"]), "candidates": st.candidates,
            "quarantined": st.quarantined, "duplicates_dropped": st.duplicates,
            "surplus_dropped": st.surplus, "resampled": st.resampled,
            "validators": st.validators, "schema": schema,
            "parts": [{"path": p, "sha256": _digest(out / p)} for p in st.parts],
            "quarantine_parts": [{"path": p, "sha256": _digest(out / p)} for p in st.quarantine_parts],
        }
    return {**meta, "name": spec.name, "spec": spec.model_dump(mode="json"), "tables": tables}


def read_quarantine(out: str | Path, table: str) -> pl.DataFrame:
    parts = sorted((Path(out) / "_quarantine" / table).glob("part-*.parquet"))
    return pl.concat([pl.read_parquet(p) for p in parts], how="diagonal_relaxed") if parts else pl.DataFrame()
