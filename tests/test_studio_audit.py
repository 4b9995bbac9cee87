"""Audit page: the probe suite run on a reward through the page (sandboxed), verdict and findings shown, baselines
first, the plots' dominance numbers, and labels given in the table persisted with agreement updated."""

from __future__ import annotations


import polars as pl
import pytest
from streamlit.testing.v1 import AppTest

PAGE = "../studio/pages/reward_audit.py"

GAMEABLE = '''
def contains_answer(completion, answer=None, **_):
    """Exploitable on purpose: passes whenever the reference appears anywhere in the text."""
    return float(answer is not None and str(answer) in completion)
'''


@pytest.fixture()
def ws(studio_ws):
    return studio_ws


def _run(at, file, fn, samples, rows=60):
    at.selectbox(key="audit_reward_file").select(file).run()
    at.selectbox(key="audit_reward_fn").select(fn).run()
    at.selectbox(key="audit_dataset").select("datasets/arithmetic_tasks.jsonl").run()
    at.number_input(key="audit_samples").set_value(samples).run()
    at.number_input(key="audit_rows").set_value(rows).run()
    at.button(key="run_audit").click().run()
    assert not at.exception, at.exception


def test_a_gameable_reward_fails_with_findings(ws):
    (ws.root / "rewards" / "gameable.py").write_text(GAMEABLE)
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    _run(at, "rewards/gameable.py", "contains_answer", samples=0)
    assert any("audit fail" in e.value for e in at.error)
    assert any("verdict **fail**" in e.value for e in at.error)
    findings = at.dataframe[0].value
    assert (findings["severity"].isin(["high", "critical"])).any()
    labels = {m.label for m in at.metric}
    assert "reference answers pass" in labels and "highest failing score" in labels
    # it is in the workspace, with the note of which reward content it judged
    assert len(list((ws.root / "audits").glob("*.meta.json"))) == 1


def test_a_sound_reward_passes_and_labels_persist_with_agreement(ws):
    at = AppTest.from_file(PAGE, default_timeout=300).run()
    _run(at, "rewards/arithmetic_reward.py", "tagged_answer_shaped", samples=3)
    assert any("audit pass" in s.value for s in at.success)
    metrics = {m.label: m.value for m in at.metric}
    assert float(metrics["dominance margin"]) > 0
    assert metrics["labelled"] == "0 / 3"
    table = next((ws.root / "labels").glob("*.parquet"))
    key = f"labels::{table}"
    at.session_state[key] = {"edited_rows": {0: {"label": "fail"}, 1: {"label": "pass"}}, "added_rows": [],
                             "deleted_rows": []}
    at.run()
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["labelled"] == "2 / 3"
    frame = pl.read_parquet(table)
    assert frame["label"].to_list()[:2] == ["fail", "pass"]
    passed = frame["passed"].to_list()[:2]
    expected = sum(p == (lab == "pass") for p, lab in zip(passed, ["fail", "pass"])) / 2
    assert metrics["agreement (accuracy)"] == f"{expected:.0%}"
    # a fresh session (a reload) reads the labels back from the table
    again = AppTest.from_file(PAGE, default_timeout=120).run()
    assert {m.label: m.value for m in again.metric}["labelled"] == "2 / 3"
