"""Rows of the studio's catalog (datasets, reward versions, audits, runs, checkpoints, promotions, evaluations)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class DatasetRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")
    hash: str
    name: str
    path: str
    spec: dict[str, Any] = Field(default_factory=dict)
    counts: dict[str, int] = Field(default_factory=dict)
    created_at: float = 0.0


class RewardVersionRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    content_hash: str
    label: str = ""
    created_at: float = 0.0


class AuditRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: int | None = None
    reward_version: str
    dataset_hash: str | None = None
    passed: bool
    report_path: str | None = None
    summary: dict[str, Any] = Field(default_factory=dict)
    created_at: float = 0.0


class RunRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    name: str
    kind: str = "grpo"  # grpo | sft | dpo | eval
    config: dict[str, Any] = Field(default_factory=dict)
    dataset_hash: str | None = None
    reward_version: str | None = None
    status: str = "running"  # running | finished | failed
    metrics: dict[str, float] = Field(default_factory=dict)
    started_at: float = 0.0
    finished_at: float | None = None


class CheckpointRecord(BaseModel):
    """A registered checkpoint: its folder, the manifest as registered, and the aliases pointing at it now."""

    model_config = ConfigDict(extra="forbid")
    name: str
    path: str
    base_model: str
    weights_hash: str
    parent: str | None = None
    run_id: str | None = None
    dataset_hash: str | None = None
    reward_version: str | None = None
    step: int = 0
    metrics: dict[str, float] = Field(default_factory=dict)
    manifest: dict[str, Any] = Field(default_factory=dict)
    created_at: float = 0.0
    aliases: list[str] = Field(default_factory=list)


class PromotionRecord(BaseModel):
    """One entry of an alias's history. `active` is false once a rollback has undone it."""

    model_config = ConfigDict(extra="forbid")
    id: int
    alias: str
    checkpoint: str
    action: str  # promote | rollback
    previous: str | None = None
    active: bool = True
    note: str = ""
    created_at: float = 0.0


class EvaluationRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: int | None = None
    checkpoint: str | None = None
    model: str
    dataset_hash: str | None = None
    splits: list[str] = Field(default_factory=list)
    report_path: str
    pass_at_1: float
    mean_reward: float | None = None
    created_at: float = 0.0
