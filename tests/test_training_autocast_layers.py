"""The bf16-autocast layers of training/autocast_layers.py compute what the stock layers compute under autocast
(values and gradients) while autograd keeps much less for the backward."""

from __future__ import annotations

import copy
import types
from pathlib import Path

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from training import autocast_layers


def _pair(seed: int = 0) -> tuple[torch.nn.Module, torch.nn.Module]:
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=1000, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
    stock = LlamaForCausalLM(cfg)
    lean = copy.deepcopy(stock)
    counts = autocast_layers.install(lean)
    assert counts == {"mlp": 2, "rmsnorm": 5, "linear": 9}  # 4 attention projections x 2 layers + the LM head
    return stock, lean


def _loss_and_grads(model: torch.nn.Module, ids: torch.Tensor, autocast: bool = True):
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        logits = model(input_ids=ids).logits
    loss = logits.float().log_softmax(-1)[..., 5].sum()
    loss.backward()
    return logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


def _rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


@pytest.mark.parametrize("layer", ["mlp", "rmsnorm", "linear"])
def test_each_layer_equals_the_stock_layer_to_the_bit(layer):
    stock, lean = _pair()
    pick = {"mlp": lambda m: m.model.layers[0].mlp, "rmsnorm": lambda m: m.model.layers[0].post_attention_layernorm,
            "linear": lambda m: m.model.layers[0].self_attn.q_proj}[layer]
    x = torch.randn(3, 11, 64, generator=torch.Generator().manual_seed(1))
    outs = []
    for m in (stock, lean):
        xi = x.clone().requires_grad_(True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = pick(m)(xi * 1.0)  # a layer's input is never a leaf (autocast caches casts of leaves only)
        (y.float() * torch.linspace(-1, 1, y.shape[-1])).sum().backward()
        outs.append((y.detach(), xi.grad, [p.grad for p in pick(m).parameters()]))
    (y_s, gx_s, gw_s), (y_l, gx_l, gw_l) = outs
    assert y_s.dtype == y_l.dtype and torch.equal(y_s, y_l)
    assert torch.equal(gx_s, gx_l)
    assert all(torch.equal(a, b) for a, b in zip(gw_s, gw_l))


def test_whole_model_values_equal_and_gradients_agree_under_autocast():
    """Forward values are equal to the bit. Gradients of a tensor read by the residual and by a norm are summed in
    another order (fp32, last bit), which can flip a later bf16 rounding: agreement is to bf16 precision."""
    stock, lean = _pair()
    ids = torch.randint(0, 1000, (3, 17), generator=torch.Generator().manual_seed(1))
    out_s, grads_s = _loss_and_grads(stock, ids)
    out_l, grads_l = _loss_and_grads(lean, ids)
    assert out_l.dtype == torch.bfloat16 and torch.equal(out_s, out_l)
    for name, g in grads_s.items():
        assert _rel_err(grads_l[name], g) < 2e-3, name


@pytest.mark.parametrize("autocast", [False, True])
def test_stock_forward_runs_without_autocast_or_without_gradients(autocast):
    stock, lean = _pair()
    ids = torch.randint(0, 1000, (2, 9), generator=torch.Generator().manual_seed(2))
    if not autocast:
        out_s, grads_s = _loss_and_grads(stock, ids, autocast=False)
        out_l, grads_l = _loss_and_grads(lean, ids, autocast=False)
        assert out_l.dtype == torch.float32 and torch.equal(out_s, out_l)
        assert all(torch.equal(grads_l[n], g) for n, g in grads_s.items())
        return
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.equal(stock(input_ids=ids).logits, lean(input_ids=ids).logits)


def _saved_bytes(model: torch.nn.Module, ids: torch.Tensor) -> tuple[int, int]:
    """(bytes autograd keeps for the backward outside the parameters, bytes of those that are bf16 weight casts)."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    weight_shapes = {tuple(p.shape) for p in model.parameters() if p.dim() == 2}
    seen: dict[int, tuple[int, bool]] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        st = t.untyped_storage()
        if st.data_ptr() not in params:
            is_cast = t.dtype == torch.bfloat16 and (tuple(t.shape) in weight_shapes or tuple(t.shape[::-1]) in weight_shapes)
            seen[st.data_ptr()] = (st.nbytes(), is_cast)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), torch.autocast("cpu", dtype=torch.bfloat16):
        model(input_ids=ids).logits.float().sum().backward()
    return sum(b for b, _ in seen.values()), sum(b for b, c in seen.values() if c)


def test_autograd_keeps_no_weight_copies_and_far_less_activation_memory():
    stock, lean = _pair()
    ids = torch.randint(0, 1000, (4, 64), generator=torch.Generator().manual_seed(3))
    total_s, casts_s = _saved_bytes(stock, ids)
    total_l, casts_l = _saved_bytes(lean, ids)
    assert casts_s > 0 and casts_l == 0
    assert total_l < 0.6 * total_s, (total_l, total_s)


def test_shared_prompt_logprobs_through_the_trainer_path_match():
    """The GRPO update's forward (shared prompts, chunked LM head under checkpointing) gives the same log-probs and
    gradients; a weight read by both the prompt and the completion pass now sums its two bf16 gradients in fp32
    (stock autocast summed them in bf16, through its one cached cast), hence the bf16-sized tolerance."""
    from training.logprobs import shared_prompt_logprobs

    stock, lean = _pair(seed=4)
    g = torch.Generator().manual_seed(5)
    p_ids, p_mask = torch.randint(0, 1000, (2, 7), generator=g), torch.ones(2, 7, dtype=torch.long)
    comp, cmask = torch.randint(0, 1000, (6, 5), generator=g), torch.ones(6, 5, dtype=torch.long)
    res = []
    for m in (stock, lean):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            lp, _ = shared_prompt_logprobs(m, p_ids, p_mask, comp, cmask, 3, 0.9)
        lp.sum().backward()
        res.append((lp.detach(), {n: p.grad for n, p in m.named_parameters()}))
    assert torch.equal(res[1][0], res[0][0])
    for name, gs in res[0][1].items():
        assert _rel_err(res[1][1][name], gs) < 5e-3, name


def test_lean_grpo_step_matches_the_stock_autocast_step(tmp_path, monkeypatch):
    """One GRPO step of the tiny config in bf16 autocast with bf16 Adam moments, with and without the layers: the
    rollouts and the loss are the same to the bit (the forward is), the gradient agrees to bf16 precision."""
    import yaml

    from training.config_io import parse_train_config
    from training.grpo import GRPOTrainer

    root = Path(__file__).resolve().parents[1]
    data = yaml.safe_load((root / "examples" / "configs" / "tiny.yaml").read_text())
    data.update(steps=1, checkpoint={"every": 100})
    data["data"]["path"] = str(root / "examples" / "arithmetic" / "tasks.jsonl")
    data["reward"]["function"] = str(root / "examples" / "arithmetic" / "reward.py") + ":letter_share"
    data["model"]["precision"] = "bf16-autocast"
    data["optim"]["optimizer"] = "adamw-bf16"
    data["dynamic_sampling"] = {"enabled": False}
    records = {}
    for lean in (False, True):
        if not lean:
            monkeypatch.setattr(autocast_layers, "install", lambda model: {})
        else:
            monkeypatch.undo()
        cfg = parse_train_config({**data, "output_dir": str(tmp_path / f"run-{lean}")})
        trainer = GRPOTrainer(cfg)
        trainer.save = lambda: None
        records[lean] = trainer.train().last
        routed = sum(isinstance(m.forward, types.MethodType) and "forward" in m.__dict__
                     and not isinstance(m, torch.nn.Embedding) for m in trainer.model.modules())
        assert routed == (16 if lean else 0)  # 2 MLPs, 5 norms, 8 attention projections, the LM head
    stock, lean = records[False], records[True]
    assert lean["completion_len_mean"] == stock["completion_len_mean"]
    assert lean["loss"] == stock["loss"] and lean["entropy"] == stock["entropy"]
    assert abs(lean["grad_norm"] - stock["grad_norm"]) <= 2e-3 * stock["grad_norm"]
