"""`rlvr audit REWARD --dataset DATA [--reference-field answer] [--samples N] [--model default] [--json OUT]`:
exit 0 (no high finding), 1 (a high finding), 2 (misuse); the JSON contract; the labels loop. The rewards are
loaded from files and scored through the rewards sandbox, as a user's would be."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

import audit_gallery as G
from studio.cli import app

HERE = Path(__file__).resolve().parent


@pytest.fixture()
def work(tmp_path):
    shutil.copy(HERE / "audit_gallery.py", tmp_path / "gallery.py")
    with open(tmp_path / "math.jsonl", "w") as f:
        for r in G.math_rows(24):
            f.write(json.dumps(r) + "\n")
    return tmp_path


def _run(*args):
    return CliRunner().invoke(app, ["audit", *map(str, args)])


def test_sound_reward_exits_0_and_writes_the_contract_json(work):
    out = work / "out" / "report.json"
    res = _run(f"{work}/gallery.py:sound_strict_tag", "--dataset", work / "math.jsonl", "--samples", 0,
               "--json", out)
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert data["verdict"] == "pass" and data["findings"] == []
    assert {"verdict", "findings", "baselines", "inspection"} <= set(data)
    assert data["baselines"]["reference_pass_rate"] == 1.0
    assert out.with_suffix(".md").read_text().startswith("# Reward audit")
    assert "Verdict: PASS" in res.output


def test_exploitable_reward_exits_1_with_findings(work):
    out = work / "r.json"
    res = _run(f"{work}/gallery.py:tolerance_1pct", "--dataset", work / "math.jsonl", "--samples", 0, "--json", out)
    assert res.exit_code == 1, res.output
    data = json.loads(out.read_text())
    f = next(f for f in data["findings"] if f["probe"] == "near_miss_relative")
    assert f["family"] == "parser" and f["severity"] == "high" and f["fooled_rows"] > 0
    assert f["examples"] and {"input", "score"} <= set(f["examples"][0])


@pytest.mark.parametrize("case", ["no_function", "no_file", "missing_field", "bad_dataset", "no_dataset"])
def test_misuse_exits_2_with_a_clear_message(work, case):
    (work / "bad.jsonl").write_text("{not json\n")
    args = {
        "no_function": [f"{work}/gallery.py:nope", "--dataset", work / "math.jsonl"],
        "no_file": [f"{work}/missing.py:f", "--dataset", work / "math.jsonl"],
        "missing_field": [f"{work}/gallery.py:sound_strict_tag", "--dataset", work / "math.jsonl",
                          "--reference-field", "solution"],
        "bad_dataset": [f"{work}/gallery.py:sound_strict_tag", "--dataset", work / "bad.jsonl"],
        "no_dataset": [f"{work}/gallery.py:sound_strict_tag", "--dataset", work / "none.parquet"],
    }[case]
    res = _run(*args, "--samples", 0)
    assert res.exit_code == 2, res.output
    expected = {"no_function": "no attribute 'nope'", "no_file": "does not exist", "missing_field": "solution",
                "bad_dataset": "line 1", "no_dataset": "no such dataset"}[case]
    assert expected in " ".join(res.output.split())


def test_parquet_dataset_and_module_reward(work, monkeypatch):
    pl.DataFrame([{"prompt": r["prompt"][0]["content"], "answer": r["answer"]} for r in G.math_rows(16)]).write_parquet(
        work / "math.parquet")
    monkeypatch.syspath_prepend(str(work))
    res = _run("gallery:sound_boxed_numeric", "--dataset", work / "math.parquet", "--samples", 0)
    assert res.exit_code == 0, res.output


def test_labels_loop_reports_agreement(work):
    table = work / "insp.csv"
    pl.DataFrame({"row": [str(i) for i in range(4)],
                  "completion": ["<answer>%s</answer>" % r["answer"] for r in G.math_rows(24)[:2]] + ["no", "no"],
                  "label": ["pass", "fail", "fail", "fail"]}).write_csv(table)
    out = work / "lab.json"
    res = _run(f"{work}/gallery.py:sound_strict_tag", "--dataset", work / "math.jsonl", "--labels", table,
               "--json", out)
    assert res.exit_code == 0, res.output
    insp = json.loads(out.read_text())["inspection"]
    assert insp["labelled"] == 4 and insp["accuracy"] == 0.75
    assert [d["sample"] for d in insp["disagreements"]] == [1]
    assert Path(insp["table_csv"]).exists()


def test_families_and_max_rows_narrow_the_audit_but_sanity_always_runs(work):
    out = work / "narrow.json"
    res = _run(f"{work}/gallery.py:empty_passes", "--dataset", work / "math.jsonl", "--samples", 0,
               "--families", "judge", "--max-rows", 5, "--json", out)
    assert res.exit_code == 1, res.output
    data = json.loads(out.read_text())
    assert data["rows"] == 5
    assert {p["family"] for p in data["probes"]} == {"judge", "sanity"}
    assert {f["probe"] for f in data["findings"]} >= {"empty", "master_key_colon"}
    bad = _run(f"{work}/gallery.py:empty_passes", "--dataset", work / "math.jsonl", "--families", "nonsense")
    assert bad.exit_code == 2 and "unknown probe families" in bad.output
