"""The probe registry: what a probe is and how the families add theirs.

A probe builds inputs from the dataset's rows (`build`), all probes' inputs are scored in one batch, then each
probe judges its results (`judge`). Most probes are attacks (a wrong answer the reward must reject): declare one
with `@attack(...)` on a function that returns the attack text(s) for a row. Probes that compare results across
the whole run (dominance, component weights) run in phase 1, after every other input has been scored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from rewards.audit.context import AuditContext, Case
from schemas.audit import Severity
from schemas.rewards import RewardResult


@dataclass
class Outcome:
    """A probe's judgement. `fooled` holds (case, result, note) per fooled input; rows count once."""

    tested_rows: int = 0
    fooled: list[tuple[Case, RewardResult, str]] = field(default_factory=list)
    severity: Severity | None = None  # overrides the probe's own severity (e.g. graded by effect size)
    message: str = ""
    skipped: str | None = None

    @property
    def fooled_rows(self) -> list[int]:
        return sorted({c.row for c, _, _ in self.fooled})


class Probe:
    family: str = ""
    name: str = ""
    severity: Severity = "high"
    description: str = ""
    kinds: tuple[str, ...] = ("text",)
    phase: int = 0

    @property
    def key(self) -> str:
        return f"{self.family}/{self.name}"

    def applies(self, ctx: AuditContext) -> str | None:
        """None when the probe applies; otherwise why it is skipped."""
        if ctx.kind not in self.kinds:
            return f"not for {ctx.kind} rewards"
        return None

    def build(self, ctx: AuditContext) -> list[Case]:
        return []

    def judge(self, ctx: AuditContext, cases: Sequence[Case], results: Sequence[RewardResult]) -> Outcome:
        raise NotImplementedError


def judge_attacks(ctx: AuditContext, cases: Sequence[Case], results: Sequence[RewardResult]) -> Outcome:
    """Attacks are wrong answers: each one the reward accepts fooled it on that row."""
    fooled = [(c, r, c.variant) for c, r in zip(cases, results) if ctx.is_pass(c.row, r)]
    return Outcome(tested_rows=len({c.row for c in cases}), fooled=fooled)


class AttackProbe(Probe):
    """A probe whose inputs are wrong answers built per row by `make(ctx, row) -> text | [texts] | None`."""

    def __init__(self, family: str, name: str, severity: Severity, description: str,
                 make: Callable[[AuditContext, int], Any], rows: Callable[[AuditContext], Iterable[int]] | None,
                 kinds: tuple[str, ...] = ("text",)) -> None:
        self.family, self.name, self.severity, self.description = family, name, severity, description
        self.make, self.rows, self.kinds = make, rows, kinds

    def build(self, ctx: AuditContext) -> list[Case]:
        rows = self.rows(ctx) if self.rows else ctx.text_rows()
        cases: list[Case] = []
        for i in rows:
            made = self.make(ctx, i)
            if made is None:
                continue
            for n, item in enumerate(made if isinstance(made, list) else [made]):
                if isinstance(item, Case):
                    cases.append(item)
                else:
                    cases.append(Case(i, item, variant=f"{self.name}#{n}"))
        return cases

    def judge(self, ctx: AuditContext, cases: Sequence[Case], results: Sequence[RewardResult]) -> Outcome:
        if not cases:
            return Outcome(skipped="no row this probe can be built from")
        return judge_attacks(ctx, cases, results)


REGISTRY: dict[str, Probe] = {}


def register(probe: Probe) -> Probe:
    if probe.key in REGISTRY:
        raise ValueError(f"probe {probe.key} registered twice")
    REGISTRY[probe.key] = probe
    return probe


def attack(family: str, name: str, severity: Severity, description: str,
           rows: Callable[[AuditContext], Iterable[int]] | None = None, kinds: tuple[str, ...] = ("text",)):
    """Register an attack probe from its builder function."""

    def deco(make: Callable[[AuditContext, int], Any]) -> Callable[[AuditContext, int], Any]:
        register(AttackProbe(family, name, severity, description, make, rows, kinds))
        return make

    return deco


def all_probes() -> list[Probe]:
    """Every registered probe (importing the family modules registers them)."""
    import rewards.audit.probes  # noqa: F401 - registers the families

    return list(REGISTRY.values())
