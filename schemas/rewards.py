"""What a reward returns and how a reward version is named."""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field, field_validator


class RewardResult(BaseModel):
    """A scored sample. `passed` is the binary verdict; `components` the named intermediate signals.

    `error` is set when the reward itself failed (raised, timed out, returned NaN): such a result is an error,
    shown and counted as one, and its `score` is None rather than a silent 0.
    """

    model_config = ConfigDict(extra="forbid")
    score: float | None
    passed: bool | None = None
    components: dict[str, float] = Field(default_factory=dict)
    reason: str = ""
    error: str | None = None
    reward_version: str | None = None

    @field_validator("score")
    @classmethod
    def _finite(cls, v: float | None) -> float | None:
        if v is not None and not math.isfinite(v):
            raise ValueError(f"score must be finite, got {v}")
        return v

    @property
    def is_error(self) -> bool:
        return self.error is not None


class RewardVersion(BaseModel):
    """A reward's identity: its registered name, a human label and the hash of its content (code + config)."""

    model_config = ConfigDict(extra="forbid")
    name: str
    label: str = ""
    content_hash: str

    def __str__(self) -> str:
        return f"{self.name}@{self.content_hash[:12]}" + (f" ({self.label})" if self.label else "")
