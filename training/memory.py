"""Keeping the trainer's resident memory close to what it actually holds.

Why: a GRPO step alternates two very different allocation patterns -- generation grows a KV cache by many small
concatenations, the update allocates large activation and logit tensors -- and glibc's allocator, whose mmap
threshold adapts upward after large frees, then serves later large requests from a fragmented heap that never
shrinks. Resident memory creeps up step after step (measured here: about 2.2 GB after one step, 3.2 GB after ten).
Fixing the mmap threshold at 1 MiB makes every large tensor its own mapping, returned to the system when freed,
and `malloc_trim` after each phase (and during the backward, every few layers: `release_during_backward`) hands
back what the small-object heap no longer uses. Generation is the exception (`roomy_allocator`): it frees and
allocates the same few-MB tensors at every token, so it keeps them in the heap until it ends.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import resource
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from training.policy import decoder_layers

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
ARENA_MAX = 64  # at least; glibc's own cap is 8 per core: 16 on the 2-core machines, fewer than a run's threads
GLIBC_TRIM_DEFAULT = 128 << 10
ROOMY_MMAP_THRESHOLD = 32 << 20  # glibc's largest (HEAP_MAX_SIZE / 2 on 64-bit)
ROOMY_TRIM_THRESHOLD = 1 << 30
_done = False
_threshold = 0


@functools.lru_cache(maxsize=1)
def _libc():
    """glibc, looked up once (find_library runs ldconfig: 2 ms, too slow for a trim between layers)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def lean_allocator(threshold: int = 1 << 20) -> bool:
    """Fix glibc's mmap threshold (once per process); False where not glibc."""
    global _done, _threshold
    libc = _libc()
    if libc is None or not hasattr(libc, "mallopt"):
        return False
    if not _done:
        libc.mallopt(M_MMAP_THRESHOLD, threshold)
        _done, _threshold = True, threshold
    return True


def glibc_arena_cap() -> int:
    """glibc's own cap on malloc arenas when nothing sets it: 8 per core on 64-bit (it counts the CPUs the
    process may run on, which `os.cpu_count` approximates)."""
    return 8 * (os.cpu_count() or 1)


def enough_arenas(n: int = ARENA_MAX) -> bool:
    """Set glibc's cap on malloc arenas to `n` or glibc's own (8 per core), whichever is higher, so that torch's
    intra-op worker threads keep arenas of their own. Must run before the process has 9 arenas (glibc fixes the
    cap when it makes the 9th); False where not glibc.

    Why: glibc gives each allocating thread its own arena until it has made 8 per core; after that a thread's
    first allocation is handed an arena some other thread already uses. A workplace evaluation starts a dozen
    threads that allocate (the tokenizers' and polars' Rust pools and runtimes), more than 16 arenas allow on 2 cores,
    and an OpenMP worker whose first allocation came later, in the attention backward of the first SFT step,
    ended up sharing the main thread's arena, so the two took turns on its lock. Measured with
    `benchmarks/sft_allocator.py` (`sft_allocator_eval_first.json`, 24 SFT steps after an evaluation of 48 tasks, 2
    threads): 4.8 million voluntary context switches against 3,400 and 1.47x the step time of a process that had
    not evaluated; with this cap, 1.00x. An arena is address space until used, so the cap costs no memory."""
    libc = _libc()
    if libc is None or not hasattr(libc, "mallopt"):
        return False
    return bool(libc.mallopt(M_ARENA_MAX, max(n, glibc_arena_cap())))


@contextmanager
def roomy_allocator() -> Iterator[None]:
    """While generating: large requests served from the heap and freed memory kept there for the next decode
    step; on exit the lean settings come back and the free pages are handed back (`release_free_memory`).
    A no-op unless `lean_allocator` is in force.

    Why: a decode step allocates and frees the same few tensors of a few MB (the logits, the attention's and the
    MLP's intermediates) once per token. Under the lean 1 MiB threshold each of them is a fresh mapping whose
    pages the kernel must fault in and zero, every token: measured on the workplace evaluation (24 episodes,
    SmolLM2-135M, with `generation_autocast`), 30x the page faults and 2.1x the wall time of the same generation
    without it (`benchmarks/generation_allocator.py`). Generation's own peak is far below the update's, which the lean
    settings are for."""
    libc = _libc()
    if not _done or libc is None:
        yield
        return
    libc.mallopt(M_MMAP_THRESHOLD, ROOMY_MMAP_THRESHOLD)
    libc.mallopt(M_TRIM_THRESHOLD, ROOMY_TRIM_THRESHOLD)
    try:
        yield
    finally:
        libc.mallopt(M_MMAP_THRESHOLD, _threshold)
        libc.mallopt(M_TRIM_THRESHOLD, GLIBC_TRIM_DEFAULT)
        release_free_memory()


def release_free_memory() -> None:
    """Return freed heap pages to the system (cheap; called between rollout and update)."""
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)


def release_during_backward(model: Any, every: int = 3) -> int:
    """Hand freed heap pages back at points of the backward where it has just freed activations: when it reaches
    the input of every `every`-th decoder layer and the input embedding. Returns how many modules got the hook.

    Why: the backward frees activations (mostly heap blocks just under the mmap threshold) while it allocates the
    weight gradients (fresh mappings), so without a trim the freed blocks stay resident next to the growing
    gradients, and the embedding's own backward (a dense vocabulary-sized gradient) lands on top of both; measured
    on the GRPO benchmark that made the step's peak 200 MB higher. A trim walks the heap (a few ms); the pages it
    hands back would be handed back at the end of the step anyway (`release_free_memory` in the trainer), so the
    only extra page faults are those of blocks reused before the step ends."""
    get = getattr(model, "get_input_embeddings", None)
    mods = [get()] if callable(get) and get() is not None else []
    mods += (decoder_layers(model) or [])[every::every]
    for m in mods:
        m.register_forward_hook(_trim_when_backward_reaches_output)
    return len(mods)


def _trim_when_backward_reaches_output(_module: Any, _inputs: Any, output: Any) -> None:
    out = output[0] if isinstance(output, (tuple, list)) else output
    if torch.is_grad_enabled() and isinstance(out, torch.Tensor) and out.requires_grad:
        out.register_hook(_trim_hook)


def _trim_hook(grad: Any) -> None:
    release_free_memory()


def rss_mb() -> float:
    """This process's resident memory now, in MiB (0.0 where /proc is unavailable)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return 0.0


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MiB (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                               "fsmblks", "uordblks", "fordblks", "keepcost")]


def heap_free_bytes() -> int | None:
    """Bytes glibc holds free in its heaps (resident until trimmed); None where mallinfo2 is unavailable."""
    libc = _libc()
    fn = getattr(libc, "mallinfo2", None) if libc is not None else None
    if fn is None:
        return None
    fn.restype = _MallInfo2
    return int(fn().fordblks)
