"""Rollouts: sample G completions per prompt, batched, with a KV cache, recording each token's log-prob as it is
sampled.

Why our own sampling loop rather than `model.generate`: the loop keeps only the sampled token's log-prob (not T x B x
vocab logits), lets ended rows leave the batch (`training.kv_rows`) and stops as soon as every row has ended, keeps
the KV state for the next turn of a multi-turn episode, draws from a seeded `torch.Generator`
(so a resumed run samples exactly what the uninterrupted run would have), and uses position ids derived from the
attention mask, the same ones the training forward uses, so generation-time and training-time log-probs agree.

The vLLM backend (`backend: vllm` in the config) lives in `training.rollout_vllm` and is imported only when chosen.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from training.generation_amp import generating
from training.losses import token_logprobs

Tensor = torch.Tensor


@dataclass(frozen=True)
class SamplingParams:
    max_new_tokens: int = 128
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int = 0


@dataclass
class RolloutBatch:
    """B = prompts x G rows. Prompts are left-padded, completions right-padded.

    `completion_mask` marks real completion tokens (generated and, in multi-turn rollouts, tool-output tokens);
    `loss_mask` marks only the tokens the policy generated, the ones trained on. `logprobs` are the sampling
    log-probs (0 elsewhere); `truncated` rows hit the length limit without ending.
    """

    prompt_ids: Tensor
    prompt_mask: Tensor
    completion_ids: Tensor
    completion_mask: Tensor
    loss_mask: Tensor
    logprobs: Tensor
    truncated: Tensor
    texts: list[str]
    group_index: list[int]
    extras: list[dict[str, Any]] = field(default_factory=list)

    @property
    def size(self) -> int:
        return self.completion_ids.shape[0]

    def select(self, rows: list[int]) -> "RolloutBatch":
        idx = torch.tensor(rows, dtype=torch.long)
        return RolloutBatch(
            self.prompt_ids[idx], self.prompt_mask[idx], self.completion_ids[idx], self.completion_mask[idx],
            self.loss_mask[idx], self.logprobs[idx], self.truncated[idx], [self.texts[i] for i in rows],
            [self.group_index[i] for i in rows], [self.extras[i] for i in rows] if self.extras else [],
        )


class RolloutBackend(Protocol):
    def generate(self, prompts: list[list[dict[str, Any]]], num_generations: int, params: SamplingParams) -> RolloutBatch:
        ...


def render_prompts(tokenizer: Any, prompts: list[list[dict[str, Any]]], tools: list[list[dict]] | None = None) -> list[list[int]]:
    """Each chat prompt through the tokenizer's chat template with the generation prompt appended."""
    out = []
    for i, messages in enumerate(prompts):
        kwargs = {"tools": tools[i]} if tools and tools[i] else {}
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True, **kwargs)
        out.append(list(ids["input_ids"]))
    return out


