"""SFT warm start from demonstrations, through TRL's SFTTrainer (LoRA via peft, or full fine-tuning).

Why a warm start: GRPO learns only from groups whose rewards differ. A model that never emits the tool-call format
scores 0 on every sample, every group has zero variance, and nothing is learned (TRL's run on the workplace tasks
stays flat). A few hundred steps on ground-truth transcripts make correct samples appear, and GRPO takes it from
there.

Demonstrations are JSONL/Parquet rows with `messages` (chat dicts; the environment writes them) or `prompt` +
`completion`. We tokenize them ourselves through the chat template and mark assistant tokens in
`assistant_masks`: the SmolLM2 template has no `{% generation %}` tags, so TRL's own assistant-only masking cannot
find them; with the mask precomputed TRL trains on assistant turns only (tool results and prompts are context).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

from schemas.train_config import SFTSection, TrainConfig


class SFTError(ValueError):
    """Demonstrations are missing or malformed; the message names the file and row."""


def read_demonstrations(path: str | Path) -> list[list[dict[str, str]]]:
    from generators.task_io import read_records

    rows = read_records(path)
    out = []
    for i, row in enumerate(rows):
        msgs = row.get("messages")
        if isinstance(msgs, str):
            msgs = json.loads(msgs)
        if msgs is None and "completion" in row:
            prompt = row.get("prompt")
            prompt = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt or [])
            msgs = prompt + [{"role": "assistant", "content": str(row["completion"])}]
        if not isinstance(msgs, list) or not msgs:
            raise SFTError(f"{path}: row {i}: expected `messages` (a list of chat messages) or `prompt` + `completion`")
        if not any(m.get("role") == "assistant" for m in msgs):
            raise SFTError(f"{path}: row {i}: no assistant message to learn from")
        out.append([{"role": m["role"], "content": m.get("content") or ""} for m in msgs])
    if not out:
        raise SFTError(f"{path}: no demonstrations")
    return out


def tokenize_with_assistant_mask(tokenizer: Any, messages: list[dict[str, str]], max_length: int) -> dict[str, Any]:
    """input_ids of the whole conversation, a mask that is 1 on assistant-turn tokens (content + end token), and
    `context_len`: the tokens of the opening message (a system prompt, shared by many demonstrations and so run
    once per batch by `training.sft_packs`).

    Built by rendering growing prefixes of the conversation: the text an assistant message adds after the
    generation prompt, up to and including the end-of-turn token, is what the model should learn to produce; the
    template's glue after it (a newline) and everything else is context."""
    eos = tokenizer.eos_token or ""
    ids: list[int] = []
    mask: list[int] = []
    done = ""
    context_len = 0

    def add(text: str, m: int) -> None:
        if text:
            piece = tokenizer(text, add_special_tokens=False)["input_ids"]
            ids.extend(piece)
            mask.extend([m] * len(piece))

    for k, msg in enumerate(messages):
        full = tokenizer.apply_chat_template(messages[: k + 1], tokenize=False)
        if msg["role"] == "assistant":
            pre = tokenizer.apply_chat_template(messages[:k], add_generation_prompt=True, tokenize=False) if k else ""
            if not pre.startswith(done) or not full.startswith(pre):
                raise SFTError("the chat template does not render conversations incrementally; cannot mask turns")
            add(pre[len(done):], 0)
            body = full[len(pre):]
            cut = body.rfind(eos) + len(eos) if eos and eos in body else len(body)
            add(body[:cut], 1)
            add(body[cut:], 0)
        else:
            if not full.startswith(done):
                raise SFTError("the chat template does not render conversations incrementally; cannot mask turns")
            add(full[len(done):], 0)
            if k == 0:
                context_len = len(ids)
        done = full
    return {"input_ids": ids[:max_length], "assistant_masks": mask[:max_length],
            "context_len": min(context_len, max_length)}


