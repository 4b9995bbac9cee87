"""The checkpoint manifest: what a tuned checkpoint is made of, so that it can be reproduced, promoted, rolled back."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class CheckpointManifest(BaseModel):
    """Written last into a checkpoint folder (`manifest.json`); a folder without one is incomplete and never used.

    `weights_hash` is the digest of the weight files (adapter or full) so the registry can verify a rollback.
    """

    model_config = ConfigDict(extra="forbid")
    name: str
    base_model: str
    weights_hash: str
    weights_files: list[str] = Field(default_factory=list)
    adapter: bool = False
    dataset_hash: str | None = None
    reward_version: str | None = None
    config_hash: str | None = None
    config: dict[str, Any] = Field(default_factory=dict)
    step: int = 0
    metrics: dict[str, float] = Field(default_factory=dict)
    parent: str | None = None
    created_at: float = 0.0