def left_pad(seqs: list[list[int]], pad_id: int, device: torch.device | str | None = None) -> tuple[Tensor, Tensor]:
    """(ids, attention mask), rows right-aligned. Built on the CPU from the token lists, then moved once to `device`
    when one is given (row-by-row writes into a GPU tensor would be one small copy each)."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        if s:
            ids[i, width - len(s):] = torch.tensor(s, dtype=torch.long)
            mask[i, width - len(s):] = 1
    return (ids, mask) if device is None else (ids.to(device), mask.to(device))


def positions(mask: Tensor) -> Tensor:
    """Position ids that skip left padding: the first real token of every row is position 0."""
    return (mask.cumsum(-1) - 1).clamp(min=0)


def _filter_logits(logits: Tensor, top_k: int, top_p: float) -> Tensor:
    if top_k and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1, None]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
        cum = torch.softmax(sorted_logits, dim=-1).cumsum(-1)
        drop = cum - torch.softmax(sorted_logits, dim=-1) > top_p
        sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
        logits = torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits)
    return logits


@dataclass
class KVState:
    """A batch's KV cache and 2-D attention mask after a sampling call: every token fed so far (prefix, prompt,
    sampled tokens but each row's last one; padding masked out), rows in the caller's order.

    Why: a multi-turn rollout would otherwise re-run the whole conversation (system prompt, tool results, earlier
    replies) at every turn; with the state kept, the next turn feeds only the tokens not yet in the cache."""

    cache: Any
    attn: Tensor

    def fed(self) -> list[int]:
        """Per row, how many of its real tokens the cache holds."""
        return [int(x) for x in self.attn.sum(-1).tolist()]

    def select(self, rows: list[int]) -> None:
        """Keep only `rows` (in that order), e.g. the episodes still running."""
        idx = torch.tensor(rows, dtype=torch.long, device=self.attn.device)
        for layer in self.cache.layers:
            layer.batch_select_indices(idx)
        self.attn = self.attn[idx]
        keep = self.attn.sum(0) > 0  # drop columns that are padding in every remaining row
        if not bool(keep.all()):
            first = int(keep.nonzero().min())
            if first:
                for layer in self.cache.layers:
                    layer.keys = layer.keys[..., first:, :]
                    layer.values = layer.values[..., first:, :]
                self.attn = self.attn[:, first:]


Sampled = tuple[Tensor, Tensor, Tensor, Tensor]


def sample_tokens(model: Any, prompt_ids: Tensor, prompt_mask: Tensor, params: SamplingParams, **kw: Any) -> Sampled:
    """`sample_with_state` without the KV state: (ids, mask, logprobs, ended) for one-turn sampling."""
    return sample_with_state(model, prompt_ids, prompt_mask, params, **kw)[0]


@torch.no_grad()
def sample_with_state(
    model: Any,
    prompt_ids: Tensor,
    prompt_mask: Tensor,
    params: SamplingParams,
    *,
    eos_ids: set[int],
    pad_id: int,
    generator: torch.Generator | None = None,
    repeats: int = 1,
    prefix_cache: Any = None,
    prefix_len: int = 0,
) -> tuple[Sampled, KVState]:
    """Sample up to max_new_tokens per row with a KV cache. Returns (ids, mask, logprobs, ended), each (B, T) but
    `ended` (B,), and the KV state to continue the same rows with `continue_tokens`. A row's mask covers its tokens
    up to and including its end token.

    With `repeats` > 1 the prompts are distinct and each is completed `repeats` times: the prompt is run once and
    its cache repeated (B = prompts x repeats). With `prefix_cache` (one row of `prefix_len` tokens, see
    `training.logprobs.prefill`), every prompt is that prefix followed by its row of `prompt_ids`."""
    from training.kv_cache import growing
    from training.logprobs import model_forward, repeat_cache

    device = prompt_ids.device
    u = prompt_ids.shape[0]
    if prefix_cache is not None and prefix_len:
        cache = growing(repeat_cache(prefix_cache, u))
        attn = torch.cat([torch.ones((u, prefix_len), dtype=prompt_mask.dtype, device=device), prompt_mask], dim=1)
    else:
        cache = growing()
        attn = prompt_mask
    out = model_forward(model, input_ids=prompt_ids, attention_mask=attn, position_ids=positions(attn)[:, attn.shape[1] - prompt_ids.shape[1]:],
                        cache=cache, use_cache=True, logits_to_keep=1)
    logits = out.logits[:, -1, :]
    if repeats > 1:
        for layer in cache.layers:
            layer.batch_repeat_interleave(repeats)
        attn = attn.repeat_interleave(repeats, dim=0)
        logits = logits.repeat_interleave(repeats, dim=0)
    return _decode(model, logits, KVState(cache, attn), params, eos_ids=eos_ids, pad_id=pad_id, generator=generator)


@torch.no_grad()
def continue_tokens(
    model: Any,
    state: KVState,
    new_ids: list[list[int]],
    params: SamplingParams,
    *,
    eos_ids: set[int],
    pad_id: int,
    generator: torch.Generator | None = None,
) -> tuple[Sampled, KVState]:
    """Feed each row its tokens not yet in `state` (left-padded into one block; at least one per row), then sample.

    Padding in the middle of a row is masked and skipped by the position ids, so each row sees exactly its own
    conversation, as if it had been run from the start."""
    from training.logprobs import model_forward

    if len(new_ids) != state.attn.shape[0] or any(not r for r in new_ids):
        raise ValueError("continue_tokens needs one non-empty row of new tokens per cached row")
    device = state.attn.device
    ids, mask = left_pad(new_ids, pad_id, device)
    attn = torch.cat([state.attn, mask], dim=1)
    out = model_forward(model, input_ids=ids, attention_mask=attn, position_ids=positions(attn)[:, -ids.shape[1]:],
                        cache=state.cache, use_cache=True, logits_to_keep=1)
    return _decode(model, out.logits[:, -1, :], KVState(state.cache, attn), params, eos_ids=eos_ids, pad_id=pad_id,
                   generator=generator)


def sample_from(probs: Tensor, generator: torch.Generator | None) -> Tensor:
    """One token per row drawn from `probs` (rows need not sum to 1) by inverting each row's cumulative sum at a
    uniform draw. Why not `torch.multinomial`: on a CPU it took 31 ms a call for 32 rows of SmolLM2's 49,152-token
    vocabulary, an eighth of a whole decode step; inverting a float32 cumulative sum took 0.6 ms. The sum is in
    float64, so a token's share of the interval is its probability to well below what a float32 softmax resolves."""
    cum = probs.double().cumsum(-1)
    u = torch.rand((probs.shape[0], 1), generator=generator, dtype=torch.float64, device=probs.device) * cum[:, -1:]
    return torch.searchsorted(cum, u, right=True).squeeze(-1).clamp_max(probs.shape[-1] - 1)


