"""Every column kind, generated for real and checked on its output (distributions within tolerances, relations
exact), plus hypothesis properties for conditional params and constraints."""

from __future__ import annotations

import re
import sys
from datetime import datetime
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generators.builder import SpecBuilder
from generators.engine import ConstraintUnsatisfiable, GenerationError
from generators.report import build_report
from generators.spec_io import parse_spec
from generators.user_code import UserCodeError
from generators.writer import generate_frames

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
N = 20_000


def gen(spec: dict, n: int = N, table: str = "t") -> pl.DataFrame:
    return generate_frames(parse_spec(spec), n)[table]


def one(*columns, **extra) -> dict:
    return {"seed": 11, "tables": {"t": {"columns": list(columns), **extra}}}


def test_category_weights_and_values():
    df = gen(one({"name": "c", "kind": "category", "values": ["a", "b", "c"], "weights": [6, 3, 1]}))
    freq = dict(df["c"].value_counts().iter_rows())
    assert set(freq) == {"a", "b", "c"}
    for k, p in {"a": 0.6, "b": 0.3, "c": 0.1}.items():
        assert abs(freq[k] / N - p) < 0.015, (k, freq[k] / N)


def test_subcategory_values_belong_to_their_parent():
    values = {"eng": ["be", "fe"], "ops": ["it"], "hr": ["rec", "hrbp", "pay"]}
    df = gen(one({"name": "dept", "kind": "category", "values": list(values)},
                 {"name": "role", "kind": "subcategory", "parent": "dept", "values": values,
                  "weights": {"eng": [9, 1]}}))
    for dept, role in df.select("dept", "role").iter_rows():
        assert role in values[dept]
    eng = df.filter(pl.col("dept") == "eng")["role"]
    assert abs((eng == "be").mean() - 0.9) < 0.03


def test_numeric_samplers_match_their_distributions():
    df = gen(one({"name": "u", "kind": "uniform", "low": -2, "high": 3},
                 {"name": "ui", "kind": "uniform", "low": 1, "high": 6, "integer": True},
                 {"name": "g", "kind": "gaussian", "mean": 10, "std": 2, "decimals": 2},
                 {"name": "be", "kind": "bernoulli", "p": 0.3},
                 {"name": "bi", "kind": "binomial", "n": 10, "p": 0.4},
                 {"name": "po", "kind": "poisson", "lam": 3.5}))
    assert df["u"].min() >= -2 and df["u"].max() <= 3 and abs(df["u"].mean() - 0.5) < 0.05
    assert set(df["ui"].unique().to_list()) == {1, 2, 3, 4, 5, 6} and df["ui"].dtype == pl.Int64
    assert abs(df["g"].mean() - 10) < 0.05 and abs(df["g"].std() - 2) < 0.05
    assert (df["g"] * 100).round(6).cast(pl.Int64).cast(pl.Float64).equals((df["g"] * 100).round(6))
    assert df["be"].dtype == pl.Boolean and abs(df["be"].mean() - 0.3) < 0.015
    assert df["bi"].min() >= 0 and df["bi"].max() <= 10 and abs(df["bi"].mean() - 4) < 0.05
    assert df["po"].min() >= 0 and abs(df["po"].mean() - 3.5) < 0.05


def test_datetime_and_timedelta():
    df = gen(one({"name": "created", "kind": "datetime", "start": "2026-01-01", "end": "2026-03-01", "unit": "h"},
                 {"name": "due", "kind": "timedelta", "reference": "created", "low": 1, "high": 5, "unit": "D"}))
    assert df["created"].dtype == pl.Datetime("us")
    assert df["created"].min() >= datetime(2026, 1, 1) and df["created"].max() <= datetime(2026, 3, 1)
    assert (df["created"].dt.minute() == 0).all() and (df["created"].dt.second() == 0).all()
    delta = (df["due"] - df["created"]).dt.total_seconds()
    assert delta.min() >= 86400 and delta.max() <= 5 * 86400
    assert df["created"].dt.date().n_unique() > 50


def test_uuid_sequence_and_person_fields():
    df = gen(one({"name": "id", "kind": "uuid"},
                 {"name": "seq", "kind": "sequence", "prefix": "T-", "width": 6, "start": 100},
                 {"name": "name", "kind": "person", "field": "name"},
                 {"name": "email", "kind": "person", "field": "email"},
                 {"name": "company", "kind": "person", "field": "company"},
                 {"name": "fr", "kind": "person", "field": "first_name", "person": "other", "locales": ["fr_FR", "de_DE"]},
                 {"name": "loc", "kind": "person", "field": "locale", "person": "other", "locales": ["fr_FR", "de_DE"]}),
             n=5000)
    uuid_re = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
    assert all(uuid_re.match(u) for u in df["id"].to_list()) and df["id"].n_unique() == 5000
    assert df["seq"][0] == "T-000100" and df["seq"][-1] == "T-005099" and df["seq"].n_unique() == 5000
    assert set(df["loc"].unique().to_list()) == {"fr_FR", "de_DE"}
    for name, email in df.select("name", "email").head(200).iter_rows():
        first = re.sub(r"[^a-z0-9]", "", name.split(" ")[0].lower())
        assert email.startswith(first[:3]), (name, email)  # same person: the email is built from the name
        assert re.match(r"^[a-z0-9.\-]+@[a-z0-9.\-]+$", email), email
    assert df["name"].n_unique() > 1000 and df["company"].n_unique() > 20


