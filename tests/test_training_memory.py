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
