"""One scored completion as `rlvr reward test --json` writes it (and the studio's reward page reads it).

Why a contract: other tools read these files; `error` set means the reward failed on that completion (then
`score` is null), never that the completion scored 0.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ScoredRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    score: float | None
    passed: bool | None = None
    components: dict[str, float] = Field(default_factory=dict)
    error: str | None = None
    reason: str = ""
    reward_version: str | None = None