def test_expression_template_and_custom_columns():
    df = gen(one({"name": "x", "kind": "uniform", "low": 0, "high": 10, "integer": True},
                 {"name": "y", "kind": "expression", "expr": "x * 3 + 1"},
                 {"name": "big", "kind": "expression", "expr": "CASE WHEN x > 5 THEN 'big' ELSE 'small' END"},
                 {"name": "xs", "kind": "expression", "expr": "py:pl.col('x').cast(pl.String).str.zfill(3)"},
                 {"name": "label", "kind": "template", "template": "x={x} is {big} {{literal}}"},
                 {"name": "z", "kind": "custom", "function": "tests.generators_support.user_fns:double_plus_noise",
                  "depends_on": ["x"]}), n=2000)
    assert (df["y"] == df["x"] * 3 + 1).all()
    assert ((df["x"] > 5) == (df["big"] == "big")).all()
    assert (df["xs"].str.len_chars() == 3).all()
    assert df["label"][0] == f"x={df['x'][0]} is {df['big'][0]} {{literal}}"
    assert (df["z"] == df["x"] * 2).all()


def test_a_crash_in_a_custom_column_is_reported_as_such():
    with pytest.raises(UserCodeError, match=r"custom column t.bad .*crashes raised KeyError: 'no_such_field'"):
        gen(one({"name": "bad", "kind": "custom", "function": "tests.generators_support.user_fns:crashes"}), n=10)


def test_conditional_params_first_match_wins():
    df = gen(one({"name": "pri", "kind": "category", "values": ["low", "high", "urgent"]},
                 {"name": "est", "kind": "uniform", "low": 1, "high": 2, "conditions": [
                     {"when": "pri = 'urgent'", "params": {"low": 100, "high": 101}},
                     {"when": "pri IN ('urgent', 'high')", "params": {"low": 10, "high": 11}}]},
                 {"name": "team", "kind": "category", "values": ["a"], "conditions": [
                     {"when": "est > 50", "params": {"values": ["u1", "u2"]}}]}))
    for pri, est, team in df.select("pri", "est", "team").iter_rows():
        lo = {"urgent": 100, "high": 10, "low": 1}[pri]
        assert lo <= est <= lo + 1
        assert (team in ("u1", "u2")) == (pri == "urgent")


def test_foreign_keys_with_where_and_match_and_lookup():
    spec = {"seed": 5, "tables": {
        "emp": {"rows": 30, "columns": [
            {"name": "email", "kind": "sequence", "prefix": "e", "width": 3},
            {"name": "team", "kind": "category", "values": ["a", "b", "c"]},
            {"name": "senior", "kind": "bernoulli", "p": 0.5}]},
        "proj": {"rows": 8, "columns": [
            {"name": "pid", "kind": "sequence", "prefix": "P"},
            {"name": "team", "kind": "category", "values": ["a", "b", "c"]},
            {"name": "owner", "kind": "foreign_key", "table": "emp", "column": "email",
             "match": {"team": "team"}}]},
        "task": {"columns": [
            {"name": "pid", "kind": "foreign_key", "table": "proj", "column": "pid"},
            {"name": "team", "kind": "lookup", "via": "pid", "column": "team"},
            {"name": "who", "kind": "foreign_key", "table": "emp", "column": "email", "where": "senior",
             "match": {"team": "team"}}]}}}
    frames = generate_frames(parse_spec(spec), 3000)
    emp, proj, task = frames["emp"], frames["proj"], frames["task"]
    emp_team = dict(emp.select("email", "team").iter_rows())
    senior = dict(emp.select("email", "senior").iter_rows())
    proj_team = dict(proj.select("pid", "team").iter_rows())
    for _, team, owner in proj.iter_rows():
        assert emp_team[owner] == team
    for pid, team, who in task.iter_rows():
        assert proj_team[pid] == team and emp_team[who] == team and senior[who]
    # every eligible senior of a team is reachable (a uniform draw, not the first match)
    used = set(task["who"].to_list())
    eligible = {e for e, s in senior.items() if s and emp_team[e] in set(task["team"].to_list())}
    assert used == eligible
    rep = build_report(parse_spec(spec), frames)
    assert rep["ok"], [c for c in rep["relations"] if not c["ok"]]


def test_foreign_key_without_candidates_is_an_error():
    spec = {"tables": {
        "emp": {"rows": 5, "columns": [{"name": "email", "kind": "uuid"},
                                        {"name": "team", "kind": "category", "values": ["a"]}]},
        "task": {"columns": [{"name": "who", "kind": "foreign_key", "table": "emp", "column": "email",
                              "where": "team = 'zzz'"}]}}}
    with pytest.raises(GenerationError, match="no row of table 'emp' satisfies where"):
        generate_frames(parse_spec(spec), 10)


