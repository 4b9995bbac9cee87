"""Per-step training metrics: one JSON line per step, and PNG plots drawn from the file.

Why JSONL: a killed run keeps every completed step's line; on resume the lines past the restored checkpoint's step
are dropped (those steps are trained again), so the file always describes the run the weights came from.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable

PLOTTED = [
    ("reward_mean", "reward (mean)"),
    ("pass_rate", "pass rate"),
    ("loss", "loss"),
    ("zero_variance_frac", "zero-variance groups (fraction, first round)"),
    ("completion_len_mean", "completion length (tokens)"),
    ("entropy", "entropy"),
    ("step_time_s", "step time (s)"),
    ("eval_pass_at_1", "eval pass@1"),
]


class MetricsLog:
    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)

    def truncate_after(self, step: int) -> None:
        """Keep only lines of steps <= `step` (a resume from the checkpoint of `step`)."""
        if not self.path.exists():
            return
        kept = [line for line in self.path.read_text().splitlines() if line.strip() and _step(line) <= step]
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text("".join(line + "\n" for line in kept))
        os.replace(tmp, self.path)

    def append(self, record: dict[str, Any]) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(record, default=float) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def read(self) -> list[dict[str, Any]]:
        return read_metrics(self.path)


def _step(line: str) -> int:
    try:
        return int(json.loads(line).get("step", 0))
    except ValueError:
        return 1 << 30  # a torn last line (killed mid-write) is dropped


def read_metrics(path: Path) -> list[dict[str, Any]]:
    out = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def plot_metrics(records: Iterable[dict[str, Any]], out: Path, title: str = "") -> Path | None:
    """A grid of the standard metrics against step, as PNG (matplotlib, headless)."""
    records = list(records)
    if not records:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [(k, label) for k, label in PLOTTED if any(k in r for r in records)]
    cols = 3
    rows = max(1, (len(keys) + cols - 1) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 2.8 * rows), squeeze=False)
    for ax, (key, label) in zip(axes.flat, keys):
        pts = [(r["step"], r[key]) for r in records if key in r and r[key] is not None]
        if pts:
            xs, ys = zip(*pts)
            ax.plot(xs, ys, marker="." if len(xs) < 40 else None)
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("step", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(keys):]:
        ax.axis("off")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.stem}.tmp.png")
    fig.savefig(tmp, dpi=90)
    plt.close(fig)
    os.replace(tmp, out)
    return out
