"""The dataset spec: YAML and builder agree, every problem is reported with its path, cycles are named."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from generators.builder import SpecBuilder
from generators.spec_io import SpecError, load_spec, parse_spec, spec_hash

ROOT = Path(__file__).resolve().parents[1]
WORLD = ROOT / "examples" / "datasets" / "project_world.yaml"


def _table(*columns, **extra):
    return {"tables": {"t": {"columns": list(columns), **extra}}}


def test_yaml_and_builder_load_into_the_same_model(tmp_path):
    yaml_text = """
name: small
seed: 3
tables:
  t:
    columns:
      - {name: pri, kind: category, values: [low, high], weights: [3, 1]}
      - name: est
        kind: uniform
        low: 1
        high: 8
        conditions: [{when: "pri = 'high'", params: {low: 4, high: 16}}]
    constraints: ["est >= 2"]
"""
    p = tmp_path / "s.yaml"
    p.write_text(yaml_text)
    from_yaml = load_spec(p)
    built = (SpecBuilder("small", seed=3).table("t")
             .column("pri", "category", values=["low", "high"], weights=[3, 1])
             .column("est", "uniform", low=1, high=8).when("est", "pri = 'high'", low=4, high=16)
             .constraint("est >= 2").build())
    assert from_yaml == built
    assert spec_hash(from_yaml) == spec_hash(built)


def test_every_problem_is_listed_with_its_path():
    with pytest.raises(SpecError) as ei:
        parse_spec(_table(
            {"name": "a", "kind": "uniform", "low": 3, "high": 1},
            {"name": "b", "kind": "category", "values": ["x"], "weigths": [1]},
            {"name": "c", "kind": "nope"},
            {"name": "d", "kind": "category", "values": ["x", "y"], "weights": [1]},
        ))
    probs = ei.value.problems
    assert len(probs) == 4, probs
    assert any(p.startswith("tables.t.columns[0] (a)") and "high >= low" in p for p in probs)
    assert any(p.startswith("tables.t.columns[1] (b).weigths") and "unknown key" in p for p in probs)
    assert any(p.startswith("tables.t.columns[2] (c)") and "unknown column kind 'nope'" in p for p in probs)
    assert any(p.startswith("tables.t.columns[3] (d)") and "expected 2 weights" in p for p in probs)


def test_condition_params_are_checked_against_the_kind():
    with pytest.raises(SpecError, match=r"conditions\[0\]\.params: \['lam'\] not a param of kind 'uniform'"):
        parse_spec(_table({"name": "x", "kind": "uniform", "low": 0, "high": 1,
                           "conditions": [{"when": "x > 0", "params": {"lam": 2}}]}))
    with pytest.raises(SpecError, match="high >= low"):
        parse_spec(_table({"name": "k", "kind": "category", "values": ["a"]},
                          {"name": "x", "kind": "uniform", "low": 0, "high": 1,
                           "conditions": [{"when": "k = 'a'", "params": {"low": 5}}]}))


def test_cycle_is_an_error_naming_the_columns():
    with pytest.raises(SpecError, match=r"dependency cycle (a -> c -> b -> a|c -> b -> a -> c|b -> a -> c -> b) \(each reads the next\)"):
        parse_spec(_table(
            {"name": "a", "kind": "expression", "expr": "c + 1"},
            {"name": "b", "kind": "expression", "expr": "a * 2"},
            {"name": "c", "kind": "template", "template": "{b}!"},
            {"name": "free", "kind": "uniform", "low": 0, "high": 1},
        ))


def test_cycle_through_a_condition_and_a_subcategory():
    with pytest.raises(SpecError, match="dependency cycle"):
        parse_spec(_table(
            {"name": "p", "kind": "category", "values": ["x"],
             "conditions": [{"when": "s = 'y'", "params": {"values": ["x"]}}]},
            {"name": "s", "kind": "subcategory", "parent": "p", "values": {"x": ["y"]}},
        ))


def test_unknown_references_name_the_field():
    with pytest.raises(SpecError, match=r"tables.t.columns\[0\] \(d\).reference: no column 'created'"):
        parse_spec(_table({"name": "d", "kind": "timedelta", "reference": "created", "low": 0, "high": 1}))
    with pytest.raises(SpecError, match=r"tables.t.constraints\[0\].other: no column 'zz'"):
        parse_spec(_table({"name": "a", "kind": "uniform", "low": 0, "high": 1}, constraints=["a < zz"]))
    with pytest.raises(SpecError, match=r"\(fk\).table: no table 'people'"):
        parse_spec(_table({"name": "fk", "kind": "foreign_key", "table": "people", "column": "email"}))
    with pytest.raises(SpecError, match="not a valid expression"):
        parse_spec(_table({"name": "e", "kind": "expression", "expr": "1 +* 2"}))


def test_table_cycle_through_foreign_keys():
    spec = {"tables": {
        "a": {"columns": [{"name": "x", "kind": "foreign_key", "table": "b", "column": "y"}]},
        "b": {"columns": [{"name": "y", "kind": "foreign_key", "table": "a", "column": "x"}]}}}
    with pytest.raises(SpecError, match=r"tables: dependency cycle (a -> b -> a|b -> a -> b)"):
        parse_spec(spec)


def test_constraint_strings_parse():
    s = parse_spec(_table({"name": "a", "kind": "uniform", "low": 0, "high": 1},
                          {"name": "b", "kind": "uniform", "low": 0, "high": 1},
                          constraints=["a < b", "a >= 0.25", {"column": "b", "op": "!=", "value": 0.5}]))
    c = s.tables["t"].constraints
    assert (c[0].other, c[1].value, c[2].op) == ("b", 0.25, "!=")
    with pytest.raises(SpecError, match="expected 'column OP column'"):
        parse_spec(_table({"name": "a", "kind": "uniform", "low": 0, "high": 1}, constraints=["a is big"]))


def test_rlvr_validate(tmp_path):
    from studio.cli import app

    runner = CliRunner()
    ok = runner.invoke(app, ["validate", str(WORLD)])
    assert ok.exit_code == 0, ok.output
    assert "valid" in ok.output and "tasks" in ok.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("tables:\n  t:\n    columns:\n      - {name: a, kind: uniform, low: 1}\n      - {name: b, kind: poisson, lam: -1}\n")
    res = runner.invoke(app, ["validate", str(bad)])
    assert res.exit_code == 2
    assert "tables.t.columns[0] (a).high" in res.output and "required" in res.output
    assert "tables.t.columns[1] (b).lam" in res.output


def test_spec_exports_a_json_schema():
    from schemas.dataset_spec import DatasetSpec

    js = DatasetSpec.model_json_schema()
    assert "tables" in js["properties"]
    kinds = {v.get("properties", {}).get("kind", {}).get("const") for v in js["$defs"].values()}
    assert {"category", "foreign_key", "llm_structured", "timedelta"} <= kinds


def test_rlvr_preview_shows_rows_profile_and_relations():
    from studio.cli import app

    res = CliRunner().invoke(app, ["preview", str(WORLD), "-n", "6"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "tasks (6 rows)" in res.output and "profile" in res.output
    assert "[ok  ] tasks: due_at > created_at" in res.output
