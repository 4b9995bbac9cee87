"""Keeping the trainer's resident memory close to what it actually holds.

Why: a GRPO step alternates two very different allocation patterns -- generation grows a KV cache by many small
concatenations, the update allocates large activation and logit tensors -- and glibc's allocator, whose mmap
threshold adapts upward after large frees, then serves later large requests from a fragmented heap that never
shrinks. Resident memory creeps up step after step (measured here: about 2.2 GB after one step, 3.2 GB after ten).
Fixing the mmap threshold at 1 MiB makes every large tensor its own mapping, returned to the system when freed,
and `malloc_trim` after each phase hands back what the small-object heap no longer uses.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

M_MMAP_THRESHOLD = -3
_done = False


def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def lean_allocator(threshold: int = 1 << 20) -> bool:
    """Fix glibc's mmap threshold (once per process); False where not glibc."""
    global _done
    libc = _libc()
    if libc is None or not hasattr(libc, "mallopt"):
        return False
    if not _done:
        libc.mallopt(M_MMAP_THRESHOLD, threshold)
        _done = True
    return True


def release_free_memory() -> None:
    """Return freed heap pages to the system (cheap; called between rollout and update)."""
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)
