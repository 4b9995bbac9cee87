"""The base of the studio's built-in verifiers: a frozen pydantic model (its fields are the configuration, hashed
into the reward version) that is callable as a reward and returns a binary RewardResult.

Why pydantic models: configuration is validated at construction (a typo in an option fails immediately), it is
picklable for sandbox workers, and `model_dump` gives the canonical config that versioning hashes.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from schemas.rewards import RewardResult


class MissingFieldError(LookupError):
    """A verifier needs a row field the row lacks (an error result naming the field, never a 0)."""


class Verifier(BaseModel):
    """A configured binary verifier. Subclasses implement `verify(completion, fields) -> RewardResult`."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)
    name: ClassVar[str] = "verifier"
    trusted: ClassVar[bool] = True

    @property
    def config(self) -> "Verifier":
        return self

    def __call__(self, completion: Any, **fields: Any) -> RewardResult:
        return self.verify(completion, fields)

    def verify(self, completion: Any, fields: dict[str, Any]) -> RewardResult:  # pragma: no cover - abstract
        raise NotImplementedError

    def field(self, fields: dict[str, Any], key: str) -> Any:
        """A required row field, or a MissingFieldError that names it (becomes an error result, never a 0)."""
        if key not in fields or fields[key] is None:
            raise MissingFieldError(f"{self.name} needs the row field {key!r}, which this row lacks or has null "
                           f"(row fields: {sorted(fields)[:12]})")
        return fields[key]


def verdict(passed: bool, reason: str = "", **components: float) -> RewardResult:
    """The binary result: score 1.0 for a pass, 0.0 for a failure, `passed` set, components kept."""
    comps = {"passed": float(passed), **{k: float(v) for k, v in components.items()}}
    return RewardResult(score=1.0 if passed else 0.0, passed=passed, components=comps,
                        reason=reason or ("pass" if passed else "fail"))
