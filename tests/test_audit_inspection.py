"""The inspection step: agreement statistics, the label table round trip, and real sampling from the embedded
model."""

from __future__ import annotations

import polars as pl
import pytest

import audit_gallery as G
from rewards.audit import audit_callable
from rewards.audit.inspection import (
    LabelError, cohens_kappa, inspection_frame, parse_label, samples_and_labels, spearman, write_table,
)


def test_cohens_kappa_matches_hand_computation():
    # 10 items: raters agree on 4 pass + 4 fail, disagree twice -> po = 0.8, pe = 0.5*0.5 + 0.5*0.5 = 0.5
    a = [True] * 5 + [False] * 5
    b = [True] * 4 + [False] + [True] + [False] * 4
    assert cohens_kappa(a, b) == pytest.approx((0.8 - 0.5) / 0.5)
    assert cohens_kappa(a, a) == 1.0
    assert cohens_kappa(a, [not x for x in a]) == pytest.approx(-1.0)
    assert cohens_kappa([True] * 4, [True] * 4) == 1.0  # constant and equal: perfect agreement
    assert cohens_kappa([], []) is None


def test_spearman_handles_ties_and_constants():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 2, 3], [1, 2, 2, 3]) == pytest.approx(1.0)
    assert spearman([1, 2, 3], [5, 5, 5]) is None


def test_parse_label_accepts_common_spellings_and_names_bad_rows():
    assert parse_label("PASS", "x") is True and parse_label("0", "x") is False and parse_label("", "x") is None
    with pytest.raises(LabelError, match="table row 3.*maybe"):
        parse_label("maybe", "t.csv: table row 3")


def test_label_round_trip_reports_accuracy_kappa_and_every_disagreement(tmp_path):
    rows = G.math_rows(12)
    samples = [(i, f"<answer>{r['answer']}</answer>") for i, r in enumerate(rows[:6])]
    samples += [(i, "<answer>0</answer>") for i in range(6, 12)]
    report, ctx = audit_callable(G.sound_strict_tag, rows, samples=samples, sandbox=False, families=["sanity"])
    pq, csv = write_table(inspection_frame(ctx, ctx.samples), tmp_path / "insp.parquet")
    assert pl.read_parquet(pq).columns[:5] == ["sample", "row", "id", "prompt", "completion"]
    # a person labels the CSV: agrees except on samples 0 (says fail) and 7 (says pass)
    frame = pl.read_csv(csv, infer_schema_length=0)
    labels = ["fail"] + ["pass"] * 5 + ["fail", "pass"] + ["fail"] * 4
    frame.with_columns(pl.Series("label", labels)).write_csv(csv)
    drawn, human = samples_and_labels(csv, len(rows))
    assert drawn == samples
    report, _ = audit_callable(G.sound_strict_tag, rows, samples=drawn, labels=human, sandbox=False,
                               families=["sanity"])
    s = report.inspection
    assert s.samples == 12 and s.labelled == 12
    assert s.accuracy == pytest.approx(10 / 12)
    assert s.kappa == pytest.approx(cohens_kappa([True] * 6 + [False] * 6,
                                                 [h for h in human]))
    assert sorted(d.sample for d in s.disagreements) == [0, 7]
    assert s.confusion == {"tp": 5, "tn": 5, "fp": 1, "fn": 1}


def test_labels_file_with_row_outside_dataset_is_refused(tmp_path):
    p = tmp_path / "l.csv"
    pl.DataFrame({"row": ["99"], "completion": ["x"], "label": ["pass"]}).write_csv(p)
    with pytest.raises(LabelError, match="row 99 is outside"):
        samples_and_labels(p, 5)


def test_sampling_from_the_embedded_model_feeds_the_inspection(embedded):
    from studio.audit_sampling import sample_completions

    rows = G.math_rows(4)
    drawn = sample_completions(rows, 4, loaded=embedded, max_new_tokens=6, batch_size=2, seed=1)
    assert len(drawn) == 4 and len({i for i, _ in drawn}) == 4
    assert all(isinstance(t, str) and t for _, t in drawn)
    again = sample_completions(rows, 4, loaded=embedded, max_new_tokens=6, batch_size=2, seed=1)
    assert again == drawn  # seeded sampling is reproducible
    report, ctx = audit_callable(G.sound_strict_tag, rows, samples=drawn, model="default", sandbox=False,
                                 families=["sanity"])
    assert report.inspection.samples == 4 and report.inspection.model == "default"
    frame = inspection_frame(ctx, ctx.samples)
    assert frame["completion"].to_list() == [t for _, t in drawn]


def test_score_following_length_on_sampled_outputs_is_a_finding():
    rows = G.math_rows(12)
    samples = [(i, "Reasoning. " * (3 * i) + "<answer>0</answer>") for i in range(12)]
    report, _ = audit_callable(G.length_bonus, rows, samples=samples, sandbox=False, families=["length"])
    f = next(f for f in report.findings if f.probe == "length_correlation")
    assert f.severity == "medium" and "Spearman 1.00" in f.message
    assert report.inspection.length_score_spearman == pytest.approx(1.0)
    clean, _ = audit_callable(G.sound_strict_tag, rows, samples=samples, sandbox=False, families=["length"])
    assert "length_correlation" not in {f.probe for f in clean.findings}
