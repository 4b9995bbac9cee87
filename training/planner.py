"""The cost planner: what a run will cost before it starts, and which change saves most.

From a TrainConfig it derives the workload (rollout tokens, turns, tool calls, environment steps), the FLOPs of
generation, training and the reference model, and the memory of weights, gradients, optimizer state, activations,
logits and KV cache. Time comes from two sources:

- this machine: a ~10 s measured probe on the configured model (decode-step latency at the rollout batch size and
  at batch 1, prefill and training throughput in FLOP/s, one AdamW step, one environment step). Small models on
  CPUs are dominated by per-step overheads that FLOP counts miss, so decode is modelled as a measured per-step
  latency `a + b * batch`, and only prefill/training scale by FLOPs;
- a named GPU: its dense bf16 FLOP/s and memory bandwidth (decode is bandwidth-bound: every step reads the weights
  and the KV cache; training is compute-bound at a typical utilisation).

Token counts are upper bounds (every completion runs to max_new_tokens, every episode to max_turns), which is what
a random-initialised model does and what a budget must assume. Reductions are re-estimated with the same probe and
sorted by the time they save.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from schemas.plan import (
    Estimate, Flops, Memory, ModelShape, PlanReport, ProbeResult, Reduction, Timing, Workload,
)
from schemas.train_config import TrainConfig


@dataclass(frozen=True)
class GPU:
    name: str
    bf16_flops: float  # dense, per second
    bandwidth: float  # bytes per second
    memory: float  # bytes


GPUS: dict[str, GPU] = {g.name.lower(): g for g in [
    GPU("H200", 989e12, 4.8e12, 141e9),
    GPU("H100", 989e12, 3.35e12, 80e9),
    GPU("A100-80GB", 312e12, 2.04e12, 80e9),
    GPU("A100-40GB", 312e12, 1.56e12, 40e9),
    GPU("L40S", 362e12, 0.864e12, 48e9),
    GPU("L4", 121e12, 0.30e12, 24e9),
    GPU("A10G", 70e12, 0.60e12, 24e9),
    GPU("RTX4090", 165e12, 1.008e12, 24e9),
    GPU("T4", 65e12, 0.32e12, 16e9),
]}
GPU_TRAIN_MFU = 0.35  # typical utilisation of dense bf16 FLOP/s by a training step of a small model
GPU_PREFILL_MFU = 0.4
GPU_STEP_OVERHEAD_S = {"transformers": 0.012, "vllm": 0.004}  # per decode step: kernel launches, sampling, Python
DEFAULT_PROMPT_TOKENS = 128
TOOL_RESULT_TOKENS = 96  # per tool call: a JSON result of a search/read tool, rendered in a tool message
DISK_BYTES_PER_S = 300e6


class PlanError(ValueError):
    """The planner cannot estimate this config (unknown GPU, unreadable model config)."""


def gpu(name: str) -> GPU:
    key = name.lower().replace(" ", "").replace("_", "-")
    for k, g in GPUS.items():
        if key == k or key == k.replace("-", ""):
            return g
    raise PlanError(f"unknown GPU {name!r}; known: {', '.join(g.name for g in GPUS.values())}")


def _bytes_per_param(dtype: str) -> int:
    return 2 if dtype in ("bfloat16", "float16") else 4


# ------------------------------------------------------------------------------------------------- model shape

def _local(name: str) -> str:
    """The embedded model's cache folder checked by sizes only (a full re-hash of its 540 MB costs seconds per
    call and the planner reads it three times); any other name as given."""
    from training.model import DEFAULT_MODEL, EMBEDDED_NAME, ensure_embedded_cache

    if name in (DEFAULT_MODEL, EMBEDDED_NAME, "embedded"):
        return str(ensure_embedded_cache(full_hash=False))
    return name


def _tokenizer(name: str) -> Any:
    from training.model import load_tokenizer

    return load_tokenizer(_local(name))


def shape_from_hf_config(name: str, c: Any, lora: Any | None = None, model: Any | None = None) -> ModelShape:
    h = int(c.hidden_size)
    heads = int(c.num_attention_heads)
    kv = int(getattr(c, "num_key_value_heads", None) or heads)
    d = int(getattr(c, "head_dim", None) or h // heads)
    inter = int(getattr(c, "intermediate_size", 4 * h))
    layers = int(c.num_hidden_layers)
    vocab = int(c.vocab_size)
    tied = bool(getattr(c, "tie_word_embeddings", True))
    return make_shape(name, layers=layers, hidden=h, heads=heads, kv_heads=kv, head_dim=d, intermediate=inter,
                      vocab=vocab, tied=tied, lora=lora, model=model)


def make_shape(name: str, *, layers: int, hidden: int, heads: int, kv_heads: int, head_dim: int, intermediate: int,
               vocab: int, tied: bool, lora: Any | None = None, model: Any | None = None) -> ModelShape:
    """Parameter counts of a Llama-style decoder (what SmolLM2 and the random-init tiny model are); `model` (a
    ModelSection) says which of them full fine-tuning keeps frozen."""
    h, d = hidden, head_dim
    attn = h * heads * d * 2 + h * kv_heads * d * 2  # q, o and k, v projections
    mlp = 3 * h * intermediate
    per_layer = attn + mlp + 2 * h
    params = vocab * h + layers * per_layer + h + (0 if tied else vocab * h)
    frozen = min(int(getattr(model, "freeze_layers", 0) or 0), layers - 1)
    trainable = params - frozen * per_layer - (vocab * h if getattr(model, "freeze_embeddings", False) else 0)
    if lora is not None and getattr(lora, "enabled", False):
        dims = {"q_proj": (h, heads * d), "k_proj": (h, kv_heads * d), "v_proj": (h, kv_heads * d),
                "o_proj": (heads * d, h), "gate_proj": (h, intermediate), "up_proj": (h, intermediate),
                "down_proj": (intermediate, h)}
        trainable = layers * sum(lora.r * (i + o) for m, (i, o) in dims.items() if m in lora.target_modules)
    return ModelShape(name=name, params=params, trainable_params=trainable, layers=layers, hidden=h, heads=heads,
                      kv_heads=kv_heads, head_dim=d, intermediate=intermediate, vocab=vocab, tied_embeddings=tied,
                      frozen_layers=frozen)


def model_shape(cfg: TrainConfig) -> ModelShape:
    """The configured model's shape without loading its weights (config.json, or the random architecture)."""
    if cfg.model.init == "random":
        from training.policy import TINY_ARCHITECTURE

        arch = {**TINY_ARCHITECTURE, **cfg.model.architecture}
        vocab = len(_tokenizer(cfg.model.tokenizer or "default"))

        class _C:  # the fields LlamaConfig would hold
            pass

        c = _C()
        for k, v in arch.items():
            setattr(c, k, v)
        c.vocab_size = vocab
        return shape_from_hf_config(f"random {arch}", c, cfg.lora, cfg.model)
    from transformers import AutoConfig

    from training.model import resolve_model_path

    path, gguf = resolve_model_path(_local(cfg.model.name))
    if gguf:
        raise PlanError(f"{cfg.model.name}: plan a GGUF model from its de-quantised folder (its config.json)")
    try:
        c = AutoConfig.from_pretrained(path)
    except OSError as exc:
        raise PlanError(f"cannot read the model config of {cfg.model.name!r} ({exc})") from exc
    return shape_from_hf_config(cfg.model.name, c, cfg.lora, cfg.model)