def _decode(model: Any, logits: Tensor, state: KVState, params: SamplingParams, *, eos_ids: set[int], pad_id: int,
            generator: torch.Generator | None) -> tuple[Sampled, KVState]:
    """The sampling loop from the next-token logits of every row; appends what it feeds to `state`.

    Rows that have ended are set aside (`training.kv_rows`) once they are a quarter of the rows still in the batch,
    so later steps compute only the rows still sampling; they are merged back, in order, before returning."""
    from training.kv_rows import merge, take_rows
    from training.logprobs import model_forward

    attn, cache = state.attn, state.cache
    device = attn.device
    b = attn.shape[0]
    run = torch.arange(b, device=device)  # the batch rows the cache holds, in its order
    parked = []
    next_pos = attn.sum(-1, keepdim=True)
    eos = torch.tensor(sorted(eos_ids), dtype=torch.long, device=device)
    done = torch.zeros(b, dtype=torch.bool, device=device)
    ids, lps, masks = [], [], []
    for _ in range(params.max_new_tokens):
        logits = logits.float()
        if params.temperature <= 0:  # greedy (evaluation): log-probs under temperature 1
            tok = logits.argmax(-1)
            lp = token_logprobs(logits, tok)
        else:
            scaled = logits / params.temperature
            filtered = _filter_logits(scaled, params.top_k, params.top_p)
            tok = sample_from(torch.softmax(filtered, dim=-1), generator)
            lp = token_logprobs(scaled, tok)
        live = ~done[run]
        tok = torch.where(live, tok, torch.full_like(tok, pad_id))
        ids.append(torch.full((b,), pad_id, dtype=tok.dtype, device=device).index_copy(0, run, tok))
        lp = torch.where(live, lp, torch.zeros_like(lp))
        lps.append(torch.zeros(b, dtype=lp.dtype, device=device).index_copy(0, run, lp))
        masks.append(torch.zeros(b, dtype=torch.long, device=device).index_copy(0, run, live.long()))
        done[run] = done[run] | torch.isin(tok, eos)
        if bool(done.all()):
            break
        ended = done[run]
        if int(ended.sum()) * 4 >= len(run):  # set the ended rows aside; the rest go on alone
            parked.append(take_rows(cache, attn, ended.nonzero().squeeze(-1), run[ended]))
            keep = (~ended).nonzero().squeeze(-1)
            kv = KVState(cache, attn)
            kv.select(keep.tolist())
            attn, run, tok, live, next_pos = kv.attn, run[keep], tok[keep], live[keep], next_pos[keep]
        attn = torch.cat([attn, live.long().unsqueeze(-1)], dim=-1)
        out = model_forward(model, input_ids=tok.unsqueeze(-1), attention_mask=attn, position_ids=next_pos, cache=cache,
                            use_cache=True)
        logits = out.logits[:, -1, :]
        next_pos = next_pos + 1
    attn = merge(cache, attn, run, parked)
    return (torch.stack(ids, 1), torch.stack(masks, 1), torch.stack(lps, 1), done), KVState(cache, attn)


