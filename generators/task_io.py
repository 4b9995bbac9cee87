"""Reading and writing task datasets (Parquet or JSONL), the one place that knows their on-disk form.

Why JSON strings for nested fields in Parquet: prompts, tool schemas, ground-truth calls and metadata have shapes
that differ between rows and between task families; as JSON text they keep one stable Parquet schema that polars,
pandas, `datasets` and NeMo Gym tooling all read, and they round-trip exactly. Plain datasets (a `prompt` string and
an `answer` column, say) are read as they are: any column a reward names as a keyword argument is passed through.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator

import polars as pl
from pydantic import ValidationError

from schemas.task import TaskRow

NESTED_FIELDS = ("prompt", "tools", "ground_truth_calls", "metadata")


class DatasetError(ValueError):
    """A dataset file is unreadable or a row does not fit the expected shape; the message names file, row and field."""


def _decode(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def iter_jsonl(path: str | Path, error: type[Exception] = None, what: str = "file") -> Iterator[tuple[int, Any]]:
    """(line number, decoded value) for each non-blank line of a JSONL file.

    The one JSONL reader of the studio: a missing file or a line that is not JSON raises `error` (DatasetError by
    default; callers pass their own error type) naming the file and the line.
    """
    error = error or DatasetError
    path = Path(path)
    if not path.is_file():
        raise error(f"{path}: no such {what}")
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield i, json.loads(line)
            except ValueError as exc:
                raise error(f"{path}: line {i} is not valid JSON ({exc})") from exc


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """All rows of a Parquet or JSONL dataset as dicts, nested JSON fields decoded."""
    path = Path(path)
    if not path.exists():
        raise DatasetError(f"{path}: no such dataset file")
    if path.is_dir():
        parts = sorted(path.glob("*.parquet")) or sorted(path.glob("**/*.parquet"))
        if not parts:
            raise DatasetError(f"{path}: folder holds no .parquet files")
        frame = pl.concat([pl.read_parquet(p) for p in parts], how="diagonal_relaxed")
        rows = frame.to_dicts()
    elif path.suffix == ".parquet":
        try:
            rows = pl.read_parquet(path).to_dicts()
        except Exception as exc:  # noqa: BLE001 - polars raises several types for a bad file
            raise DatasetError(f"{path}: not a readable Parquet file ({exc})") from exc
    elif path.suffix in (".jsonl", ".json"):
        rows = [rec for _, rec in iter_jsonl(path, what="dataset file")]
    else:
        raise DatasetError(f"{path}: expected a .parquet file, a folder of them or a .jsonl file")
    for row in rows:
        for key in NESTED_FIELDS:
            if key in row:
                row[key] = _decode(row[key])
    return rows


def record_to_task(row: dict[str, Any], where: str = "") -> TaskRow:
    """Validate one record as a TaskRow; a bare string prompt becomes one user message."""
    data = dict(row)
    if isinstance(data.get("prompt"), str):
        data["prompt"] = [{"role": "user", "content": data["prompt"]}]
    known = set(TaskRow.model_fields)
    extra = {k: v for k, v in data.items() if k not in known}
    data = {k: v for k, v in data.items() if k in known}
    if extra:
        data["metadata"] = {**(data.get("metadata") or {}), **extra}
    if data.get("metadata") is None:
        data["metadata"] = {}
    try:
        return TaskRow.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        raise DatasetError(f"{where}field {loc}: {first['msg']} (got {first.get('input')!r:.80})") from exc


def read_tasks(path: str | Path) -> list[TaskRow]:
    """A task dataset validated row by row; the first bad row is named with its number and field."""
    return [record_to_task(r, where=f"{path}: row {i}: ") for i, r in enumerate(read_records(path))]


def task_to_record(task: TaskRow) -> dict[str, Any]:
    d = task.model_dump(mode="json", exclude_none=False)
    for key in NESTED_FIELDS:
        d[key] = None if d.get(key) is None else json.dumps(d[key], ensure_ascii=False)  # key order kept: a tool schema lists its parameters in the order prompts show them
    return d


def write_tasks(tasks: Iterable[TaskRow], path: str | Path) -> Path:
    """Write tasks atomically as Parquet or JSONL (by suffix); a crash never leaves a half-written file."""
    path = Path(path)
    records = [task_to_record(t) for t in tasks]
    if path.suffix == ".jsonl":
        payload = "".join(
            json.dumps({k: (_decode(v) if k in NESTED_FIELDS else v) for k, v in r.items()}, ensure_ascii=False) + "\n"
            for r in records
        )
        return atomic_write_bytes(path, payload.encode("utf-8"))
    if path.suffix != ".parquet":
        raise DatasetError(f"{path}: expected a .parquet or .jsonl path")
    schema = {"id": pl.Utf8, "split": pl.Utf8, "prompt": pl.Utf8, "tools": pl.Utf8, "answer": pl.Utf8,
              "ground_truth_calls": pl.Utf8, "metadata": pl.Utf8}
    frame = pl.DataFrame(records, schema=schema)
    return atomic_write_parquet(frame, path)


def atomic_write_bytes(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


@contextmanager
def atomic_folder(folder: Path) -> Iterator[Path]:
    """A temporary sibling of `folder` to write a whole folder into (a saved model: weights, tokenizer, manifest),
    put in `folder`'s place only when the block ends without an error. Why: a crash or kill mid-save must leave the
    previous folder, or none, never a half-written one that a later load takes for complete. A directory cannot be
    renamed over a non-empty one, so the previous folder is first renamed aside and deleted after the swap: between
    the two renames (microseconds) neither is at `folder`, and a reader finds it missing rather than mixed."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    tmp.chmod(0o755)
    try:
        yield tmp
        old = None
        if folder.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{folder.name}.old.", dir=folder.parent))
            os.replace(folder, old)  # onto the empty folder just made: atomic on POSIX
        os.replace(tmp, folder)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def atomic_write_parquet(frame: pl.DataFrame, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".parquet", dir=path.parent)
    os.close(fd)
    try:
        frame.write_parquet(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path
