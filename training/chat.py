"""Chat with a model through its own chat template: the single place that turns messages into prompt ids."""

from __future__ import annotations

from typing import Any


def chat_prompt_ids(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict] | None = None):
    """Token ids (1 x T tensor) of `messages` rendered by the tokenizer's chat template with a generation prompt."""
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError("this tokenizer has no chat template; pass a model that ships one")
    enc = tokenizer.apply_chat_template(
        messages, tools=tools, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    return enc["input_ids"]


def generate_reply(
    model: Any,
    tokenizer: Any,
    messages: list[dict[str, Any]],
    *,
    max_new_tokens: int = 128,
    temperature: float = 0.0,
    seed: int | None = None,
    tools: list[dict] | None = None,
) -> str:
    """One assistant reply. `temperature == 0` is greedy and so deterministic for a given model and prompt."""
    import torch

    ids = chat_prompt_ids(tokenizer, messages, tools).to(model.device)
    kwargs: dict[str, Any] = {"max_new_tokens": max_new_tokens, "pad_token_id": tokenizer.pad_token_id}
    if temperature > 0:
        if seed is not None:
            torch.manual_seed(seed)
        kwargs.update(do_sample=True, temperature=temperature, top_k=0, top_p=1.0)
    else:
        kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), **kwargs)
    return tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True).strip()
