"""Adapters: a studio reward as a TRL reward_funcs entry (one real GRPOTrainer step) and as a NeMo Gym verify
response."""

from __future__ import annotations

import math
import textwrap

import pytest

from rewards import Reward, load_reward
from rewards.adapters import RewardError, nemo_gym_verify, nemo_gym_verify_response, trl_reward_func
from rewards.shaping import ShapedReward, component_signal
from rewards.verifiers import NumericMatch
from schemas import RewardResult


def test_trl_adapter_binds_columns_per_sample_and_logs_components():
    logged = {}
    fn = trl_reward_func(NumericMatch())
    out = fn(prompts=["q1", "q2"], completions=["<answer>4</answer>", "<answer>5</answer>"],
             completion_ids=[[1, 2], [3]], answer=["4", "4"], trainer_state=None,
             log_metric=lambda k, v: logged.__setitem__(k, v))
    assert out == [1.0, 0.0] and fn.__name__ == "numeric_match"
    assert logged["numeric_match/errors"] == 0.0 and logged["numeric_match/passed"] == 0.5
    # chat-format completions (TRL's conversational datasets) are read as their assistant text
    out = fn(prompts=[[{"role": "user", "content": "q"}]],
             completions=[[{"role": "assistant", "content": "<answer>4</answer>"}]], answer=["4"])
    assert out == [1.0]


def test_trl_adapter_never_turns_errors_into_zero():
    def broken(completion, answer):
        raise RuntimeError("oops")

    with pytest.raises(RewardError, match="oops"):
        trl_reward_func(broken, sandbox=False)(prompts=["q"], completions=["a"], answer=["1"])
    fn = trl_reward_func(broken, sandbox=False, on_error="none")
    assert fn(prompts=["q"], completions=["a"], answer=["1"]) == [None]
    assert fn.last_results[0].is_error


def test_nemo_gym_verify_response():
    shaped = ShapedReward(NumericMatch(), [component_signal("format_ok", 0.2, applies_to="fail")], name="math")
    body = nemo_gym_verify(shaped, "<answer>5</answer>", {"answer": "4"},
                           request={"responses_create_params": {"input": "2+2?"}, "response": {"output": []}})
    assert body["reward"] == pytest.approx(0.2 * shaped.weights["format_ok"] / 0.2)
    assert body["reward_components"]["passed"] == 0.0 and body["reward_components"]["format_ok"] == 1.0
    assert body["mask_sample"] is False and body["responses_create_params"] == {"input": "2+2?"}
    assert body["reward_version"].startswith("math@")
    err = nemo_gym_verify_response(RewardResult(score=None, error="Traceback ...", reason="reward raised X"))
    assert err["mask_sample"] is True and err["error"] == "Traceback ..." and err["reward"] == 0.0


def test_real_trl_grpo_step_with_a_studio_reward(tmp_path):
    """One real `trl.GRPOTrainer` step on a tiny random Llama with the embedded SmolLM2 tokenizer; the rewards are
    a built-in verifier (in-process) and a user file reward (in the sandbox)."""
    import torch
    from datasets import Dataset
    from transformers import LlamaConfig, LlamaForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    from training.model import load_tokenizer

    tok = load_tokenizer("default")
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=128,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    model_dir = tmp_path / "tiny"
    LlamaForCausalLM(cfg).save_pretrained(model_dir)
    tok.save_pretrained(model_dir)

    user = tmp_path / "length_reward.py"
    user.write_text(textwrap.dedent("""
        def short_is_better(completion, answer):
            return 1.0 / (1.0 + len(completion))
    """))
    calls = []
    numeric = trl_reward_func(NumericMatch())
    user_fn = trl_reward_func(load_reward(f"{user}:short_is_better"), sandbox=True)

    def spy(*args, **kwargs):
        out = user_fn(*args, **kwargs)
        calls.append(out)
        return out

    spy.__name__ = "short_is_better"
    data = Dataset.from_list([{"prompt": "What is 2+2?", "answer": "4"}, {"prompt": "What is 3+3?", "answer": "6"}])
    args = GRPOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, num_generations=4,
                      max_completion_length=8, max_steps=1, learning_rate=1e-3, use_cpu=True, report_to="none",
                      logging_steps=1, save_strategy="no", bf16=False, seed=0)
    trainer = GRPOTrainer(model=str(model_dir), reward_funcs=[numeric, spy], args=args, train_dataset=data,
                          processing_class=tok)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    assert trainer.state.global_step == 1
    assert len(calls) == 1 and len(calls[0]) == 4 and all(0 < x <= 1 for x in calls[0])
    assert len(numeric.last_results) == 4 and all(not r.is_error for r in numeric.last_results)
    assert all(r.reward_version.startswith("short_is_better@") for r in user_fn.last_results)
    logs = trainer.state.log_history[0]
    assert any(k.startswith("rewards/short_is_better") for k in logs), logs
    assert math.isfinite(logs["loss"])
    # the length reward differs between the 4 random completions of a prompt, so advantages are non-zero
    assert any(not torch.equal(before[n], p) for n, p in trainer.model.named_parameters())