def test_constraints_hold_and_only_violating_rows_are_redrawn():
    spec = one({"name": "created", "kind": "datetime", "start": "2026-01-01", "end": "2026-02-01"},
               {"name": "due", "kind": "datetime", "start": "2026-01-01", "end": "2026-03-01"},
               {"name": "budget", "kind": "gaussian", "mean": 10, "std": 10},
               {"name": "keep", "kind": "uniform", "low": 0, "high": 1},
               {"name": "twice", "kind": "expression", "expr": "budget * 2"},
               constraints=["due > created", "budget >= 0"])
    base = gen(dict(spec, tables={"t": {"columns": spec["tables"]["t"]["columns"]}}), n=5000)
    df = gen(spec, n=5000)
    assert (df["due"] > df["created"]).all() and (df["budget"] >= 0).all()
    assert (df["twice"] == df["budget"] * 2).all()  # descendants recomputed for redrawn rows
    assert df["keep"].equals(base["keep"])  # columns outside the constraint untouched
    ok_rows = (base["budget"] >= 0) & (base["due"] > base["created"])
    assert df.filter(ok_rows)["budget"].equals(base.filter(ok_rows)["budget"])  # satisfying rows kept as drawn


def test_unsatisfiable_constraint_names_itself_and_the_fraction():
    spec = one({"name": "a", "kind": "uniform", "low": 0, "high": 1},
               {"name": "b", "kind": "uniform", "low": 0, "high": 1},
               constraints=[{"column": "a", "op": ">", "value": 5, "max_rounds": 3}])
    with pytest.raises(ConstraintUnsatisfiable, match=r"constraint 'a > 5.0' still fails for 100.0% of rows after 3"):
        gen(spec, n=100)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lo=st.integers(-50, 50), width=st.integers(0, 30), alt_lo=st.integers(-50, 50), alt_w=st.integers(0, 30),
    p=st.floats(0.05, 0.95), seed=st.integers(0, 2**31 - 1), floor=st.integers(-60, 20),
)
def test_property_conditions_and_constraints(lo, width, alt_lo, alt_w, p, seed, floor):
    spec = (SpecBuilder("prop", seed=seed).table("t")
            .column("flag", "bernoulli", p=p)
            .column("v", "uniform", low=lo, high=lo + width, integer=True)
            .when("v", "flag", low=alt_lo, high=alt_lo + alt_w)
            .column("w", "expression", expr="v + 1")
            .constraint(f"w > {floor}").to_dict())
    def ok_frac(a: int, wd: int) -> float:  # share of a branch's values that satisfy the constraint
        return sum(v + 1 > floor for v in range(a, a + wd + 1)) / (wd + 1)

    try:
        df = gen(spec, n=500)
    except ConstraintUnsatisfiable:
        # only when some branch (almost) never satisfies it within 50 redraws
        assert min(ok_frac(lo, width), ok_frac(alt_lo, alt_w)) <= 0.25
        return
    assert (df["w"] > floor).all() and (df["w"] == df["v"] + 1).all()
    f, v = df["flag"].to_numpy(), df["v"].to_numpy()
    assert np.all((v[f] >= alt_lo) & (v[f] <= alt_lo + alt_w))
    assert np.all((v[~f] >= lo) & (v[~f] <= lo + width))


@settings(max_examples=15, deadline=None)
@given(values=st.dictionaries(st.sampled_from(list("abcdef")), st.lists(st.integers(0, 99), min_size=1, max_size=4),
                              min_size=1, max_size=6), seed=st.integers(0, 10**6))
def test_property_subcategory(values, seed):
    df = gen({"seed": seed, "tables": {"t": {"columns": [
        {"name": "p", "kind": "category", "values": list(values)},
        {"name": "s", "kind": "subcategory", "parent": "p", "values": values}]}}}, n=300)
    for p_, s_ in df.iter_rows():
        assert s_ in values[p_]


def test_pydantic_validator_and_non_unique_lookup_key():
    spec = one({"name": "t", "kind": "category", "values": ["aZZQb", "plain"]},
               {"name": "doc", "kind": "template", "template": '{{"title": "{t}", "priority": "low"}}'},
               validators=[{"name": "ticket", "kind": "pydantic", "column": "doc",
                            "model": "tests.generators_support.user_fns:Ticket"}])
    out = generate_frames(parse_spec(spec), 400)
    assert (out["t"]["t"] == "aZZQb").all()
    q = out["_quarantine/t"]
    assert q.height > 100 and q["_quarantine_reason"].str.contains("marker ZZQ").all()
    bad = {"tables": {
        "p": {"rows": 10, "columns": [{"name": "k", "kind": "category", "values": ["a", "b"]},
                                      {"name": "v", "kind": "uniform", "low": 0, "high": 1}]},
        "c": {"columns": [{"name": "fk", "kind": "foreign_key", "table": "p", "column": "k"},
                          {"name": "v", "kind": "lookup", "via": "fk", "column": "v"}]}}}
    with pytest.raises(GenerationError, match="p.k is not unique"):
        generate_frames(parse_spec(bad), 5)
