"""What `rlvr plan CONFIG` reports: the workload, FLOPs, memory and time of a run, and the reductions."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ModelShape(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    params: int
    trainable_params: int
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied_embeddings: bool
    frozen_layers: int = 0  # model.freeze_layers: no backward pass (and no stored activations) below them


class Workload(BaseModel):
    """Per optimizer step unless named `total_`. Token counts are upper bounds (every completion runs to
    max_new_tokens, every episode to max_turns) unless the probe measured the dataset's prompt length."""

    model_config = ConfigDict(extra="forbid")
    prompts_per_step: int
    completions_per_step: int
    sampled_per_step: int | None = None  # completions the policy generates (guidance replays one per group); None: all
    generation_rounds: int
    prompt_tokens: int
    shared_prefix_tokens: int = 0  # the environment's system prompt: run once per batch, not once per episode
    completion_tokens_per_turn: int
    turns: int
    tool_calls_per_episode: int
    tool_result_tokens: int
    sequence_tokens: int
    rollout_tokens_per_step: int
    generated_tokens_per_step: int
    env_steps_per_step: int
    steps: int
    total_rollout_tokens: int
    total_generated_tokens: int
    total_tool_calls: int
    total_env_steps: int


class Flops(BaseModel):
    model_config = ConfigDict(extra="forbid")
    generation_per_step: float
    training_per_step: float
    reference_per_step: float
    total: float


class Memory(BaseModel):
    """Bytes. `peak_training` = weights + grads + optimizer + activations (+ reference); `peak_generation` = weights +
    KV cache (+ the reference model when kept in memory)."""

    model_config = ConfigDict(extra="forbid")
    weights: int
    gradients: int
    optimizer: int
    activations: int
    logits: int
    kv_cache: int
    reference: int
    peak_training: int
    peak_generation: int


class Timing(BaseModel):
    model_config = ConfigDict(extra="forbid")
    target: str
    generation_s_per_step: float
    training_s_per_step: float
    environment_s_per_step: float
    step_s: float
    total_s: float
    basis: str = ""


class ProbeResult(BaseModel):
    """What the ~10 s measured probe found on this machine (seconds per decode step at two batch sizes, prefill and
    training throughput in FLOP/s, one environment step)."""

    model_config = ConfigDict(extra="forbid")
    seconds: float
    decode_batch: int
    decode_s_per_step_batch: float
    decode_s_per_step_1: float
    prefill_flops_per_s: float
    train_flops_per_s: float
    optimizer_step_s: float
    env_step_s: float
    threads: int
    device: str


class Estimate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: ModelShape
    workload: Workload
    flops: Flops
    memory: Memory
    time: list[Timing] = Field(default_factory=list)


class Reduction(BaseModel):
    model_config = ConfigDict(extra="forbid")
    change: str
    setting: str
    step_s: float
    total_s: float
    saves_s: float
    saves_fraction: float
    peak_memory: int
    note: str = ""


class PlanReport(BaseModel):
    model_config = ConfigDict(extra="forbid")
    config: str
    estimate: Estimate
    probe: ProbeResult | None = None
    reductions: list[Reduction] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
