"""The allocator helpers of training/memory.py: the heap is trimmed during the backward at the input embedding and
every few decoder layers, and nowhere else."""

from __future__ import annotations

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from training import memory


def test_backward_trims_at_the_embedding_and_every_few_layers(monkeypatch):
    calls = []
    monkeypatch.setattr(memory, "release_free_memory", lambda: calls.append(1))
    cfg = LlamaConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=7,
                      num_attention_heads=4, num_key_value_heads=2)
    model = LlamaForCausalLM(cfg)
    assert memory.release_during_backward(model, every=3) == 3  # the embedding, layers 3 and 6
    ids = torch.randint(0, 300, (2, 5))
    with torch.no_grad():
        model(input_ids=ids)
    assert calls == []  # no backward, no hook
    model(input_ids=ids).logits.sum().backward()
    assert len(calls) == 3


def test_heap_free_bytes_and_release_are_safe_to_call():
    free = memory.heap_free_bytes()
    assert free is None or free >= 0
    memory.release_free_memory()
    assert memory.lean_allocator() in (True, False)


ROOMY_SCRIPT = """
import resource, sys, torch
sys.path.insert(0, sys.argv[1])
from training import memory

def faults(n=20, numel=2_000_000):  # allocate, touch and free an 8 MB tensor n times (a decode step's logits)
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(n):
        t = torch.empty(numel)
        t.fill_(1.0)
        del t
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0

torch.set_num_threads(1)  # one allocating thread: the heap settles after a few blocks
if not memory.lean_allocator():
    print("skip")
    sys.exit()
lean = faults()
with memory.roomy_allocator():
    faults(10)  # the heap grows and settles
    roomy = faults()
# after: 24 MB blocks, larger than any free block the heap kept, so the restored 1 MiB threshold decides
print(lean, roomy, faults(numel=6_000_000))
"""


def test_roomy_allocator_reuses_blocks_while_generating_and_restores_the_lean_settings():
    """In a fresh process, as in the trainer's: the allocator's state (free heap blocks) is per process."""
    import subprocess
    import sys
    from pathlib import Path

    import pytest

    out = subprocess.run([sys.executable, "-c", ROOMY_SCRIPT, str(Path(__file__).resolve().parents[1])],
                         capture_output=True, text=True, check=True).stdout.split()
    if out == ["skip"]:
        pytest.skip("glibc's mallopt is not available here")
    lean, roomy, after = map(int, out)
    assert lean > 20 * 1000  # every block is a fresh mapping: 1953 new pages each
    assert roomy * 20 < lean  # the same block comes back from the heap, already resident
    assert after > 20 * 5000  # the lean threshold is back for the update: 5859 new pages per block


ARENA_SCRIPT = """
import ctypes, sys, threading
sys.path.insert(0, sys.argv[1])
from training import memory
from training.model import configure_threads

libc = memory._libc()
if libc is None or not hasattr(libc, "malloc_info"):
    print("skip")
    sys.exit()
if sys.argv[2] == "configured":
    configure_threads(1)  # what every entry point calls first
n = int(sys.argv[3])
barrier = threading.Barrier(n + 1)
held = []

def allocate():  # a thread's first malloc picks its arena; all stay alive, so none is handed back for reuse
    held.append(libc.malloc(64))
    barrier.wait()
    barrier.wait()

threads = [threading.Thread(target=allocate) for _ in range(n)]
for t in threads:
    t.start()
barrier.wait()
libc.fopen.restype = ctypes.c_void_p
path = sys.argv[4]
fp = libc.fopen(path.encode(), b"w")
libc.malloc_info(0, ctypes.c_void_p(fp))
libc.fclose(ctypes.c_void_p(fp))
barrier.wait()
for t in threads:
    t.join()
print(open(path).read().count("<heap nr="))
"""


def test_configured_processes_give_each_allocating_thread_its_own_arena(tmp_path):
    """glibc's own cap (8 arenas per core) makes later threads share arenas, which made SFT 1.47x slower
    after an in-process evaluation (benchmarks/sft_allocator.py); `configure_threads` raises it."""
    import subprocess
    import sys
    from pathlib import Path

    import pytest

    n = memory.glibc_arena_cap() + 8  # more allocating threads than glibc's own cap allows arenas
    if n + 1 > memory.ARENA_MAX:
        pytest.skip(f"glibc's own cap is already {memory.glibc_arena_cap()} arenas here")
    root = str(Path(__file__).resolve().parents[1])

    def arenas(mode: str) -> int | None:
        info = str(tmp_path / f"{mode}.xml")  # malloc_info's report
        out = subprocess.run([sys.executable, "-c", ARENA_SCRIPT, root, mode, str(n), info], capture_output=True,
                             text=True, check=True).stdout.split()
        return None if out == ["skip"] else int(out[-1])

    default, configured = arenas("default"), arenas("configured")
    if default is None:
        pytest.skip("not glibc")
    assert default < n + 1  # glibc's cap (8 per CPU it may run on): some threads share an arena
    assert configured == n + 1  # the main thread's and one per thread
