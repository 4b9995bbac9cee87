"""learn_workplace's paired comparison of two stages on the same test tasks (what its JSON says about SFT + GRPO
against SFT beyond the two pass rates)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from learn_workplace import paired_stages  # noqa: E402

IDS = [f"wp-{i:03d}" for i in range(48)]


def test_a_stage_that_swaps_a_few_passes_is_reported_task_by_task_and_not_significant():
    sft = IDS[:10]
    grpo = IDS[2:10] + ["wp-020"]  # lost 2, gained 1: 9/48 against 10/48
    r = paired_stages(IDS, {"sft": sft, "sft_grpo": grpo}, "sft", "sft_grpo")
    assert r["gained"] == ["wp-020"] and r["lost"] == ["wp-000", "wp-001"]
    assert r["delta_points"] == round(100 * -1 / 48, 1) and r["n_tasks"] == 48
    low, high = r["ci95_points"]
    assert low < r["delta_points"] < high and low < 0 < high
    assert not r["significant"] and r["p_not_better"] > 0.5


def test_a_large_paired_gain_is_significant():
    r = paired_stages(IDS, {"sft": IDS[:5], "sft_grpo": IDS[:25]}, "sft", "sft_grpo")
    assert r["significant"] and r["ci95_points"][0] > 0 and r["p_not_better"] == 0.0
    assert len(r["gained"]) == 20 and r["lost"] == []


def test_no_pairing_without_both_stages_recorded():
    assert paired_stages(IDS, {"sft": IDS[:10]}, "sft", "sft_grpo") is None


def test_the_whole_split_chart_reads_every_recorded_stage_and_refuses_one_without_its_pairing(tmp_path):
    """plot_full_split.py on the committed JSON: one row per `*_on_full_test_split` section, with the passes and the
    paired interval it recorded, drawn to a real PNG; a section missing its pairing is named, not drawn wrong."""
    import json

    import pytest

    from plot_full_split import RESULT, plot, split_stages

    out = json.loads(RESULT.read_text())
    rows = split_stages(out)
    keys = [k for k in out if k.endswith("_on_full_test_split")]
    assert [r["label"] + "_on_full_test_split" for r in rows] == keys and len(rows) >= 10
    for r, k in zip(rows, keys):
        sec = out[k]
        assert (r["before"], r["after"]) == (sec["passed"]["before"], sec["passed"]["after"])
        assert r["ci"][0] <= r["delta"] <= r["ci"][1]
        assert r["after"] - r["before"] == r["gained"] - r["lost"]
        assert r["control"] == (sec.get("stage") == "sft")  # more SFT instead of GRPO: drawn apart, not as a stage
    assert any(r["control"] for r in rows) and not all(r["control"] for r in rows)
    png = plot(rows, tmp_path / "split.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    broken = {**out, "x_on_full_test_split": {"passed": {"before": 1, "after": 2}, "n": 3}}
    with pytest.raises(ValueError, match="x_on_full_test_split has no paired comparison"):
        split_stages(broken)


def test_every_whole_split_section_is_what_its_committed_diff_file_says():
    """Each `*_on_full_test_split` section's passes, template counts, lost/gained tasks, first-call changes and paired
    interval, derived again from the `greedy_episode_diff.py` file it names: the issue's verdict rests on these
    sections, so none may hold a number its own episodes do not give. (A section may record fewer fields: session
    24's has no by-template counts.)"""
    import json

    from plot_full_split import RESULT, section_from_diff

    out = json.loads(RESULT.read_text())
    checked = 0
    for key, sec in out.items():
        if not key.endswith("_on_full_test_split"):
            continue
        after = sec["paired"]["stages"].split(" - ")[0]
        derived = section_from_diff(json.loads((ROOT / sec["file"]).read_text()), after=after)
        for field, value in derived.items():
            if field in sec:
                assert sec[field] == value, f"{key}.{field}"
        checked += 1
    assert checked >= 25
