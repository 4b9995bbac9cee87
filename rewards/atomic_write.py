"""Atomic text writes for reports and exports under rewards/: a temp file in the same folder renamed into place, so
a crash never leaves a half-written report or task file, flushed to disk before the rename so a power cut cannot
leave an empty file under the final name either.

generators.task_io.atomic_write_bytes is the dataset-side twin. They stay two: rewards and generators are peers that
may not import each other, and the one layer both may import (schemas) holds contracts without I/O.)"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write_text(path: str | Path, text: str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path
