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
