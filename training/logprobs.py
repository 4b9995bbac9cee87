"""Log-probs of completions under the policy, computing each group's shared prompt once.

Why: in GRPO every prompt is completed G times, and a naive forward runs the prompt G times. Here the prompts of a
batch are run once each (with gradient), their key/value cache is repeated G times, and the completions run on top
of it. Gradients flow through the repeated cache into the prompt pass, so the result is the same function of the
weights as the full forward (checked in tests/test_training_logprobs.py), with prompt compute divided by G.
"""

from __future__ import annotations

from typing import Any

import torch

from training.losses import token_logprobs
from training.rollout import positions

Tensor = torch.Tensor


def model_forward(model: Any, **kwargs: Any) -> Any:
    """Call the model with a cache under whichever keyword this transformers version uses for it."""
    cache = kwargs.pop("cache", None)
    if cache is not None:
        kwargs[_cache_kw(model)] = cache
    return model(**kwargs)


_CACHE_KW: dict[type, str] = {}


def _cache_kw(model: Any) -> str:
    import inspect

    cls = type(model)
    if cls not in _CACHE_KW:
        try:
            params = inspect.signature(model.forward).parameters
        except (TypeError, ValueError):
            params = {}
        _CACHE_KW[cls] = "cache" if "cache" in params and "past_key_values" not in params else "past_key_values"
    return _CACHE_KW[cls]


def split_head(model: Any) -> tuple[Any, Any] | None:
    """(decoder, lm_head) of a causal LM (also inside a peft wrapper), or None when the model does not expose them
    (then the plain forward is used)."""
    inner = model
    if hasattr(inner, "get_base_model"):
        inner = inner.get_base_model()
    dec, head = getattr(inner, "model", None), getattr(inner, "lm_head", None)
    if dec is None or head is None or not callable(dec):
        return None
    return dec, head


def _head_chunk(hidden: Tensor, targets: Tensor, head: Any, temperature: float) -> tuple[Tensor, Tensor]:
    logits = head(hidden).float()
    lp = token_logprobs(logits, targets, temperature)
    with torch.no_grad():
        scaled = logits / temperature
        logp = torch.log_softmax(scaled, dim=-1)
        ent = -(logp.exp() * logp).sum(-1)
    return lp, ent


def head_logprobs(hidden: Tensor, targets: Tensor, head: Any, temperature: float, rows: int = 2) -> tuple[Tensor, Tensor]:
    """Log-probs and entropies of `targets` from final hidden states without the batch's logits ever existing at
    once: a plain bias-free linear head goes through `training.lm_head` (one chunk of logits at a time, in reused
    buffers, recomputed in the backward); any other head runs a few rows at a time under activation checkpointing
    (about 300 MB of logits and their gradient at 8 x 48 x 49k in fp32 otherwise)."""
    from torch.utils.checkpoint import checkpoint

    if type(head) is torch.nn.Linear and head.bias is None:
        from training.lm_head import head_token_logprobs

        return head_token_logprobs(hidden, targets, head.weight, temperature)

    lps, ents = [], []
    for s in range(0, hidden.shape[0], rows):
        h = hidden[s:s + rows]
        if torch.is_grad_enabled() and h.requires_grad:
            lp, ent = checkpoint(_head_chunk, h, targets[s:s + rows], head, temperature, use_reentrant=False)
        else:
            lp, ent = _head_chunk(h, targets[s:s + rows], head, temperature)
        lps.append(lp)
        ents.append(ent.detach())
    return torch.cat(lps), torch.cat(ents)


def full_logprobs(model: Any, input_ids: Tensor, attention_mask: Tensor, completion_ids: Tensor,
                  temperature: float, chunked_head: bool = True) -> tuple[Tensor, Tensor]:
    """(B, T) log-probs and (B, T) entropies of the completion tokens from one forward over prompt + completion."""
    t = completion_ids.shape[1]
    parts = split_head(model) if chunked_head else None
    if parts is not None:
        dec, head = parts
        hidden = dec(input_ids=input_ids, attention_mask=attention_mask, position_ids=positions(attention_mask),
                     use_cache=False).last_hidden_state
        return head_logprobs(hidden[:, -t - 1:-1, :], completion_ids, head, temperature)
    out = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=positions(attention_mask),
                logits_to_keep=t + 1, use_cache=False)
    logits = out.logits[:, :-1, :].float()
    return token_logprobs(logits, completion_ids, temperature), _entropy(logits, temperature)


def _entropy(logits: Tensor, temperature: float) -> Tensor:
    with torch.no_grad():
        logp = torch.log_softmax(logits.detach() / temperature, dim=-1)
        return -(logp.exp() * logp).sum(-1)


def repeat_cache(cache: Any, repeats: int) -> Any:
    """A new cache whose rows are each row of `cache` repeated `repeats` times (differentiable; `cache` unchanged)."""
    from transformers import DynamicCache

    out = DynamicCache()
    for i, layer in enumerate(cache.layers):
        out.update(layer.keys.repeat_interleave(repeats, dim=0), layer.values.repeat_interleave(repeats, dim=0), i)
    return out