def measure_prompt_tokens(cfg: TrainConfig, limit: int = 64) -> int | None:
    """Mean prompt length in tokens over the first `limit` training tasks, rendered as the trainer renders them
    (for tool environments: with the tool list in the system prompt). None when the dataset cannot be read."""
    try:
        from generators.task_io import read_tasks

        tasks = [t for t in read_tasks(cfg.data.path) if cfg.data.split in (None, t.split)][:limit]
        tok = _tokenizer((cfg.model.tokenizer or "default") if cfg.model.init == "random" else cfg.model.name)
    except Exception:  # noqa: BLE001 - the estimate falls back to a default and says so
        return None
    if not tasks:
        return None
    lengths = []
    for t in tasks:
        msgs = [{"role": m.role, "content": m.content} for m in t.prompt]
        if cfg.rollout.system_prompt and not any(m["role"] == "system" for m in msgs):
            msgs = [{"role": "system", "content": cfg.rollout.system_prompt}] + msgs
        if cfg.rollout.environment and t.tools:
            from schemas.tool_prompt import render_system_prompt

            ctx = "\n".join(m["content"] for m in msgs if m["role"] == "system")
            msgs = [{"role": "system", "content": render_system_prompt(t.tools, context=ctx)}] + [
                m for m in msgs if m["role"] != "system"]
        ids = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        lengths.append(len(ids))
    return int(round(sum(lengths) / len(lengths)))


