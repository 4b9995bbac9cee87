"""Length-prefixed pickle frames over pipes: the whole wire format between the parent and sandbox workers.

Why not multiprocessing: the parent needs `select` over raw file descriptors (to notice a hung or dead worker
while others keep working) and workers are plain `python -m` processes whose network namespace and limits are
set before any user code is imported.
"""

from __future__ import annotations

import os
import pickle
import struct
from typing import Any

HEADER = struct.Struct("!I")


def encode(message: Any) -> bytes:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(body)) + body


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def read_exact(fd: int, n: int) -> bytes | None:
    """Blocking read of exactly n bytes; None on EOF."""
    chunks = []
    while n:
        chunk = os.read(fd, n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int) -> Any:
    """Blocking read of one message; None on EOF (the other side is gone)."""
    head = read_exact(fd, HEADER.size)
    if head is None:
        return None
    (length,) = HEADER.unpack(head)
    body = read_exact(fd, length)
    if body is None:
        return None
    return pickle.loads(body)


class FrameBuffer:
    """Accumulates bytes read without blocking and yields complete messages."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def feed(self, data: bytes) -> list[Any]:
        self.buf += data
        out = []
        while len(self.buf) >= HEADER.size:
            (length,) = HEADER.unpack_from(self.buf)
            end = HEADER.size + length
            if len(self.buf) < end:
                break
            out.append(pickle.loads(bytes(self.buf[HEADER.size:end])))
            del self.buf[:end]
        return out
