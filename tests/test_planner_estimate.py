"""The cost planner: parameter counts against the real model, workload arithmetic, reductions, and the estimate
checked against a measured tiny GRPO run (within 2x)."""

from __future__ import annotations

import statistics

import pytest

from training.config_io import load_train_config
from training.planner import PlanError, gpu, make_shape, make_workload, model_shape, plan

TINY = "examples/configs/tiny.yaml"


def fast_tokenizer():
    """The embedded tokenizer from its cache checked by size only (the full re-hash costs seconds)."""
    from training.model import ensure_embedded_cache, load_tokenizer

    return load_tokenizer(str(ensure_embedded_cache(full_hash=False)))


def test_param_count_matches_the_real_models():
    from training.policy import build_random_model

    cfg = load_train_config(TINY, check_files=False)
    s = model_shape(cfg)
    real = build_random_model(fast_tokenizer(), cfg.model.architecture)
    assert s.params == sum(p.numel() for p in real.parameters())
    big = model_shape(load_train_config(TINY, check_files=False, overrides={"model": {"name": "default"}}))
    assert abs(big.params - 134_515_008) / 134_515_008 < 0.001  # SmolLM2-135M


def test_workload_and_lora_counts():
    cfg = load_train_config(TINY, check_files=False, overrides={
        "steps": 5, "rollout": {"environment": "workplace", "max_turns": 3, "max_new_tokens": 16,
                                "max_total_tokens": 4096}})
    w = make_workload(cfg, prompt_tokens=100)
    assert (w.prompts_per_step, w.completions_per_step, w.turns, w.tool_calls_per_episode) == (2, 8, 3, 2)
    assert w.sequence_tokens == 100 + 3 * 16 + 2 * 96
    assert w.env_steps_per_step == 16 and w.total_tool_calls == 80 and w.total_generated_tokens == 8 * 3 * 16 * 5
    lora = load_train_config(TINY, check_files=False, overrides={"lora": {"enabled": True, "r": 8}}).lora
    s = make_shape("x", layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16, intermediate=128, vocab=100,
                   tied=True, lora=lora)
    assert s.trainable_params == 2 * 8 * ((64 + 64) * 2 + (64 + 32) * 2)
    with pytest.raises(PlanError, match="unknown GPU 'B9000'"):
        gpu("B9000")


def test_plan_without_probe_has_gpu_time_memory_and_sorted_reductions():
    cfg = load_train_config(TINY, check_files=False, overrides={"model": {"name": "default", "init": "pretrained"},
                                                                "rollout": {"max_new_tokens": 64}})
    rep = plan(cfg, probe=False, gpus=["H100", "T4"])
    e = rep.estimate
    assert [t.target for t in e.time] == ["H100", "T4"]
    assert e.time[0].step_s < e.time[1].step_s
    assert e.memory.weights == e.model.params * 4 and e.memory.optimizer == 2 * e.memory.weights
    assert e.workload.prompt_tokens > 20  # measured on the arithmetic prompts through the chat template
    saves = [r.saves_s for r in rep.reductions]
    assert saves == sorted(saves, reverse=True)
    assert {r.change for r in rep.reductions} >= {"max tokens", "LoRA", "freeze lower layers"}


def test_frozen_lower_layers_shrink_the_backward_and_the_trained_parameters():
    from training.planner import training_flops

    over = {"model": {"name": "default", "init": "pretrained"}}
    full = load_train_config(TINY, check_files=False, overrides=over)
    frozen = load_train_config(TINY, check_files=False, overrides={
        "model": {**over["model"], "freeze_layers": 10, "freeze_embeddings": True}})
    s_full, s_frozen = model_shape(full), model_shape(frozen)
    per_layer = (s_full.params - s_full.vocab * s_full.hidden - s_full.hidden) // s_full.layers
    assert s_frozen.trainable_params == s_full.trainable_params - 10 * per_layer - s_full.vocab * s_full.hidden
    w = make_workload(full, prompt_tokens=100)
    (t_full, _), (t_frozen, _) = training_flops(full, s_full, w), training_flops(frozen, s_frozen, w)
    assert t_frozen / t_full == pytest.approx((1 + 2 * 20 / 30) / 3)  # forward through all 30, backward through 20
    rep = plan(frozen, probe=False, gpus=["H100"])
    assert rep.estimate.memory.optimizer == 2 * 4 * s_frozen.trainable_params
    assert "freeze lower layers" not in {r.change for r in rep.reductions}  # already frozen: not suggested again


def test_estimate_is_within_2x_of_a_measured_tiny_run(tmp_path):
    from training.grpo import GRPOTrainer
    from training.policy import build_random_model

    cfg = load_train_config(TINY, overrides={"steps": 3, "output_dir": str(tmp_path / "run"),
                                             "dynamic_sampling": {"enabled": False},
                                             "checkpoint": {"every": 100}})
    est = plan(cfg, probe_s=4.0).estimate.time[0]
    records: list[dict] = []
    tok = fast_tokenizer()
    model = build_random_model(tok, cfg.model.architecture, seed=cfg.seed)
    GRPOTrainer(cfg, model=model, tokenizer=tok, on_step=records.append).train()
    measured = statistics.mean(r["step_time_s"] for r in records[1:])  # step 1 also pays one-off warm-up
    ratio = measured / est.step_s
    assert 0.5 <= ratio <= 2.0, f"estimated {est.step_s:.2f} s/step, measured {measured:.2f} s/step"


def test_environment_plan_without_its_dataset_uses_the_tool_prompt():
    cfg = load_train_config("examples/configs/workplace.yaml", check_files=False)
    rep = plan(cfg, probe=False, gpus=["H100"])
    w = rep.estimate.workload
    assert w.prompt_tokens > 1000  # 27 tools in the system prompt
    assert w.turns == cfg.rollout.max_turns and w.env_steps_per_step == cfg.batch_size * (cfg.rollout.max_turns - 1)
    assert any("system prompt" in m for m in rep.warnings)
    assert rep.reductions[0].saves_s >= rep.reductions[-1].saves_s


@pytest.mark.parametrize("optim,per_param", [({"optimizer": "adamw"}, 8), ({"optimizer": "adamw-bf16"}, 4),
                                             ({"optimizer": "sgd"}, 0), ({"optimizer": "sgd", "momentum": 0.9}, 4)])
def test_optimizer_memory_is_the_state_the_chosen_optimizer_keeps(optim, per_param):
    """fp32 weights: AdamW keeps two fp32 moments, adamw-bf16 two bf16 ones, SGD nothing or one momentum buffer."""
    cfg = load_train_config(TINY, check_files=False, overrides={"optim": optim})
    rep = plan(cfg, probe=False, gpus=["H100"])
    assert rep.estimate.memory.optimizer == per_param * model_shape(cfg).trainable_params
