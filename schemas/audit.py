"""The reward audit's report: findings of the gaming probes, trivial-policy baselines, the human inspection.

Why a contract of its own: the CLI (`rlvr audit --json`), the studio's audit page and the demo all read this one
shape, and other tools depend on the top-level keys `verdict`, `findings` (each with `family`, `probe`,
`severity`, `fooled_rows`, `examples`), `baselines` and `inspection`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Severity = Literal["info", "low", "medium", "high", "critical"]
SEVERITY_RANK: dict[str, int] = {"info": 0, "low": 1, "medium": 2, "high": 3, "critical": 4}
FAIL_AT: Severity = "high"  # the verdict fails (exit 1) on any finding at or above this severity


def severity_at_least(severity: str, floor: str = FAIL_AT) -> bool:
    return SEVERITY_RANK[severity] >= SEVERITY_RANK[floor]


class Example(BaseModel):
    """One input that fooled (or tripped) the reward: what went in and what came out."""

    model_config = ConfigDict(extra="forbid")
    row: int
    row_id: str | None = None
    input: str
    score: float | None = None
    passed: bool | None = None
    note: str = ""


class Finding(BaseModel):
    """A probe that fooled the reward on at least one row (or, for robustness probes, a false negative)."""

    model_config = ConfigDict(extra="forbid")
    family: str
    probe: str
    severity: Severity
    fooled_rows: int
    tested_rows: int
    message: str = ""
    rows: list[int] = Field(default_factory=list)  # first row indices fooled (at most 50)
    examples: list[Example] = Field(default_factory=list)  # at most 3


class ProbeRun(BaseModel):
    """What each probe did, also when it found nothing or did not apply (so a report shows its coverage)."""

    model_config = ConfigDict(extra="forbid")
    family: str
    probe: str
    status: Literal["clean", "finding", "skipped"]
    tested_rows: int = 0
    fooled_rows: int = 0
    note: str = ""


class BaselinePolicy(BaseModel):
    """A trivial policy's results over the whole dataset."""

    model_config = ConfigDict(extra="forbid")
    pass_rate: float
    mean_score: float | None
    rows: int
    errors: int = 0
    description: str = ""


class Baselines(BaseModel):
    """Pass rates of policies that do not solve anything; a reward worth training on keeps them near zero."""

    model_config = ConfigDict(extra="forbid")
    reference_pass_rate: float
    policies: dict[str, BaselinePolicy] = Field(default_factory=dict)

    @property
    def worst(self) -> tuple[str, float] | None:
        if not self.policies:
            return None
        name = max(self.policies, key=lambda k: self.policies[k].pass_rate)
        return name, self.policies[name].pass_rate


class Disagreement(BaseModel):
    """An inspected sample where the reward's verdict and the person's label differ."""

    model_config = ConfigDict(extra="forbid")
    sample: int
    row: int
    row_id: str | None = None
    completion: str
    score: float | None
    reward_passed: bool | None
    human_label: bool


class InspectionSummary(BaseModel):
    """Sampled completions scored by the reward, and (once labelled) how well the reward agrees with a person."""

    model_config = ConfigDict(extra="forbid")
    samples: int = 0
    model: str | None = None
    table: str | None = None  # the Parquet inspection table
    table_csv: str | None = None
    pass_rate: float | None = None
    mean_score: float | None = None
    errors: int = 0
    length_score_spearman: float | None = None
    labelled: int = 0
    accuracy: float | None = None
    kappa: float | None = None
    confusion: dict[str, int] = Field(default_factory=dict)  # tp, tn, fp (reward pass, human fail), fn
    disagreements: list[Disagreement] = Field(default_factory=list)
    note: str = ""


class AuditReport(BaseModel):
    """Everything the audit found. `verdict` is "fail" when any finding is at or above severity "high"."""

    model_config = ConfigDict(extra="forbid")
    verdict: Literal["pass", "fail"]
    reward: str
    dataset: str | None = None
    reference_field: str = "answer"
    reward_kind: Literal["text", "trajectory"] = "text"
    rows: int = 0
    answer_format: str | None = None  # the rendering of the reference that the reward accepts best
    findings: list[Finding] = Field(default_factory=list)
    probes: list[ProbeRun] = Field(default_factory=list)
    baselines: Baselines | None = None
    inspection: InspectionSummary | None = None
    seconds: float = 0.0
    scored_samples: int = 0
    meta: dict[str, Any] = Field(default_factory=dict)

    @property
    def blocking(self) -> list[Finding]:
        return [f for f in self.findings if severity_at_least(f.severity)]
