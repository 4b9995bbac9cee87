"""Building the policy to train from a TrainConfig's model section: the embedded model, a local folder, or a fresh
random-initialised small model with a real tokenizer (the tiny CI config), optionally wrapped in LoRA.

Why random init exists: CI must exercise the whole trainer (rollout, loss, checkpoint, resume) in seconds, with the
real SmolLM2 vocabulary and chat template so that every code path is the one used on the real model.
"""

from __future__ import annotations

from typing import Any

from schemas.train_config import LoraSection, ModelSection

TINY_ARCHITECTURE = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 2048,
    "tie_word_embeddings": True,
}


def build_random_model(tokenizer: Any, architecture: dict[str, Any] | None = None, seed: int = 0) -> Any:
    """A Llama-architecture model with fresh weights, sized by `architecture`, for `tokenizer`'s vocabulary."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    arch = {**TINY_ARCHITECTURE, **(architecture or {})}
    cfg = LlamaConfig(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **arch,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(cfg)


def load_policy(section: ModelSection, *, seed: int = 0, threads: int | None = None, source: str | None = None) -> tuple[Any, Any]:
    """(model, tokenizer) for training, in train mode. `source` overrides `section.name` (a checkpoint to resume)."""
    import torch

    from training.model import configure_threads, load_model, load_tokenizer, pick_device

    configure_threads(threads)
    device = pick_device(section.device)  # one choice for a fresh model, a pretrained one and a resumed checkpoint
    if section.init == "random" and source is None:
        tok = load_tokenizer(section.tokenizer or "default")
        model = build_random_model(tok, section.architecture, seed=seed)
        model.to(device=device, dtype=getattr(torch, section.dtype))
    else:
        model, tok = load_model(source or section.name, threads=threads, dtype=section.dtype, device=device)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    if section.gradient_checkpointing:
        model.gradient_checkpointing_enable()
        model.config.use_cache = True
    model.generation_config.pad_token_id = tok.pad_token_id
    freeze(model, section)
    return model, tok


def decoder_layers(model: Any) -> list[Any] | None:
    """The decoder layers of a causal LM, or None when it has no layer list. The one lookup shared by freezing,
    the LoRA layer check and the memory trim hooks (`training.memory`), so they always agree on what a layer is:
    a peft wrapper is looked through, and Llama-style (`model.layers`), GPT-2-style (`transformer.h`) and bare
    (`layers`) stacks are found."""
    from torch.nn import ModuleList

    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    for path in ("model.layers", "transformer.h", "layers"):
        node = inner
        for part in path.split("."):
            node = getattr(node, part, None)
        if isinstance(node, ModuleList):
            return list(node)
    return None


def freeze(model: Any, section: ModelSection) -> Any:
    """Stop training the token embeddings and/or the first `section.freeze_layers` decoder layers.

    Why: on a CPU most of a fine-tuning step is the backward pass. Below the first trained layer there is nothing
    to differentiate, so autograd stops there and stores no activations for it, and the optimizer holds no state for
    frozen weights. A tied LM head shares the embedding matrix and is frozen with it."""
    n = section.freeze_layers
    if not (section.freeze_embeddings or n):
        return model
    inner = getattr(model, "model", None)
    layers = decoder_layers(model)
    if layers is None or not hasattr(inner, "embed_tokens"):
        raise ValueError(f"model.freeze_layers / freeze_embeddings: {type(model).__name__} has no `model.layers` and "
                         "`model.embed_tokens` (a decoder-only transformer is expected)")
    if n >= len(layers):
        raise ValueError(f"model.freeze_layers {n}: the model has {len(layers)} decoder layers; freeze fewer so that "
                         "some train")
    if section.freeze_embeddings:
        inner.embed_tokens.weight.requires_grad_(False)
    for layer in layers[:n]:
        for p in layer.parameters():
            p.requires_grad_(False)
    return model


def lora_config(lora: LoraSection) -> Any:
    """The peft LoraConfig of a config's LoRA section (GRPO wraps the model with it; SFT hands it to TRL)."""
    from peft import LoraConfig

    return LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                      target_modules=lora.target_modules, layers_to_transform=lora.layers, task_type="CAUSAL_LM")


def apply_lora(model: Any, lora: LoraSection) -> Any:
    """Wrap the model in a peft LoRA adapter (only adapter weights train and are checkpointed)."""
    if not lora.enabled:
        return model
    from peft import get_peft_model

    check_lora_layers(model, lora)
    return get_peft_model(model, lora_config(lora))


def check_lora_layers(model: Any, lora: LoraSection) -> None:
    """Refuse `lora.layers` outside the model (peft would silently add no adapter there)."""
    if not lora.layers:
        return
    n = len(decoder_layers(model) or [])
    bad = [i for i in lora.layers if not 0 <= i < n]
    if bad:
        raise ValueError(f"lora.layers {bad}: the model has {n} decoder layers (0..{n - 1})")
