"""The state one audit run shares between probes: the rows, the reward seam, the answer format, every score.

Why one object: probes are small and declarative (build inputs, judge results); scoring, caching, the pass
criterion and the record of every scored sample (which the composition probes examine) live here once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Sequence

from rewards.audit.formats import FORMATS, AnswerFormat, as_text, normal, wrong_values
from rewards.audit.scoring import AuditScorer, Item
from schemas.rewards import RewardResult
from schemas.trajectory import Trajectory

EPS = 1e-9


@dataclass
class Case:
    """One input a probe feeds the reward. `row_override` replaces row fields (e.g. a missing reference)."""

    row: int
    item: Item
    variant: str = ""
    row_override: dict[str, Any] | None = None
    source: str = ""  # the probe that built it (set by the runner)


@dataclass
class Scored:
    row: int
    item: Item
    result: RewardResult
    source: str  # which probe (family/name) or step produced it
    override: bool = False  # scored against a modified row (not comparable with the row's other scores)


def item_key(item: Item) -> str:
    if isinstance(item, Trajectory):
        return "T" + item.model_dump_json()
    return "S" + str(item)


def item_text(item: Item, limit: int = 400) -> str:
    """A short readable form of an input, for examples in the report."""
    if isinstance(item, Trajectory):
        calls = [f"{c.name}({json.dumps(c.arguments, sort_keys=True)[:60]})"
                 for m in item.messages if m.role == "assistant" for c in (m.tool_calls or [])]
        text = f"trajectory: {len(calls)} call(s) [{', '.join(calls)[:limit]}] final={item.final_answer!r}"
    else:
        text = str(item)
    return text if len(text) <= limit else text[: limit - 20] + f"... ({len(text)} chars)"


def prompt_text(row: dict[str, Any]) -> str:
    """The user's words of a row's prompt (the last user message), whatever shape the prompt has."""
    p = row.get("prompt")
    if isinstance(p, str):
        return p
    if isinstance(p, list):
        users = [m.get("content", "") if isinstance(m, dict) else getattr(m, "content", "") for m in p
                 if (m.get("role") if isinstance(m, dict) else getattr(m, "role", "")) == "user"]
        if users:
            return str(users[-1])
        return " ".join(str(m.get("content", "")) if isinstance(m, dict) else str(m) for m in p)
    return "" if p is None else str(p)


@dataclass
class AuditContext:
    rows: list[dict[str, Any]]
    reference_field: str
    scorer: AuditScorer
    answer_format: AnswerFormat = FORMATS[0]
    format_detected: bool = False
    reference_results: list[RewardResult | None] = field(default_factory=list)
    scored: list[Scored] = field(default_factory=list)
    gold_items: dict[int, Item] = field(default_factory=dict)  # the reference, in the accepted form, per row
    samples: list[tuple[int, str, RewardResult]] = field(default_factory=list)  # sampled model outputs, scored
    score_floor: float | None = None  # the lowest score seen (set after the probe batch): nothing at it "passes"
    episode: Any = None  # trajectories.Episode: a live environment for tool probes, when the caller has one
    _cache: dict[tuple[int, str, str], RewardResult] = field(default_factory=dict)

    # ---- rows and references -------------------------------------------------------------------------------
    @property
    def kind(self) -> str:
        return self.scorer.kind

    def reference(self, i: int) -> str | None:
        v = self.rows[i].get(self.reference_field)
        if v is None or (isinstance(v, (list, dict)) and not v):
            return None if v is None else ""
        return as_text(v) if not isinstance(v, (list, dict)) else json.dumps(v, sort_keys=True)

    def row_id(self, i: int) -> str | None:
        v = self.rows[i].get("id")
        return None if v is None else str(v)

    def text_rows(self) -> list[int]:
        """Rows with a non-empty textual reference (the rows text probes can build on)."""
        return [i for i in range(len(self.rows)) if self.reference(i)]

    def wrong(self, i: int, k: int = 3) -> list[str]:
        ref = self.reference(i) or ""
        others = [self.reference(j) or "" for j in _neighbours(i, len(self.rows))]
        return wrong_values(ref, others, k)

    def is_reference(self, i: int, value: str) -> bool:
        ref = self.reference(i)
        return ref is not None and normal(ref) == normal(value)

    # ---- scoring -------------------------------------------------------------------------------------------
    def score(self, cases: Sequence[Case], source: str = "") -> list[RewardResult]:
        """Score cases in one batch through the reward seam; identical inputs are scored once (cached)."""
        keys = [(c.row, item_key(c.item), json.dumps(c.row_override, sort_keys=True, default=str)) for c in cases]
        todo: dict[tuple[int, str, str], Case] = {}
        for k, c in zip(keys, cases):
            if k not in self._cache and k not in todo:
                todo[k] = c
        if todo:
            batch = list(todo.values())
            results = self.scorer.score([c.item for c in batch], [self.row_for(c) for c in batch])
            for k, c, r in zip(todo, batch, results):
                self._cache[k] = r
                self.scored.append(Scored(c.row, c.item, r, c.source or source, c.row_override is not None))
        return [self._cache[k] for k in keys]

    def rescore(self, cases: Sequence[Case]) -> list[RewardResult]:
        """Score again without the cache (the determinism probe)."""
        return self.scorer.score([c.item for c in cases], [self.row_for(c) for c in cases])

    def row_for(self, case: Case) -> dict[str, Any]:
        row = self.rows[case.row]
        return {**row, **case.row_override} if case.row_override else row

    # ---- the pass criterion --------------------------------------------------------------------------------
    def is_pass(self, i: int, result: RewardResult) -> bool:
        """Did the reward accept this input? Its own `passed` verdict when it gives one; otherwise (a plain score)
        a score as high as the reference answer's on that row and above the lowest score seen anywhere (a reward
        that scores everything alike accepts nothing; its reference is reported as rejected instead)."""
        if result.error is not None or result.score is None:
            return False
        if result.passed is not None:
            return bool(result.passed)
        ref = self.reference_results[i] if i < len(self.reference_results) else None
        if ref is None or ref.score is None or ref.error is not None:
            return False
        tol = EPS * max(1.0, abs(ref.score))
        if self.score_floor is not None and result.score <= self.score_floor + tol:
            return False
        return result.score >= ref.score - tol

    def reference_passes(self, i: int) -> bool:
        """The reference answer is accepted: no error, `passed` when the reward gives a verdict, else a score
        above the lowest score seen."""
        r = self.reference_results[i] if i < len(self.reference_results) else None
        if r is None or r.error is not None or r.score is None:
            return False
        if r.passed is not None:
            return bool(r.passed)
        return self.score_floor is None or r.score > self.score_floor + EPS * max(1.0, abs(r.score))

    def reference_score(self, i: int) -> float | None:
        r = self.reference_results[i] if i < len(self.reference_results) else None
        return None if r is None or r.error is not None else r.score

    def gold_text(self, i: int) -> str | None:
        ref = self.reference(i)
        return None if ref is None else self.answer_format.render(ref)

    def gold_item(self, i: int) -> Item | None:
        return self.gold_items.get(i)


def _neighbours(i: int, n: int, k: int = 8) -> list[int]:
    return [(i + d) % n for d in range(1, min(k, n - 1) + 1)]
