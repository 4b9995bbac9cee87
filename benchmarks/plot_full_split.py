"""Every GRPO stage judged on learn_workplace's whole test split, in one picture: the paired difference from its SFT
model in points with the 95% bootstrap interval, and how many tasks it gained and lost. A section with
`"stage": "sft"` is a control (the same SFT model trained on by SFT alone) and is drawn apart, as a blue square.

    .venv/bin/python benchmarks/plot_full_split.py     # reads learn_workplace.json, writes learn_workplace_full_split.png

Why: the 48-task sample's verdicts moved by one or two passes under weight changes of 1e-6, so the stages were judged
again on all 265 test tasks (`greedy_episode_diff.py --eval-tasks 265`, each written to a `*_on_full_test_split`
section). Those sections are what says whether "SFT + GRPO above SFT alone" is met, and a dozen of them read better
as one chart than as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "learn_workplace.json"
SUFFIX = "_on_full_test_split"


def split_stages(out: dict[str, Any]) -> list[dict[str, Any]]:
    """The whole-split sections in the order they were recorded: label, session, SFT and stage passes, the paired
    difference and its interval. A section without a paired comparison is refused by name: the chart would be wrong
    without it."""
    rows = []
    for key, sec in out.items():
        if not key.endswith(SUFFIX) or not isinstance(sec, dict):
            continue
        paired = sec.get("paired")
        if not paired or "ci95_points" not in paired:
            raise ValueError(f"{RESULT.name}: {key} has no paired comparison (paired.delta_points, paired.ci95_points)")
        rows.append({"label": key[: -len(SUFFIX)], "session": sec.get("session"), "before": sec["passed"]["before"],
                     "after": sec["passed"]["after"], "n": sec.get("n", paired.get("n_tasks")),
                     "delta": paired["delta_points"], "ci": paired["ci95_points"],
                     "gained": len(paired.get("gained", [])), "lost": len(paired.get("lost", [])),
                     "significant": bool(paired.get("significant")), "control": sec.get("stage") == "sft"})
    return rows


def section_from_diff(diff: dict[str, Any], after: str = "sft_grpo") -> dict[str, Any]:
    """The numbers a `*_on_full_test_split` section records, derived from the `greedy_episode_diff.py` file it names:
    passes overall and on the seen and held-out templates, the lost and gained tasks by template, the first-call
    changes, and learn_workplace's paired bootstrap (`paired_stages`, the same one its timed runs record), `after`
    naming the later stage (`sft_more` for the more-SFT control). Why: the
    sections were written from these files; deriving them here lets anyone re-check a section from the repository."""
    from collections import Counter

    from learn_workplace import paired_stages

    tasks = diff["tasks"]
    passed = {side: [t["task_id"] for t in tasks if t[side]["passed"]] for side in ("before", "after")}
    paired = paired_stages([t["task_id"] for t in tasks], {"sft": passed["before"], after: passed["after"]},
                           "sft", after)

    def count(held_out: bool) -> dict[str, int]:
        ts = [t for t in tasks if t["held_out_template"] == held_out]
        return {"n": len(ts), "before": sum(t["before"]["passed"] for t in ts),
                "after": sum(t["after"]["passed"] for t in ts)}

    def by_template(ids: list[str]) -> dict[str, int]:
        wanted = set(ids)
        return dict(Counter(t["template"] for t in tasks if t["task_id"] in wanted).most_common())

    return {"n": len(tasks), "passed": {k: len(v) for k, v in passed.items()}, "seen_templates": count(False),
            "held_out_templates": count(True), "lost_by_template": by_template(paired["lost"]),
            "gained_by_template": by_template(paired["gained"]), "paired": paired,
            "first_call_changes": diff["first_call_changes"]}


def plot(rows: list[dict[str, Any]], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 0.42 * len(rows) + 1.6))
    ys = list(range(len(rows)))[::-1]
    for y, r in zip(ys, rows):
        color = ("#36c" if r["control"] else "#c63" if r["significant"] and r["delta"] < 0
                 else "#2a7" if r["significant"] else "#888")
        ax.errorbar(r["delta"], y, xerr=[[r["delta"] - r["ci"][0]], [r["ci"][1] - r["delta"]]],
                    fmt="s" if r["control"] else "o", color=color, capsize=3)
        ax.text(max(r["ci"][1], 0) + 0.4, y, f"{r['before']} -> {r['after']} of {r['n']} (+{r['gained']} -{r['lost']})",
                va="center", fontsize=7)
    ax.axvline(0, color="#69c", linewidth=1)
    ax.set_yticks(ys, [(f"{r['label']} (s{r['session']})" if r["session"] else r["label"])
                       + (", SFT only" if r["control"] else "") for r in rows], fontsize=7)
    ax.set_xlabel("the stage minus its SFT model, whole test split (points, paired 95% CI)")
    ax.set_title("learn_workplace: every stage judged on all test tasks\n(red: GRPO significantly below SFT; "
                 "green: significantly above; blue square: more SFT instead of GRPO)", fontsize=9)
    lo = min(r["ci"][0] for r in rows)
    ax.set_xlim(min(lo - 1, -1), max(max(r["ci"][1] for r in rows) + 12, 12))
    fig.tight_layout()
    tmp = path.with_name(f".{path.stem}.tmp.png")
    fig.savefig(tmp, dpi=90, bbox_inches="tight")
    plt.close(fig)
    os.replace(tmp, path)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--result", type=Path, default=RESULT, help="learn_workplace's JSON")
    ap.add_argument("--out", type=Path, default=None, help="the PNG (default: <result>_full_split.png)")
    a = ap.parse_args()
    rows = split_stages(json.loads(a.result.read_text()))
    if not rows:
        raise SystemExit(f"{a.result}: no *{SUFFIX} section to plot (greedy_episode_diff.py --eval-tasks 265 writes "
                         "the comparison they are made from)")
    out = plot(rows, a.out or a.result.with_name(f"{a.result.stem}_full_split.png"))
    print(f"{len(rows)} stages -> {out}")


if __name__ == "__main__":
    main()