def end_token_ids(tokenizer: Any, model: Any | None = None) -> set[int]:
    """Every id that ends a turn: the tokenizer's eos and the generation config's (SmolLM2 ends turns with
    <|im_end|>)."""
    ids: set[int] = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    gen = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if isinstance(gen, int):
        ids.add(gen)
    elif isinstance(gen, (list, tuple)):
        ids.update(int(x) for x in gen)
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>") if "<|im_end|>" in tokenizer.get_vocab() else None
    if im_end is not None:
        ids.add(int(im_end))
    return ids


class TransformersBackend:
    """Rollouts on the training model itself (CPU or one GPU): no weight sync, the policy is always current."""

    def __init__(self, model: Any, tokenizer: Any, chunk_size: int | None = None, autocast_bf16: bool = False):
        self.model = model
        self.tokenizer = tokenizer
        self.chunk_size = chunk_size  # prompts per sampling call (None: all at once)
        self.autocast_bf16 = autocast_bf16
        self.eos_ids = end_token_ids(tokenizer, model)

    @torch.no_grad()
    def generate_ids(self, prompt_ids: list[list[int]], num_generations: int, params: SamplingParams) -> RolloutBatch:
        tok = self.tokenizer
        rows = [p for p in prompt_ids for _ in range(num_generations)]
        group_index = [i for i in range(len(prompt_ids)) for _ in range(num_generations)]
        device = next(self.model.parameters()).device
        p_ids, p_mask = left_pad(rows, tok.pad_token_id)
        from training.logprobs import common_prefix_len, prefill

        plen = common_prefix_len(prompt_ids)
        u_ids, u_mask = left_pad([p[plen:] for p in prompt_ids], tok.pad_token_id)
        gen = torch.Generator(device=device).manual_seed(params.seed)
        chunk = self.chunk_size or len(prompt_ids)
        parts = []
        with generating(self.model, self.autocast_bf16):
            pcache = prefill(self.model, torch.tensor([prompt_ids[0][:plen]], device=device)) if plen else None
            for s in range(0, len(prompt_ids), chunk):
                ids, mask = u_ids[s:s + chunk], u_mask[s:s + chunk]
                first = int((mask.sum(0) > 0).nonzero().min())
                parts.append(sample_tokens(self.model, ids[:, first:].to(device), mask[:, first:].to(device),
                                           params, eos_ids=self.eos_ids, pad_id=tok.pad_token_id, generator=gen,
                                           repeats=num_generations, prefix_cache=pcache, prefix_len=plen))
        width = max(p[0].shape[1] for p in parts)

        def cat(i: int, fill: float | int) -> Tensor:
            return torch.cat([torch.nn.functional.pad(p[i].cpu(), (0, width - p[i].shape[1]), value=fill) for p in parts])

        c_ids, c_mask, lps = cat(0, tok.pad_token_id), cat(1, 0), cat(2, 0.0)
        ended = torch.cat([p[3].cpu() for p in parts])
        texts = [tok.decode(c_ids[i][c_mask[i].bool()], skip_special_tokens=True) for i in range(len(rows))]
        return RolloutBatch(p_ids, p_mask, c_ids, c_mask, c_mask.clone(), lps, ~ended, texts, group_index,
                            [{} for _ in rows])

    def generate(self, prompts: list[list[dict[str, Any]]], num_generations: int, params: SamplingParams) -> RolloutBatch:
        return self.generate_ids(render_prompts(self.tokenizer, prompts), num_generations, params)


def make_backend(name: str, model: Any, tokenizer: Any, **kwargs: Any) -> RolloutBackend:
    """The rollout backend by config name; vLLM is imported here and only here, when asked for."""
    if name == "transformers":
        return TransformersBackend(model, tokenizer, chunk_size=kwargs.get("chunk_size"),
                                   autocast_bf16=kwargs.get("autocast_bf16", False))
    if name == "vllm":
        from training.rollout_vllm import VLLMBackend  # noqa: PLC0415 - optional heavy dependency

        return VLLMBackend(model, tokenizer, **kwargs)
    raise ValueError(f"unknown rollout backend {name!r}: use transformers or vllm")