def environment_prefix_tokens(cfg: TrainConfig) -> int:
    """Tokens of the environment's system prompt (the same for every task: the trainer runs it once per batch)."""
    total = environment_prompt_tokens(cfg)
    return max(0, total - 40 - 8) if total else 0  # less the request and the user/assistant headers


def environment_prompt_tokens(cfg: TrainConfig) -> int | None:
    """Without a dataset: the workplace system prompt (context + tool instructions + the 27 tools) as the trainer
    renders it, plus a typical request; None for other environments."""
    if cfg.rollout.environment != "workplace":
        return None
    try:
        from schemas.tool_prompt import render_system_prompt
        from schemas.workplace import tool_specs

        tok = _tokenizer((cfg.model.tokenizer or "default") if cfg.model.init == "random" else cfg.model.name)
        system = render_system_prompt(tool_specs(), context="Today is Thursday, 2026-05-14 17:00:00.")
        ids = tok.apply_chat_template([{"role": "system", "content": system}, {"role": "user", "content": "x"}],
                                      add_generation_prompt=True, tokenize=True)
        if hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return len(ids) + 40
    except Exception:  # noqa: BLE001 - the caller falls back to the default and says so
        return None


# ---------------------------------------------------------------------------------------------------- workload

def make_workload(cfg: TrainConfig, prompt_tokens: int, rounds: int = 1, shared_prefix: int = 0) -> Workload:
    g = cfg.rollout.num_generations
    b = cfg.batch_size
    c = cfg.rollout.max_new_tokens
    env = bool(cfg.rollout.environment)
    turns = cfg.rollout.max_turns if env else 1
    calls = max(0, turns - 1) if env else 0
    seq = prompt_tokens + turns * c + calls * TOOL_RESULT_TOKENS
    if env:
        seq = min(seq, max(cfg.rollout.max_total_tokens, prompt_tokens + c))
    sampled = b - (b // g if cfg.guidance.demonstrations else 0)  # a replayed demonstration is not generated
    rollout = b * seq * rounds
    generated = sampled * turns * c * rounds
    env_steps = b * calls * rounds
    return Workload(
        prompts_per_step=b // g, completions_per_step=b, sampled_per_step=sampled, generation_rounds=rounds, prompt_tokens=prompt_tokens,
        shared_prefix_tokens=min(shared_prefix, prompt_tokens), completion_tokens_per_turn=c, turns=turns, tool_calls_per_episode=calls, tool_result_tokens=TOOL_RESULT_TOKENS,
        sequence_tokens=seq, rollout_tokens_per_step=rollout, generated_tokens_per_step=generated,
        env_steps_per_step=env_steps, steps=cfg.steps, total_rollout_tokens=rollout * cfg.steps,
        total_generated_tokens=generated * cfg.steps, total_tool_calls=env_steps * cfg.steps,
        total_env_steps=env_steps * cfg.steps,
    )


def _body_params(s: ModelShape) -> int:
    """Parameters that every token passes through (everything but the embedding table and the LM head)."""
    return s.params - s.vocab * s.hidden * (1 if s.tied_embeddings else 2)


def forward_flops(s: ModelShape, tokens: float, context: float, head_tokens: float) -> float:
    """Forward FLOPs: 2 per body parameter per token, attention over `context` keys, the LM head on `head_tokens`."""
    attn = 4 * s.layers * s.heads * s.head_dim * context
    return tokens * (2 * _body_params(s) + attn) + head_tokens * 2 * s.hidden * s.vocab


def turn_contexts(w: Workload) -> list[int]:
    """Context length at the start of each turn (the loop re-renders the conversation each turn)."""
    return [w.prompt_tokens + t * (w.completion_tokens_per_turn + TOOL_RESULT_TOKENS) for t in range(w.turns)]


def generation_flops(s: ModelShape, w: Workload) -> tuple[float, float]:
    """(prefill, decode) FLOPs per step."""
    r = w.generation_rounds
    b, c = (w.sampled_per_step or w.completions_per_step) * r, w.completion_tokens_per_turn
    groups = w.prompts_per_step * r
    p = w.shared_prefix_tokens
    prefill = decode = 0.0
    for t, ctx in enumerate(turn_contexts(w)):
        # the batch-shared prefix once per round; the first turn's prompt once per group (its cache is repeated
        # for the group's completions); later turns' contexts differ per episode
        prefill += r * forward_flops(s, p, p / 2, 0)
        own = groups if t == 0 else b
        prefill += own * forward_flops(s, ctx - p, ctx / 2, 1)
        decode += b * forward_flops(s, c, ctx + c / 2, c)
    return prefill, decode


def training_flops(cfg: TrainConfig, s: ModelShape, w: Workload) -> tuple[float, float]:
    """(policy update, reference forward) FLOPs per step: forward + backward (2x forward; LoRA skips the weight
    gradients of frozen layers: ~1x; frozen lower layers get no backward at all), the LM head only on completion
    positions, times num_iterations."""
    seqs = w.completions_per_step
    completion = w.turns * w.completion_tokens_per_turn
    # the loss forward shares as the rollout does: the batch prefix once, each group's prompt once, then every
    # completion (and, multi-turn, its tool results) per sequence
    p, prompt = w.shared_prefix_tokens, w.prompt_tokens
    fwd = (forward_flops(s, p, p / 2, 0) + w.prompts_per_step * forward_flops(s, prompt - p, prompt / 2, 0)
           + seqs * forward_flops(s, w.sequence_tokens - prompt, (w.sequence_tokens + prompt) / 2, completion))
    policy = fwd * update_factor(cfg, s) * cfg.optim.num_iterations
    ref = fwd if cfg.loss.resolved()["beta"] > 0 else 0.0
    return policy, ref


def trained_depth(s: ModelShape) -> float:
    """The share of the layers the backward pass runs through (all but the frozen lower ones)."""
    return (s.layers - s.frozen_layers) / s.layers


def update_factor(cfg: TrainConfig, s: ModelShape) -> float:
    """FLOPs of forward + backward in units of the forward: the backward is 2x (weights and activations), 1x with
    LoRA (no weight gradients), and only through the trained layers."""
    return 1.0 + (1.0 if cfg.lora.enabled else 2.0) * trained_depth(s)


def _optimizer_bytes_per_param(cfg: TrainConfig, param_bytes: int) -> int:
    """AdamW's two moments (bf16 in adamw-bf16), SGD's momentum buffer if it has one."""
    if cfg.optim.optimizer == "sgd":
        return param_bytes if cfg.optim.momentum else 0
    return 2 * (2 if cfg.optim.optimizer == "adamw-bf16" else param_bytes)


def memory(cfg: TrainConfig, s: ModelShape, w: Workload) -> Memory:
    bp = _bytes_per_param(cfg.model.dtype)
    weights = s.params * bp
    grads = s.trainable_params * bp
    optim = s.trainable_params * _optimizer_bytes_per_param(cfg, bp)
    mb = cfg.optim.micro_batch_size or w.completions_per_step
    tokens = mb * w.sequence_tokens
    if cfg.model.gradient_checkpointing:
        acts = tokens * s.layers * s.hidden * bp * 2 + tokens * 34 * s.hidden * bp // 2
    else:  # ~34 h values per token per layer (Korthikanti et al.), SDPA attention (no s^2 probabilities stored)
        acts = tokens * s.layers * 34 * s.hidden * bp // 2
    acts = int(acts * trained_depth(s))  # frozen lower layers keep no activations for a backward pass
    completion = w.turns * w.completion_tokens_per_turn
    logits = mb * completion * s.vocab * 4 * 2  # float32 logits and their gradient, completion positions only
    kv = 2 * s.layers * s.kv_heads * s.head_dim * bp * w.completions_per_step * w.sequence_tokens
    ref = weights if cfg.loss.resolved()["beta"] > 0 and not cfg.lora.enabled else 0
    return Memory(weights=weights, gradients=grads, optimizer=optim, activations=acts, logits=logits, kv_cache=kv,
                  reference=ref, peak_training=weights + grads + optim + acts + logits + ref,
                  peak_generation=weights + kv + ref)


# ------------------------------------------------------------------------------------------------------ probe

def run_probe(cfg: TrainConfig, shape: ModelShape, prompt_tokens: int, budget_s: float = 10.0,
              model: Any | None = None) -> ProbeResult:
    """Measure this machine on the configured model for about `budget_s` seconds (after loading it)."""
    import torch

    from training.model import configure_threads, pick_device
    from training.policy import apply_lora, build_random_model, freeze, load_policy

    threads = configure_threads(cfg.threads)
    if model is None:
        if cfg.model.init == "random":
            model = build_random_model(_tokenizer(cfg.model.tokenizer or "default"), cfg.model.architecture,
                                       seed=cfg.seed)
            model.to(device=pick_device(cfg.model.device), dtype=getattr(torch, cfg.model.dtype))
            freeze(model, cfg.model)
        else:
            section = cfg.model.model_copy(update={"name": _local(cfg.model.name)})
            model, _ = load_policy(section, seed=cfg.seed, threads=cfg.threads)
        model = apply_lora(model, cfg.lora)
    device = next(model.parameters()).device
    b = cfg.batch_size
    c = cfg.rollout.max_new_tokens
    gen = torch.Generator().manual_seed(0)
    draw = torch.Generator(device=device).manual_seed(0)  # the sampler's draws happen where the logits are
    t_start = time.perf_counter()

    def rand_ids(rows: int, length: int) -> Any:
        return torch.randint(100, min(shape.vocab, 30000), (rows, length), generator=gen).to(device)

    model.eval()
    with torch.no_grad():
        model(rand_ids(1, 8))  # warm-up: first-call allocations are not part of any step

        def decode(rows: int, share: float) -> tuple[float, float]:
            """(prefill seconds, seconds per decode step) at `rows` rows: the sampler's per-step work (a cached
            forward of one token per row, softmax, multinomial draw) timed directly, step by step."""
            from transformers import DynamicCache

            from training.logprobs import model_forward

            ids = rand_ids(rows, prompt_tokens)
            cache = DynamicCache()
            t0 = time.perf_counter()
            out = model_forward(model, input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1)
            prefill = time.perf_counter() - t0
            steps, t1 = 0, time.perf_counter()
            while steps < c and (steps < 3 or time.perf_counter() - t1 < budget_s * share):
                probs = torch.softmax(out.logits[:, -1, :].float(), dim=-1)
                nxt = torch.multinomial(probs, 1, generator=draw)
                out = model_forward(model, input_ids=nxt, cache=cache, use_cache=True)
                steps += 1
            return prefill, (time.perf_counter() - t1) / steps

        prefill_b, step_b = decode(b, 0.25)
        # batch 1 only while the budget lasts; without it decode time is taken as flat in the batch size
        enough = time.perf_counter() - t_start < budget_s * 0.45
        _, step_1 = decode(1, 0.1) if b > 1 and enough else (prefill_b, step_b)
    prefill_rate = b * forward_flops(shape, prompt_tokens, prompt_tokens / 2, 1) / max(prefill_b, 1e-6)

    model.train()
    # FLOP/s measured on up to 2 sequences: per-token throughput, cheap enough for the 10 s budget on a 135M model
    mb = min(2, cfg.optim.micro_batch_size or b)
    seq = min(prompt_tokens + c, 4096)
    params = [p for p in model.parameters() if p.requires_grad]
    n, t_train = 0, 0.0
    while n < 1 or (time.perf_counter() - t_start < budget_s * 0.85 and n < 20):
        ids = rand_ids(mb, seq)
        t0 = time.perf_counter()
        out = model(ids, logits_to_keep=c + 1)
        logits = out.logits.float()
        loss = (logits.logsumexp(-1) - logits[..., 0]).mean()
        loss.backward()
        t_train += time.perf_counter() - t0
        n += 1
    flops = mb * forward_flops(shape, seq, seq / 2, c) * update_factor(cfg, shape)
    train_rate = flops / (t_train / n)
    opt = torch.optim.AdamW(params, lr=1e-9, foreach=False)
    t0 = time.perf_counter()
    opt.step()  # the first step also allocates the moment buffers, as the trainer's first step does
    opt_s = time.perf_counter() - t0
    model.zero_grad(set_to_none=True)
    del opt
    env_s = probe_environment(cfg)
    return ProbeResult(seconds=round(time.perf_counter() - t_start, 2), decode_batch=b,
                       decode_s_per_step_batch=step_b, decode_s_per_step_1=step_1, prefill_flops_per_s=prefill_rate,
                       train_flops_per_s=train_rate, optimizer_step_s=opt_s, env_step_s=env_s, threads=threads,
                       device=str(device))


def probe_environment(cfg: TrainConfig, calls: int = 20) -> float:
    """Seconds per tool call in the configured environment (0 without one)."""
    if not cfg.rollout.environment:
        return 0.0
    if cfg.rollout.environment != "workplace":
        return 0.002
    from rewards.environments.workplace import WorkplaceEnv
    from schemas.messages import ToolCall
    from schemas.task import TaskRow
    from training.eval_environment import workplace_world

    env = WorkplaceEnv(workplace_world())
    env.reset(TaskRow(id="probe", prompt=[{"role": "user", "content": "probe"}]))
    call = ToolCall(name="email_search_emails", arguments={"query": "meeting"})
    t0 = time.perf_counter()
    for _ in range(calls):
        env.step([call])
    return (time.perf_counter() - t0) / calls


# ---------------------------------------------------------------------------------------------------- timing

def time_on_this_machine(cfg: TrainConfig, s: ModelShape, w: Workload, probe: ProbeResult,
                         base: ModelShape | None = None, parallel_envs: int = 1) -> Timing:
    """Seconds per step from the probe. Decode steps: a + b * batch (fit on the probe's two batch sizes), scaled
    by layer count when planning a different model size than the probe ran."""
    b = w.completions_per_step
    if probe.decode_batch > 1:
        slope = max(0.0, (probe.decode_s_per_step_batch - probe.decode_s_per_step_1) / (probe.decode_batch - 1))
    else:
        slope = 0.0
    intercept = max(1e-5, probe.decode_s_per_step_1 - slope)
    scale = 1.0
    if base is not None and base.params != s.params:
        scale = _body_params(s) / max(1, _body_params(base))
    step_latency = (intercept + slope * b) * scale
    prefill, _ = generation_flops(s, w)
    gen_s = w.generation_rounds * w.turns * w.completion_tokens_per_turn * step_latency + prefill / probe.prefill_flops_per_s
    policy, ref = training_flops(cfg, s, w)
    train_s = (policy + ref) / probe.train_flops_per_s + probe.optimizer_step_s * cfg.optim.num_iterations * (
        s.trainable_params / max(1, (base or s).trainable_params))
    env_s = w.env_steps_per_step * probe.env_step_s / max(1, min(parallel_envs, b))
    step = gen_s + train_s + env_s
    return Timing(target=f"this machine ({probe.device}, {probe.threads} thread(s))", generation_s_per_step=gen_s,
                  training_s_per_step=train_s, environment_s_per_step=env_s, step_s=step,
                  total_s=step * cfg.steps + _checkpoint_s(cfg, s),
                  basis=f"measured probe ({probe.seconds:.1f} s): decode {probe.decode_s_per_step_batch * 1e3:.1f} ms/step "
                        f"at batch {probe.decode_batch}, training {probe.train_flops_per_s / 1e9:.2f} GFLOP/s")


def _checkpoint_s(cfg: TrainConfig, s: ModelShape) -> float:
    saves = math.ceil(cfg.steps / cfg.checkpoint.every)
    bp = _bytes_per_param(cfg.model.dtype)
    state = s.trainable_params * _optimizer_bytes_per_param(cfg, bp) if cfg.checkpoint.save_optimizer else 0
    bytes_ = s.params * bp + state
    return saves * bytes_ / DISK_BYTES_PER_S


def time_on_gpu(cfg: TrainConfig, s: ModelShape, w: Workload, g: GPU, env_step_s: float = 0.002,
                parallel_envs: int = 1) -> Timing:
    bp = 2  # bf16 on a GPU
    b = w.completions_per_step
    overhead = GPU_STEP_OVERHEAD_S.get(cfg.rollout.backend, 0.012)
    kv_per_token = 2 * s.layers * s.kv_heads * s.head_dim * bp
    gen_s = 0.0
    for ctx in turn_contexts(w):
        for _ in range(w.generation_rounds):
            mean_ctx = ctx + w.completion_tokens_per_turn / 2
            read = s.params * bp + kv_per_token * b * mean_ctx
            compute = b * forward_flops(s, 1, mean_ctx, 1) / (g.bf16_flops * 0.5)
            gen_s += w.completion_tokens_per_turn * (max(read / g.bandwidth, compute) + overhead)
            gen_s += b * forward_flops(s, ctx, ctx / 2, 1) / (g.bf16_flops * GPU_PREFILL_MFU)
    policy, ref = training_flops(cfg, s, w)
    train_s = (policy + ref) / (g.bf16_flops * GPU_TRAIN_MFU) + 16 * s.trainable_params / g.bandwidth
    env_s = w.env_steps_per_step * env_step_s / max(1, min(parallel_envs, b))
    step = gen_s + train_s + env_s
    return Timing(target=g.name, generation_s_per_step=gen_s, training_s_per_step=train_s,
                  environment_s_per_step=env_s, step_s=step, total_s=step * cfg.steps,
                  basis=f"{g.bf16_flops / 1e12:.0f} TFLOP/s bf16 dense at {GPU_TRAIN_MFU:.0%} MFU for training, "
                        f"{g.bandwidth / 1e12:.2f} TB/s for decode, {overhead * 1e3:.0f} ms/decode step overhead "
                        f"({cfg.rollout.backend})")


# ------------------------------------------------------------------------------------------------- top level

def estimate(cfg: TrainConfig, s: ModelShape, prompt_tokens: int, *, probe: ProbeResult | None = None,
             gpus: list[str] | None = None, base: ModelShape | None = None,
             parallel_envs: int = 1, shared_prefix: int = 0) -> Estimate:
    w = make_workload(cfg, prompt_tokens, shared_prefix=shared_prefix)
    prefill, decode = generation_flops(s, w)
    policy, ref = training_flops(cfg, s, w)
    fl = Flops(generation_per_step=prefill + decode, training_per_step=policy, reference_per_step=ref,
               total=(prefill + decode + policy + ref) * cfg.steps)
    times = []
    if probe is not None:
        times.append(time_on_this_machine(cfg, s, w, probe, base, parallel_envs))
    env_s = probe.env_step_s if probe is not None and probe.env_step_s else 0.002
    for name in gpus or []:
        times.append(time_on_gpu(cfg, s, w, gpu(name), env_s, parallel_envs))
    return Estimate(model=s, workload=w, flops=fl, memory=memory(cfg, s, w), time=times)


def _with(cfg: TrainConfig, **changes: Any) -> TrainConfig:
    data = cfg.model_dump()
    for dotted, value in changes.items():
        node = data
        parts = dotted.split(".")
        for p in parts[:-1]:
            node = node[p]
        node[parts[-1]] = value
    return TrainConfig.model_validate(data)


def reductions(cfg: TrainConfig, s: ModelShape, prompt_tokens: int, base_est: Estimate, *,
               probe: ProbeResult | None, gpus: list[str] | None) -> list[Reduction]:
    shared = base_est.workload.shared_prefix_tokens
    """Each single change re-estimated; sorted by the time it saves on the first timing target."""
    if not base_est.time:
        return []
    base_t = base_est.time[0]
    options: list[tuple[str, str, TrainConfig, ModelShape, int, str]] = []
    if s.layers > 1:
        half = make_shape(s.name + " (half the layers)", layers=max(1, s.layers // 2), hidden=s.hidden, heads=s.heads,
                          kv_heads=s.kv_heads, head_dim=s.head_dim, intermediate=s.intermediate, vocab=s.vocab,
                          tied=s.tied_embeddings, lora=cfg.lora, model=cfg.model)
        options.append(("model size", f"{s.params / 1e6:.1f}M -> {half.params / 1e6:.1f}M parameters", cfg, half, 1,
                        "a model about half the size: the next smaller checkpoint of the family, or fewer layers"))
    c = cfg.rollout.max_new_tokens
    if c > 8:
        buffer = min(cfg.overlong.buffer_tokens, max(1, c // 2 - 1))
        options.append(("max tokens", f"rollout.max_new_tokens {c} -> {c // 2}",
                        _with(cfg, **{"rollout.max_new_tokens": c // 2, "overlong.buffer_tokens": buffer}), s, 1,
                        "watch the truncation rate: completions cut short get no reward"))
    g = cfg.rollout.num_generations
    if g > 2:
        g2 = max(2, g // 2)
        options.append(("generations per prompt", f"rollout.num_generations {g} -> {g2} (batch_size "
                        f"{cfg.batch_size} -> {cfg.prompts_per_step * g2})",
                        _with(cfg, **{"rollout.num_generations": g2, "batch_size": cfg.prompts_per_step * g2,
                                      "optim.micro_batch_size": None}), s, 1,
                        "fewer samples per group: more zero-variance groups, noisier advantages"))
    if cfg.rollout.environment:
        k = cfg.batch_size
        options.append(("parallel environments", f"run {k} environment episodes' tool calls in parallel", cfg, s, k,
                        "tool calls are independent across episodes"))
        if cfg.rollout.max_turns > 2:
            t2 = max(2, cfg.rollout.max_turns // 2)
            options.append(("max turns", f"rollout.max_turns {cfg.rollout.max_turns} -> {t2}",
                            _with(cfg, **{"rollout.max_turns": t2}), s, 1, "tasks needing more turns then fail"))
    if not cfg.lora.enabled and s.params > 50e6:
        lcfg = _with(cfg, **{"lora.enabled": True, "model.freeze_layers": 0, "model.freeze_embeddings": False})
        options.append(("LoRA", "lora.enabled: true (r=16 on attention)", lcfg, model_shape_like(s, lcfg), 1,
                        "mostly a memory saving: no full gradients or optimizer state"))
    if not cfg.lora.enabled and not s.frozen_layers and s.layers >= 3:
        k = s.layers // 3
        fcfg = _with(cfg, **{"model.freeze_embeddings": True, "model.freeze_layers": k})
        options.append(("freeze lower layers", f"model.freeze_embeddings: true, model.freeze_layers: {k}", fcfg,
                        model_shape_like(s, fcfg), 1, "full fine-tuning of the upper layers only: no backward pass "
                        "below them; how much of the model must adapt depends on the task"))
    out = []
    for change, setting, c2, s2, par, note in options:
        est = estimate(c2, s2, prompt_tokens, probe=probe, gpus=gpus, base=s, parallel_envs=par,
                       shared_prefix=shared)
        t = est.time[0]
        out.append(Reduction(change=change, setting=setting, step_s=t.step_s, total_s=t.total_s,
                             saves_s=base_t.total_s - t.total_s,
                             saves_fraction=(base_t.total_s - t.total_s) / base_t.total_s if base_t.total_s else 0.0,
                             peak_memory=max(est.memory.peak_training, est.memory.peak_generation), note=note))
    return sorted(out, key=lambda r: -r.saves_s)


def model_shape_like(s: ModelShape, cfg: TrainConfig) -> ModelShape:
    return make_shape(s.name, layers=s.layers, hidden=s.hidden, heads=s.heads, kv_heads=s.kv_heads,
                      head_dim=s.head_dim, intermediate=s.intermediate, vocab=s.vocab, tied=s.tied_embeddings,
                      lora=cfg.lora, model=cfg.model)


def plan(cfg: TrainConfig, *, config_name: str = "config", gpus: list[str] | None = None, probe: bool = True,
         probe_s: float = 10.0, model: Any | None = None) -> PlanReport:
    """The whole plan: shape, workload, FLOPs, memory, time here (probe) and on the named GPUs, reductions."""
    warnings: list[str] = []
    s = model_shape(cfg)
    measured = measure_prompt_tokens(cfg)
    if measured is None:
        measured = environment_prompt_tokens(cfg)
        what = (f"the {cfg.rollout.environment} environment's system prompt + 40 tokens of request"
                if measured else f"{DEFAULT_PROMPT_TOKENS} prompt tokens")
        warnings.append(f"could not read prompts from {cfg.data.path}: assumed {what}")
    prompt_tokens = measured or DEFAULT_PROMPT_TOKENS
    pr = run_probe(cfg, s, prompt_tokens, probe_s, model=model) if probe else None
    if gpus is None and not probe:
        gpus = ["H100"]
    shared = environment_prefix_tokens(cfg) if cfg.rollout.environment else 0
    est = estimate(cfg, s, prompt_tokens, probe=pr, gpus=gpus, shared_prefix=shared)
    if cfg.dynamic_sampling.enabled and cfg.dynamic_sampling.max_rounds > 1:
        warnings.append(f"dynamic sampling may generate up to {cfg.dynamic_sampling.max_rounds}x the rollouts of a "
                        "step when groups have zero reward variance; the estimate assumes one round")
    for t in est.time:
        if t.target.lower() in GPUS and max(est.memory.peak_training, est.memory.peak_generation) > GPUS[t.target.lower()].memory:
            warnings.append(f"peak memory exceeds the {t.target}'s {GPUS[t.target.lower()].memory / 1e9:.0f} GB")
    return PlanReport(config=config_name, estimate=est, probe=pr,
                      reductions=reductions(cfg, s, prompt_tokens, est, probe=pr, gpus=gpus),
                      warnings=warnings)
