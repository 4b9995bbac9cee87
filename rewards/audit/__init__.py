"""The reward audit: attack a reward the way a policy would before training on it, measure trivial-policy
baselines, and make the 50-100-sample human inspection a first-class step.

    from rewards.audit import audit_callable
    report, ctx = audit_callable(my_reward, rows, reference_field="answer")

Layout: `scoring` (the one seam to the reward), `context` (shared run state), `formats` (answer renderings and
values), `trajectories` (tool-task inputs), `registry` (what a probe is), `probes/` (one module per family),
`baselines`, `inspection`, `runner`, `report`.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from rewards.audit.registry import REGISTRY, all_probes
from rewards.audit.report import render_markdown, write_json
from rewards.audit.runner import AuditMisuse, run_audit
from rewards.audit.scoring import AuditScorer, scorer_from_callable


def audit_callable(fn: Callable[..., Any], rows: Sequence[dict[str, Any]], **kwargs: Any):
    """Audit a reward callable `fn(completion, **row)` (or `fn(trajectory, **row)`) on dataset rows."""
    scorer = scorer_from_callable(fn, name=kwargs.pop("name", None), sandbox=kwargs.pop("sandbox", "auto"))
    return run_audit(scorer, rows, **kwargs)


__all__ = ["REGISTRY", "AuditMisuse", "AuditScorer", "all_probes", "audit_callable", "render_markdown", "run_audit",
           "scorer_from_callable", "write_json"]
