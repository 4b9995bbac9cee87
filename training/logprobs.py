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


def full_logprobs(model: Any, input_ids: Tensor, attention_mask: Tensor, completion_ids: Tensor,
                  temperature: float) -> tuple[Tensor, Tensor]:
    """(B, T) log-probs and (B, T, V) logits of the completion tokens from one forward over prompt + completion."""
    t = completion_ids.shape[1]
    out = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=positions(attention_mask),
                logits_to_keep=t + 1, use_cache=False)
    logits = out.logits[:, :-1, :].float()
    return token_logprobs(logits, completion_ids, temperature), logits


def shared_prompt_logprobs(model: Any, prompt_ids: Tensor, prompt_mask: Tensor, completion_ids: Tensor,
                           completion_mask: Tensor, repeats: int, temperature: float) -> tuple[Tensor, Tensor]:
    """Like `full_logprobs`, for rows laid out as U groups of `repeats` completions of U (left-padded) prompts."""
    from transformers import DynamicCache

    u = prompt_ids.shape[0]
    b, t = completion_ids.shape
    if u * repeats != b:
        raise ValueError(f"{u} prompts x {repeats} != {b} completion rows")
    cache = DynamicCache()
    first = model_forward(model, input_ids=prompt_ids, attention_mask=prompt_mask, position_ids=positions(prompt_mask),
                          cache=cache, use_cache=True, logits_to_keep=1)
    for layer in cache.layers:
        layer.batch_repeat_interleave(repeats)
    p_mask = prompt_mask.repeat_interleave(repeats, dim=0)
    start = p_mask.sum(-1, keepdim=True)
    pos = start + torch.arange(t, device=completion_ids.device).unsqueeze(0)
    attn = torch.cat([p_mask, completion_mask.to(p_mask.dtype)], dim=1)
    out = model_forward(model, input_ids=completion_ids, attention_mask=attn, position_ids=pos, cache=cache,
                        use_cache=True, logits_to_keep=t)
    logits = torch.cat([first.logits[:, -1:, :].repeat_interleave(repeats, dim=0), out.logits[:, :-1, :]], dim=1)
    logits = logits.float()
    return token_logprobs(logits, completion_ids, temperature), logits


def shared_groups(prompt_ids_rows: list[list[int]], repeats: int) -> bool:
    """True when rows form consecutive blocks of `repeats` rows with the same prompt (the shared-prompt layout)."""
    if repeats < 2 or len(prompt_ids_rows) % repeats:
        return False
    return all(prompt_ids_rows[i] == prompt_ids_rows[i - i % repeats] for i in range(len(prompt_ids_rows)))
