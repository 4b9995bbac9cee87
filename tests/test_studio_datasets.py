"""Datasets page: a spec's problems are shown at their YAML line; preview, generate and browse go through the
generators library and the output is a valid task dataset."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from studio.yaml_locations import annotate, line_of, path_parts

PAGE = "../studio/pages/dataset_design.py"


@pytest.fixture()
def ws(tmp_path, monkeypatch):
    monkeypatch.setenv("RLVR_STUDIO_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.setenv("RLVR_HOME", str(tmp_path / "home"))
    return tmp_path / "ws"


def test_problem_paths_map_to_yaml_lines():
    text = "name: x\ntables:\n  t:\n    columns:\n      - {name: a, kind: uniform, low: 5, high: 1}\n      - name: b\n        kind: nope\n"
    assert path_parts("tables.t.columns[1] (b).kind") == ["tables", "t", "columns", 1, "kind"]
    assert line_of(text, "tables.t.columns[0] (a).high") == 5
    assert line_of(text, "tables.t.columns[1] (b).kind") == 7
    assert line_of(text, "tables.t.columns[1] (b).missing_field") == 6  # deepest existing node
    assert "# ^ error: boom" in annotate(text, [(7, "boom")]).splitlines()[7]


def test_invalid_spec_shows_each_problem_under_its_line(ws):
    at = AppTest.from_file(PAGE, default_timeout=60).run()
    at.selectbox(key="spec_choice").select("(new spec)").run()
    bad = "name: x\ntables:\n  t:\n    columns:\n      - {name: a, kind: uniform, low: 5, high: 1}\n      - {name: b, kind: nope}\n"
    at.text_area(key="spec_text::(new spec)").input(bad).run()
    assert not at.exception
    assert any("2 problem(s)" in e.value for e in at.error)
    annotated = at.code[0].value.splitlines()
    assert annotated[5].strip().startswith("# ^ error:") and "high" in annotated[5]
    assert "unknown column kind" in annotated[7]
    assert "generate" not in [b.key for b in at.button]


def test_preview_generate_browse(ws):
    from generators.task_io import read_tasks

    at = AppTest.from_file(PAGE, default_timeout=60).run()
    at.selectbox(key="spec_choice").select("(new spec)").run()
    assert any("valid spec `tiny_math`" in s.value for s in at.success)
    at.button(key="preview").click().run()
    assert not at.exception
    assert at.dataframe[0].value.shape[0] == 10  # the preview rows
    assert any("relations: 3 of 3 hold" in s.value for s in at.success)  # split ratios checked
    at.number_input(key="gen_n").set_value(120).run()
    at.button(key="generate").click().run()
    assert not at.exception
    assert any("wrote `datasets/tiny_math`" in s.value for s in at.success)
    tasks = read_tasks(ws / "datasets" / "tiny_math" / "tasks")
    assert len(tasks) == 120 and {t.split for t in tasks} <= {"train", "validation", "test"}
    # browse + filter
    at.text_input(key="browse_filter").input("a > 15").run()
    shown = at.dataframe[-1].value
    assert len(shown) > 0 and (shown["a"] > 15).all()
    at.text_input(key="browse_filter").input("nonsense ((").run()
    assert any("filter not understood" in e.value for e in at.error)
    # saving a spec stays inside specs/
    at.text_input(key="save_as::(new spec)").input("../../escape.yaml").run()
    at.button(key="save_spec").click().run()
    assert any("outside the studio workspace" in e.value for e in at.error)
    assert not (ws.parent / "escape.yaml").exists()
