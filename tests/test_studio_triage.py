"""Triage page: failures bucketed by the library's triage, recommendations shown, buckets merged as regression tasks."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

PAGE = "../studio/pages/failure_triage.py"


@pytest.fixture()
def ws(tmp_path, monkeypatch):
    monkeypatch.setenv("RLVR_STUDIO_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.setenv("RLVR_HOME", str(tmp_path / "home"))
    from studio.workspace import Workspace

    return Workspace.open(tmp_path / "ws")


def _failures(path):
    lines = []
    for day in ("2026-13-01", "2026-02-30", "2026-00-10"):
        lines.append({"id": f"p-{day}", "messages": [{"role": "user", "content": f"Move my deadline to {day}"},
                      {"role": "assistant", "content": "ok"}],
                      "error": f"Invalid date '{day}' for field due_date of task 00000{day[-1]}3"})
    for s in (30, 45):
        lines.append({"id": f"t-{s}", "messages": [{"role": "user", "content": f"Email Bob about item {s}"},
                      {"role": "assistant", "content": "ok"}], "error": f"Upstream timeout after {s}s calling CRM"})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_triage_buckets_and_regression_tasks(ws):
    from generators.task_io import read_tasks

    _failures(ws.root / "triage" / "prod_failures.jsonl")
    at = AppTest.from_file(PAGE, default_timeout=60).run()
    assert not at.exception
    at.button(key="run_triage").click().run()
    assert not at.exception, at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["traces"] == "5"
    assert metrics["buckets"] == "2"  # invalid dates vs upstream timeouts, whatever their specifics
    table = at.dataframe[0].value
    assert sorted(table["failures"].tolist()) == [2, 3]
    assert all(table["recommended"] != "")
    # merge the buckets into the arithmetic example dataset as regression tasks
    at.selectbox(key="reg_into").set_value("datasets/arithmetic_tasks.jsonl").run()
    at.button(key="add_regression").click().run()
    assert not at.exception
    tasks = read_tasks(ws.root / "datasets" / "arithmetic_tasks.jsonl")
    reg = [t for t in tasks if t.split == "regression"]
    assert len(reg) == 5 and all(t.metadata["category"].startswith("regression/") for t in reg)


def test_bad_failures_file_is_a_message(ws):
    (ws.root / "triage" / "broken.jsonl").write_text('{"id": 1}\n')
    at = AppTest.from_file(PAGE, default_timeout=60).run()
    at.button(key="run_triage").click().run()
    assert not at.exception
    assert any("cannot triage this file" in e.value for e in at.error)