def common_prefix_len(rows: list[list[int]], minimum: int = 32) -> int:
    """Length of the token prefix all rows share (0 when shorter than `minimum`), leaving every row at least one
    token of its own: a system prompt shared by every task of an environment is computed once per batch."""
    if len(rows) < 2:
        return 0
    k = shared_len(rows, min(len(r) for r in rows) - 1)
    return k if k >= minimum else 0


def shared_len(rows: list[list[int]], limit: int) -> int:
    """How many leading tokens (at most `limit`) every row has in common."""
    first = rows[0]
    k = 0
    while k < limit and all(r[k] == first[k] for r in rows):
        k += 1
    return k


def prefill(model: Any, prefix_ids: Tensor) -> Any:
    """Run a (1, L) prefix once and return its cache (with gradient when grad is enabled)."""
    from transformers import DynamicCache

    cache = DynamicCache()
    mask = torch.ones_like(prefix_ids)
    model_forward(model, input_ids=prefix_ids, attention_mask=mask, position_ids=positions(mask), cache=cache,
                  use_cache=True, logits_to_keep=1)
    return cache


def shared_prompt_logprobs(model: Any, prompt_ids: Tensor, prompt_mask: Tensor, completion_ids: Tensor,
                           completion_mask: Tensor, repeats: int, temperature: float,
                           prefix_ids: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """(B, T) log-probs and entropies like `full_logprobs`, for rows laid out as U groups of `repeats` completions of U (left-padded) prompts.

    With `prefix_ids` (1, L), every prompt is that prefix followed by its row of `prompt_ids`; the prefix runs once
    for the whole batch (an environment's system prompt), gradients still flowing through it."""
    states, head = shared_prompt_states(model, prompt_ids, prompt_mask, completion_ids, completion_mask, repeats,
                                        prefix_ids)
    if head is not None:
        return head_logprobs(states, completion_ids, head, temperature)
    logits = states.float()
    return token_logprobs(logits, completion_ids, temperature), _entropy(logits, temperature)


def shared_prompt_states(model: Any, prompt_ids: Tensor, prompt_mask: Tensor, completion_ids: Tensor,
                         completion_mask: Tensor, repeats: int,
                         prefix_ids: Tensor | None = None) -> tuple[Tensor, Any | None]:
    """What predicts each completion token, in `shared_prompt_logprobs`' layout: (B, T, H) final hidden states and
    the LM head when the model exposes them (so a caller never holds the batch's logits at once), else (B, T, V)
    logits and None. Shared by the loss's log-probs and training.guard's decision leads."""
    u = prompt_ids.shape[0]
    b, t = completion_ids.shape
    if u * repeats != b:
        raise ValueError(f"{u} prompts x {repeats} != {b} completion rows")
    if prefix_ids is not None and prefix_ids.shape[1] > 0:
        cache = repeat_cache(prefill(model, prefix_ids), u)
        lead = torch.ones((u, prefix_ids.shape[1]), dtype=prompt_mask.dtype, device=prompt_mask.device)
    else:
        from transformers import DynamicCache

        cache = DynamicCache()
        lead = prompt_mask[:, :0]
    full_mask = torch.cat([lead, prompt_mask], dim=1)
    parts = split_head(model)
    run = parts[0] if parts is not None else model
    first = model_forward(run, input_ids=prompt_ids, attention_mask=full_mask,
                          position_ids=positions(full_mask)[:, lead.shape[1]:], cache=cache, use_cache=True,
                          **({} if parts is not None else {"logits_to_keep": 1}))
    if repeats > 1:
        cache = repeat_cache(cache, repeats)
    p_mask = full_mask.repeat_interleave(repeats, dim=0)
    start = p_mask.sum(-1, keepdim=True)
    pos = start + torch.arange(t, device=completion_ids.device).unsqueeze(0)
    attn = torch.cat([p_mask, completion_mask.to(p_mask.dtype)], dim=1)
    out = model_forward(run, input_ids=completion_ids, attention_mask=attn, position_ids=pos, cache=cache,
                        use_cache=True, **({} if parts is not None else {"logits_to_keep": t}))
    if parts is not None:
        hidden = torch.cat([first.last_hidden_state[:, -1:, :].repeat_interleave(repeats, dim=0),
                            out.last_hidden_state[:, :-1, :]], dim=1)
        return hidden, parts[1]
    return torch.cat([first.logits[:, -1:, :].repeat_interleave(repeats, dim=0), out.logits[:, :-1, :]], dim=1), None


def shared_groups(prompt_ids_rows: list[list[int]], repeats: int) -> bool:
    """True when rows form consecutive blocks of `repeats` rows with the same prompt (the shared-prompt layout)."""
    if repeats < 2 or len(prompt_ids_rows) % repeats:
        return False
    return all(prompt_ids_rows[i] == prompt_ids_rows[i - i % repeats] for i in range(len(prompt_ids_rows)))
