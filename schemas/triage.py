"""Triage results: failure buckets, the intervention recommended for each, and the regression tasks written."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Intervention = Literal["prompt_or_tool_description", "sft_corrected_demonstrations", "dpo_pairs", "rlvr"]

# Lightest first: a prompt or tool-description edit needs no training; SFT needs corrected demonstrations; DPO needs
# pairs of a passing and a failing answer; RLVR needs a verifier and the most compute.
INTERVENTION_ORDER: tuple[str, ...] = ("prompt_or_tool_description", "sft_corrected_demonstrations", "dpo_pairs", "rlvr")


class Recommendation(BaseModel):
    model_config = ConfigDict(extra="forbid")
    intervention: Intervention
    why: str
    evidence: dict[str, Any] = Field(default_factory=dict)
    alternatives: list[str] = Field(default_factory=list)


class Bucket(BaseModel):
    """Failures that share a mode: a verifier reason code first, else a normalised error-text signature."""

    model_config = ConfigDict(extra="forbid")
    name: str
    key_kind: Literal["verifier", "reported", "error_text", "unknown"]
    reason: str
    count: int
    trace_indices: list[int]
    task_ids: list[str] = Field(default_factory=list)
    signature: str = ""
    examples: list[str] = Field(default_factory=list)
    tools: dict[str, int] = Field(default_factory=dict)
    recommendation: Recommendation | None = None


class TriageReport(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source: str
    traces: int
    formats: dict[str, int] = Field(default_factory=dict)
    reverified: int = 0
    passed_on_reverification: list[int] = Field(default_factory=list)
    unverifiable: int = 0
    buckets: list[Bucket] = Field(default_factory=list)
    regression_path: str | None = None
    regression_tasks: int = 0
    created_at: float = 0.0
