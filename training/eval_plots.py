"""The evaluation report's plots: pass rate by category (one bar group per split) and failure-mode counts.

Written with matplotlib's Agg backend so they render on a headless machine; saved beside the report JSON as
`<stem>.pass_by_category.png` and `<stem>.failure_modes.png`, and listed in the report.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from schemas.evaluation import EvalReport


def _save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".png", dir=path.parent)
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=110, bbox_inches="tight")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def write_plots(report: EvalReport, json_path: str | Path) -> list[Path]:
    """Render both plots next to `json_path`; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    json_path = Path(json_path)
    stem = json_path.with_suffix("")
    out: list[Path] = []

    cats = list(report.by_category)
    fig, ax = plt.subplots(figsize=(max(4.0, 0.9 * len(cats) + 2), 3.2))
    rates = [report.by_category[c].pass_at_1 for c in cats]
    bars = ax.bar(cats, rates, color="#4c78a8")
    for bar, c in zip(bars, cats):
        ax.annotate(f"{report.by_category[c].tasks}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    ha="center", va="bottom", fontsize=7)
    ax.axhline(report.overall.pass_at_1, color="#e45756", linestyle="--", linewidth=1,
               label=f"overall {report.overall.pass_at_1:.2f}")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("pass@1")
    ax.set_title(f"pass@1 by category ({report.model})", fontsize=9)
    ax.legend(fontsize=7)
    ax.tick_params(axis="x", labelrotation=30, labelsize=7)
    out.append(_save(fig, Path(f"{stem}.pass_by_category.png")))
    plt.close(fig)

    reasons = report.overall.failure_reasons
    fig, ax = plt.subplots(figsize=(max(4.0, 0.8 * len(reasons) + 2), 3.2))
    if reasons:
        ax.bar(list(reasons), list(reasons.values()), color="#f58518")
        ax.tick_params(axis="x", labelrotation=30, labelsize=7)
    else:
        ax.text(0.5, 0.5, "no failures", ha="center", va="center", transform=ax.transAxes)
    ax.set_ylabel("failing samples")
    ax.set_title(f"failure modes ({report.overall.samples} samples)", fontsize=9)
    out.append(_save(fig, Path(f"{stem}.failure_modes.png")))
    plt.close(fig)
    return out