def run_sft(
    cfg: TrainConfig,
    *,
    model: Any = None,
    tokenizer: Any = None,
    out_dir: Path | None = None,
    on_log: Callable[[dict[str, Any]], None] | None = None,
    demonstrations: list[list[dict[str, str]]] | None = None,
) -> Path:
    """Fine-tune on `cfg.sft.data_path` and save the (merged) model to `out_dir` (default OUTPUT/sft/final).

    Written to a temporary folder and renamed, with a manifest, so a killed SFT never leaves a usable-looking
    half model. Returns the folder, which `rlvr train` then starts GRPO from."""
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import SFTConfig, SFTTrainer

    from training.model import configure_threads, pick_device, write_manifest
    from training.policy import freeze, load_policy

    sec: SFTSection = cfg.sft or SFTSection(data_path=cfg.data.path)
    threads = configure_threads(cfg.threads)
    out_dir = Path(out_dir or Path(cfg.output_dir) / "sft" / "final")
    if model is None:
        model, tokenizer = load_policy(cfg.model, seed=cfg.seed, threads=threads)
    freeze(model, cfg.model)  # a model passed in gets the same layers frozen as one loaded here
    tokenizer.padding_side = "right"
    demos = demonstrations if demonstrations is not None else read_demonstrations(sec.data_path)
    rows = [tokenize_with_assistant_mask(tokenizer, m, sec.max_length) for m in demos]
    rows = [r for r in rows if any(r["assistant_masks"])]
    if not rows:
        raise SFTError(f"{sec.data_path}: no demonstration keeps an assistant token within max_length={sec.max_length}")
    peft_config = None
    if sec.lora.enabled:
        from training.policy import check_lora_layers, lora_config

        check_lora_layers(model, sec.lora)
        peft_config = lora_config(sec.lora)
    work = out_dir.parent / f".work-{out_dir.name}"
    bf16 = cfg.model.precision == "bf16-autocast"
    packed = shared_prefix_applies(sec, cfg)
    if packed:  # one pack (<= batch_size rows sharing their system prompt) per device batch, see training.sft_packs
        from training.sft_packs import build_packs, collate_pack

        train_rows = build_packs(rows, sec.batch_size, cfg.seed, sec.pack_length_window)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        extra: dict[str, Any] = {"data_collator": lambda f: collate_pack(f, pad)}
        trainer_cls = _packed_trainer(SFTTrainer, bf16)
    else:
        train_rows = [{"input_ids": r["input_ids"], "assistant_masks": r["assistant_masks"]} for r in rows]
        extra, trainer_cls = {}, SFTTrainer
    args = SFTConfig(
        output_dir=str(work), num_train_epochs=sec.epochs, max_steps=sec.max_steps or -1, learning_rate=sec.lr,
        per_device_train_batch_size=1 if packed else sec.batch_size,
        gradient_accumulation_steps=sec.gradient_accumulation_steps,
        max_length=sec.max_length, logging_steps=1, save_strategy="no", report_to=[], seed=cfg.seed,
        use_cpu=pick_device(cfg.model.device) == "cpu", bf16=bf16, dataloader_num_workers=0,
        gradient_checkpointing=cfg.model.gradient_checkpointing,
        lr_scheduler_type={"constant": "constant_with_warmup"}.get(sec.scheduler, sec.scheduler),
        warmup_steps=sec.warmup_ratio, padding_free=False,
        **({"dataset_kwargs": {"skip_prepare_dataset": True}, "remove_unused_columns": False} if packed else {}),
    )
    deadline = time.time() + sec.max_minutes * 60 if sec.max_minutes else None
    stopped_early = False

    class Relay(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kw):
            if logs and on_log is not None:
                on_log({"step": state.global_step, "max_steps": state.max_steps, **logs})

        def on_step_end(self, args, state, control, **kw):
            nonlocal stopped_early
            if deadline is not None and time.time() > deadline:  # a wall-time budget: keep what was learned
                control.should_training_stop = stopped_early = True

    trainer = trainer_cls(model=model, args=args, train_dataset=Dataset.from_list(train_rows),
                          processing_class=tokenizer, peft_config=peft_config, callbacks=[Relay()], **extra)
    batches = len(train_rows) if packed else -(-len(train_rows) // sec.batch_size)
    t0 = time.time()
    result = trainer.train()
    trained = trainer.model
    if sec.lora.enabled:
        trained = trained.merge_and_unload()
    import shutil

    from generators.task_io import atomic_folder

    tokenizer.padding_side = "left"
    acc = trainer.accelerator
    if acc.is_main_process:  # under DDP every rank holds the same weights: one writes the folder, the rest wait
        with atomic_folder(out_dir) as tmp:
            trained.save_pretrained(tmp, safe_serialization=True)
            tokenizer.save_pretrained(tmp)
            moments = 0
            if sec.save_optimizer:  # for a GRPO stage that continues them (optim.sft_moments)
                from training.optim import SFT_MOMENTS, save_moments

                moments = save_moments(tmp / SFT_MOMENTS, trainer.optimizer, model, (args.adam_beta1, args.adam_beta2))
            (tmp / "sft_info.json").write_text(json.dumps({
                "demonstrations": len(rows), "steps": result.global_step, "train_loss": result.training_loss,
                "seconds": round(time.time() - t0, 1), "lora": sec.lora.enabled, "config_hash": cfg.config_hash(),
                "stopped_at_max_minutes": stopped_early, "scheduler": sec.scheduler, "shared_prefix": packed,
                "batches_per_epoch": batches,
                "trainable_params": sum(p.numel() for p in model.parameters() if p.requires_grad),
                "epochs": round(result.global_step * sec.gradient_accumulation_steps / max(1, batches), 3),
                "optimizer_moments": moments, "adam_betas": [args.adam_beta1, args.adam_beta2],
            }, indent=1))
            write_manifest(tmp, source=f"sft:{sec.data_path}")
    acc.wait_for_everyone()
    shutil.rmtree(work, ignore_errors=True)
    model.train()
    return out_dir


def shared_prefix_applies(sec: SFTSection, cfg: TrainConfig) -> bool:
    """Shared-prefix packs need the prefix's cache inside one process's forward: not under DDP (the loss calls the
    decoder directly, outside DDP's forward) and not with gradient checkpointing (which turns the cache off)."""
    import os

    return sec.shared_prefix and int(os.environ.get("WORLD_SIZE", "1")) == 1 and not cfg.model.gradient_checkpointing


def _packed_trainer(base: type, bf16: bool) -> type:
    """TRL's SFTTrainer with the forward of `training.sft_packs`: same loop, optimizer, schedule and logs; the loss
    is the mean NLL over the assistant tokens of all accumulated packs, as TRL's own."""
    from contextlib import nullcontext

    import torch

    from training.sft_packs import pack_token_logprobs

    class PackedSFTTrainer(base):  # type: ignore[misc, valid-type]
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            dev = inputs["input_ids"].device.type
            amp = torch.autocast(dev, dtype=torch.bfloat16) if bf16 and not torch.is_autocast_enabled(dev) \
                else nullcontext()
            with amp:
                lp, ent = pack_token_logprobs(model, inputs["prefix_ids"], inputs["input_ids"],
                                              inputs["attention_mask"], inputs["labels"])
            n = lp.numel() if num_items_in_batch is None else num_items_in_batch
            loss = -lp.sum() / torch.as_tensor(n).clamp(min=1)
            mode = "train" if model.training else "eval"
            self._metrics[mode]["entropy"].append(ent.mean().item() if ent.numel() else 0.0)
            if mode == "train":  # tokens the conversations hold, the prefix counted once per row as TRL counts it
                b, p = inputs["input_ids"].shape[0], inputs["prefix_ids"].shape[1]
                self._total_train_tokens += int(inputs["attention_mask"].sum()) + b * p
            self._metrics[mode]["num_tokens"] = [self._total_train_tokens]
            return (loss, None) if return_outputs else loss

    return PackedSFTTrainer

