"""Preference training (DPO) on pairs built from verified outcomes, through TRL's DPOTrainer.

Why pairs from passing vs failing completions of the same prompt: the verifier already says which of two answers
to one task is right, so a pair needs no human label, and both answers come from the model itself (on-policy
rejected samples are what DPO learns most from). Pairs come from an evaluation report (several samples per task),
from triaged production traces (a failing trace and a passing one for the same task), or from a plain JSONL.
The result is a checkpoint with a manifest, registered in the catalog like any other.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any, Callable

from schemas.dpo_config import DPOConfig
from schemas.evaluation import EvalReport


class DPOError(ValueError):
    """No usable pairs, or a bad pairs file; the message names the file and line."""


def _assistant_turns(messages: list[dict[str, Any]], prompt_len: int) -> list[dict[str, Any]]:
    return [{"role": m["role"], "content": m.get("content") or ""} for m in messages[prompt_len:]]


def pairs_from_report(report: EvalReport, max_pairs_per_prompt: int = 4) -> list[dict[str, Any]]:
    """Conversational pairs: for each task with both a passing and a failing sample, (pass, fail) pairs.

    Multi-turn samples (environment episodes) pair their whole generated conversation after the prompt.
    """
    pairs: list[dict[str, Any]] = []
    for t in report.tasks:
        good = [s for s in t.samples if s.passed and s.error is None]
        bad = [s for s in t.samples if not s.passed and s.error is None]
        for j, (g, b) in enumerate(zip(good * len(bad), bad * len(good))):
            if j >= max_pairs_per_prompt:
                break
            if g.completion == b.completion and not g.messages:
                continue
            if g.messages and b.messages:
                n = len(t.prompt)
                chosen, rejected = _assistant_turns(g.messages, n), _assistant_turns(b.messages, n)
                prompt = [dict(m) for m in g.messages[:n]]
            else:
                chosen = [{"role": "assistant", "content": g.completion}]
                rejected = [{"role": "assistant", "content": b.completion}]
                prompt = [{"role": m["role"], "content": m.get("content") or ""} for m in t.prompt]
            pairs.append({"prompt": prompt, "chosen": chosen, "rejected": rejected, "task_id": t.task_id,
                          "rejected_reason": b.reason})
    return pairs


def read_pairs(path: str | Path) -> list[dict[str, Any]]:
    """A JSONL of {prompt, chosen, rejected}; strings or chat-message lists (TRL's two formats)."""
    from generators.task_io import iter_jsonl

    fields = ("prompt", "chosen", "rejected")
    out = []
    for i, rec in iter_jsonl(path, DPOError, "pairs file"):
        missing = [k for k in fields if k not in rec]
        if missing:
            raise DPOError(f"{path}: line {i} lacks field(s) {missing}; expected prompt, chosen, rejected")
        for k in fields:
            if isinstance(rec[k], str):
                rec[k] = [{"role": "user" if k == "prompt" else "assistant", "content": rec[k]}]
            elif not isinstance(rec[k], list):
                raise DPOError(f"{path}: line {i} field {k}: expected a string or a list of chat messages")
        out.append({k: rec[k] for k in fields})
    return out


def load_pairs(cfg: DPOConfig, base: Path | None = None) -> list[dict[str, Any]]:
    path = Path(cfg.pairs.path)
    if not path.is_absolute() and base is not None and not path.exists():
        path = base / path
    if cfg.pairs.source == "eval_report":
        from training.evaluation import load_report

        pairs = pairs_from_report(load_report(path), cfg.pairs.max_pairs_per_prompt)
    elif cfg.pairs.source == "traces":
        from generators.task_io import read_tasks
        from training.triage import pairs_from_traces, read_traces, reverify, workplace_verifier

        tasks_path = Path(cfg.pairs.tasks or "")
        if not tasks_path.is_absolute() and base is not None and not tasks_path.exists():
            tasks_path = base / tasks_path
        traces = read_traces(path)
        reverify(traces, read_tasks(tasks_path), workplace_verifier())
        pairs = pairs_from_traces(traces, cfg.pairs.max_pairs_per_prompt)
    else:
        pairs = read_pairs(path)
    if cfg.pairs.max_pairs:
        pairs = pairs[: cfg.pairs.max_pairs]
    if not pairs:
        raise DPOError(f"{path}: no preference pairs (a task needs both a passing and a failing completion)")
    return [{k: p[k] for k in ("prompt", "chosen", "rejected")} for p in pairs]


def run_dpo(cfg: DPOConfig, *, base: Path | None = None, progress: Callable[[int, int], None] | None = None,
            registry: Any | None = None) -> dict[str, Any]:
    """Train with TRL's DPOTrainer; write the checkpoint (weights, tokenizer, manifest last); register it."""
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import DPOConfig as TRLDPOConfig
    from trl import DPOTrainer

    from training.model import pick_device
    from training.policy import apply_lora, load_policy
    from training.registry import make_manifest

    pairs = load_pairs(cfg, base)
    torch.manual_seed(cfg.seed)
    model, tok = load_policy(cfg.model, seed=cfg.seed, threads=cfg.threads)
    model = apply_lora(model, cfg.lora)
    tok.padding_side = "left"
    out = Path(cfg.output_dir)  # relative to the working directory, like the trainer's output_dir
    work = out / "trainer"
    args = TRLDPOConfig(
        output_dir=str(work), beta=cfg.beta, loss_type=[cfg.loss_type], learning_rate=cfg.lr, max_steps=cfg.max_steps,
        per_device_train_batch_size=cfg.batch_size, gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        max_length=cfg.max_length, logging_steps=1, save_strategy="no", report_to="none", seed=cfg.seed,
        use_cpu=pick_device(cfg.model.device) == "cpu", dataloader_num_workers=0, disable_tqdm=True,
        bf16=cfg.model.dtype == "bfloat16",
    )
    logs: list[dict[str, float]] = []

    class _Log(TrainerCallback):
        def on_log(self, _args, state, control, logs_=None, **kw):  # noqa: ANN001
            entry = kw.get("logs") or logs_ or {}
            logs.append({k: float(v) for k, v in entry.items() if isinstance(v, (int, float))})
            if progress:
                progress(state.global_step, cfg.max_steps)

    # the reference is a frozen copy of the starting policy (with LoRA, TRL uses the base with adapters off)
    ref = None if cfg.lora.enabled else copy.deepcopy(model).eval()
    trainer = DPOTrainer(model=model, ref_model=ref, args=args, train_dataset=Dataset.from_list(pairs),
                         processing_class=tok, callbacks=[_Log()])
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # progress goes through `progress`; no raw dicts on the console
    t0 = time.time()
    trainer.train()
    seconds = time.time() - t0
    final = out / "final"
    final.mkdir(parents=True, exist_ok=True)
    trained = trainer.model
    trained.save_pretrained(final, safe_serialization=True)
    tok.save_pretrained(final)
    last = {k: v for entry in logs for k, v in entry.items()}
    metrics = {k: v for k, v in last.items() if k.startswith(("loss", "rewards/", "logps/"))}
    manifest = make_manifest(final, name=f"{cfg.name}-{int(time.time())}", base_model=cfg.model.name,
                             adapter=cfg.lora.enabled, config=cfg.model_dump(mode="json"), step=cfg.max_steps,
                             metrics=metrics, dataset_hash=None, parent=None)
    registered = None
    if registry is not None and cfg.register_checkpoint:
        registered = registry.register_checkpoint(final).name
    return {"checkpoint": str(final), "name": manifest.name, "registered": registered, "pairs": len(pairs),
            "steps": cfg.max_steps, "seconds": round(seconds, 1), "logs": logs, "metrics": metrics}
