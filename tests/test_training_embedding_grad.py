"""The input embedding's row-wise backward (training/embedding_grad.py) gives the stock gradient, dense, with tied and
untied embeddings, over one backward or several accumulated ones."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from training import embedding_grad


def _grads(model: torch.nn.Module, ids: torch.Tensor, micro_batches: int = 1) -> dict[str, torch.Tensor]:
    for part in ids.chunk(micro_batches):
        model(input_ids=part).logits.float().log_softmax(-1)[..., 3].sum().backward()
    return {n: p.grad for n, p in model.named_parameters()}


@pytest.mark.parametrize("tied,micro_batches", [(True, 1), (True, 2), (False, 1), (False, 2)])
def test_gradients_equal_the_stock_embedding(tied, micro_batches):
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=500, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=tied, pad_token_id=0)
    stock = LlamaForCausalLM(cfg)
    rows = copy.deepcopy(stock)
    assert embedding_grad.install(rows)
    ids = torch.randint(0, 500, (4, 9), generator=torch.Generator().manual_seed(1))
    ids[0, :3] = 0  # padding rows get no gradient
    ids[1, 4] = ids[2, 5] = 7  # a token seen twice
    g_stock, g_rows = _grads(stock, ids, micro_batches), _grads(rows, ids, micro_batches)
    for name, g in g_stock.items():
        assert g_rows[name].layout == torch.strided, name
        torch.testing.assert_close(g_rows[name], g, rtol=1e-6, atol=1e-7)
    if not tied:
        assert float(g_rows["model.embed_tokens.weight"][0].abs().sum()) == 0.0


def test_no_gradient_no_change():
    cfg = LlamaConfig(vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=True)
    model = LlamaForCausalLM(cfg)
    assert embedding_grad.install(model)
    ids = torch.randint(0, 50, (2, 4))
    with torch.no_grad():
        out = model(input_ids=ids).logits
    assert not out.requires_grad
