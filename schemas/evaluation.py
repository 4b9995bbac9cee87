"""Evaluation reports: per-sample verdicts, per-task pass counts, aggregates, and the A/B comparison.

Kept as pydantic models so that a report written by `rlvr eval --json` is the same object the studio, the
registry and `rlvr eval compare` read back, validated on the way in.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class SampleResult(BaseModel):
    """One sampled completion (or episode) of one task and its verdict.

    `reason` is the failure reason code (the verifier's, e.g. `wrong_tool`) or "" when it passed; a reward that
    crashed has `error` set and counts as an error, never as a silent 0.
    """

    model_config = ConfigDict(extra="forbid")
    completion: str = ""
    score: float | None = None
    passed: bool = False
    reason: str = ""
    error: str | None = None
    components: dict[str, float] = Field(default_factory=dict)
    turns: int = 0
    tool_calls: int = 0
    messages: list[dict[str, Any]] | None = None


class TaskEval(BaseModel):
    """All samples of one task: `n` samples, `c` of them passing; `category` groups the report."""

    model_config = ConfigDict(extra="forbid")
    task_id: str
    split: str = "test"
    category: str = "all"
    prompt: list[dict[str, Any]] = Field(default_factory=list)
    n: int
    c: int
    mean_score: float | None = None
    samples: list[SampleResult] = Field(default_factory=list)

    @property
    def pass_rate(self) -> float:
        return self.c / self.n if self.n else 0.0


class GroupStats(BaseModel):
    """Aggregates over a group of tasks (a category, a split, or everything)."""

    model_config = ConfigDict(extra="forbid")
    tasks: int
    samples: int
    pass_at_1: float
    pass_at_k: dict[str, float] = Field(default_factory=dict)
    mean_reward: float | None = None
    components: dict[str, float] = Field(default_factory=dict)
    errors: int = 0
    failure_reasons: dict[str, int] = Field(default_factory=dict)


class EvalReport(BaseModel):
    """What `rlvr eval` writes: the overall numbers, per category, per split, per failure reason, and every task."""

    model_config = ConfigDict(extra="forbid")
    model: str
    dataset: str
    dataset_hash: str | None = None
    splits: list[str] = Field(default_factory=list)
    mode: str = "single_turn"  # single_turn | environment
    reward: str | None = None
    n_samples: int
    k: int
    temperature: float = 0.0
    max_new_tokens: int = 0
    seed: int = 0
    seconds: float = 0.0
    created_at: float = 0.0
    overall: GroupStats
    by_category: dict[str, GroupStats] = Field(default_factory=dict)
    by_split: dict[str, GroupStats] = Field(default_factory=dict)
    tasks: list[TaskEval] = Field(default_factory=list)
    plots: list[str] = Field(default_factory=list)


class TaskFlip(BaseModel):
    """A task whose pass rate changed between A and B (a fix when B is higher, a regression when lower)."""

    model_config = ConfigDict(extra="forbid")
    task_id: str
    category: str
    a: float
    b: float
    kind: str  # fixed | broken


class CompareReport(BaseModel):
    """`rlvr eval compare A B`: the paired bootstrap CI of B - A over shared tasks and the per-task flips."""

    model_config = ConfigDict(extra="forbid")
    a: str
    b: str
    metric: str = "pass_at_1"
    n_tasks: int
    only_in_a: int = 0
    only_in_b: int = 0
    mean_a: float
    mean_b: float
    delta: float
    ci_low: float
    ci_high: float
    confidence: float
    p_not_better: float
    significant: bool
    n_resamples: int
    by_category: dict[str, dict[str, float]] = Field(default_factory=dict)
    flips: list[TaskFlip] = Field(default_factory=list)
