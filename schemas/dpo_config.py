"""`rlvr dpo CONFIG`: preference training on (prompt, chosen, rejected) pairs through TRL's DPOTrainer."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from schemas.train_config import LoraSection, ModelSection


class PairsSection(BaseModel):
    """Where pairs come from: a JSONL of `{prompt, chosen, rejected}` records, an evaluation report (passing vs
    failing samples of the same task), or a triage trace file (passing vs failing traces of the same task)."""

    model_config = ConfigDict(extra="forbid")
    path: str
    source: Literal["pairs", "eval_report", "traces"] = "pairs"
    tasks: str | None = None  # with source traces: the task dataset, so traces are re-verified into pass/fail
    max_pairs_per_prompt: int = Field(4, ge=1)
    max_pairs: int | None = Field(None, ge=1)


class DPOConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = "dpo"
    seed: int = 0
    output_dir: str = "runs/dpo"
    threads: int | None = Field(None, ge=1)
    model: ModelSection = Field(default_factory=ModelSection)
    lora: LoraSection = Field(default_factory=LoraSection)
    pairs: PairsSection
    beta: float = Field(0.1, gt=0.0)
    loss_type: str = "sigmoid"
    lr: float = Field(5e-6, gt=0.0)
    max_steps: int = Field(10, ge=1)
    batch_size: int = Field(2, ge=1)
    gradient_accumulation_steps: int = Field(1, ge=1)
    max_length: int = Field(512, ge=16)
    register_checkpoint: bool = True  # record the result in the registry

    @model_validator(mode="after")
    def _check(self) -> "DPOConfig":
        if self.pairs.source == "traces" and not self.pairs.tasks:
            raise ValueError("pairs.source traces needs pairs.tasks (the task dataset the traces are verified against)")
        if self.model.dtype == "float16" and self.model.init == "random":
            raise ValueError("model.dtype float16 cannot train a random-init model stably; use float32 or bfloat16")
        return self
