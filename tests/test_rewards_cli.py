"""`rlvr reward test|list|versions`: records out, summary, errors counted (exit 0), misuse exit 2."""

from __future__ import annotations

import json
import textwrap

import pytest
from typer.testing import CliRunner

from generators.task_io import write_tasks
from schemas import Message, TaskRow, Trajectory
from studio.cli import app

runner = CliRunner()
EX = "examples/rewards"


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("RLVR_HOME", str(tmp_path / "home"))  # the version log goes here, not in the real cache


def _invoke(*args):
    return runner.invoke(app, ["reward", *args])


def test_math_example_end_to_end(tmp_path):
    out = tmp_path / "scores.json"
    res = _invoke("test", f"{EX}/math_rewards.py:math_binary", "--dataset", f"{EX}/math_tasks.jsonl",
                  "--completions", f"{EX}/math_completions.jsonl", "--json", str(out))
    assert res.exit_code == 0, res.output
    records = json.loads(out.read_text())
    assert len(records) == 13 and set(records[0]) >= {"id", "score", "passed", "components", "error"}
    assert [r["passed"] for r in records[:4]] == [True, True, False, False]
    assert "pass rate" in res.output and "53.8% (7/13)" in res.output and "score histogram" in res.output
    versions = _invoke("versions", "math_binary")
    assert versions.exit_code == 0 and "math_binary" in versions.output


def test_user_reward_errors_are_counted_and_shown_with_exit_0(tmp_path):
    p = tmp_path / "flaky.py"
    p.write_text(textwrap.dedent("""
        import math
        def flaky(completion, answer):
            if "crash" in completion:
                raise ValueError("cannot parse " + completion)
            if "nan" in completion:
                return math.nan
            return float(completion.strip() == answer)
    """))
    comps = tmp_path / "c.jsonl"
    comps.write_text("".join(json.dumps({"id": "m1", "completion": c}) + "\n" for c in ["1000", "crash me", "nan", "9"]))
    out = tmp_path / "o.jsonl"
    res = _invoke("test", f"{p}:flaky", "--dataset", f"{EX}/math_tasks.jsonl", "--completions", str(comps),
                  "--json", str(out), "--timeout", "5")
    assert res.exit_code == 0, res.output
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["score"] for r in recs] == [1.0, None, None, 0.0]
    assert "ValueError: cannot parse crash me" in recs[1]["error"] and "non-finite" in recs[2]["error"]
    assert "errors (first 2 of 2)" in res.output and "network" in res.output


@pytest.mark.parametrize("case, fragment", [
    ("bad_spec", "has no attribute"),
    ("no_file", "does not exist"),
    ("unknown_id", "not in"),
    ("no_completion", "has no 'completion'"),
    ("bad_json", "not valid JSON"),
    ("no_dataset", "no such dataset file"),
])
def test_misuse_exits_2(tmp_path, case, fragment):
    comps = tmp_path / "c.jsonl"
    comps.write_text(json.dumps({"id": "m1", "completion": "<answer>1000</answer>"}) + "\n")
    spec, data = f"{EX}/math_rewards.py:math_binary", f"{EX}/math_tasks.jsonl"
    if case == "bad_spec":
        spec = f"{EX}/math_rewards.py:nope"
    elif case == "no_file":
        spec = "missing_dir/r.py:f"
    elif case == "unknown_id":
        comps.write_text(json.dumps({"id": "zzz", "completion": "1"}) + "\n")
    elif case == "no_completion":
        comps.write_text(json.dumps({"id": "m1", "text": "1"}) + "\n")
    elif case == "bad_json":
        comps.write_text("{not json\n")
    elif case == "no_dataset":
        data = str(tmp_path / "none.parquet")
    res = _invoke("test", spec, "--dataset", data, "--completions", str(comps))
    assert res.exit_code == 2, res.output
    assert fragment in res.output.replace("\n", " ")


def test_trajectory_reward_on_parquet_dataset(tmp_path):
    data = tmp_path / "tasks.parquet"
    write_tasks([TaskRow(id="t1", prompt=[Message(role="user", content="q")], answer="42")], data)
    p = tmp_path / "traj.py"
    p.write_text("def final_ok(trajectory, final_state, answer):\n"
                 "    return trajectory.final_answer == answer and final_state['saved']\n")
    traj = Trajectory(task_id="t1", messages=[Message(role="assistant", content="42")], final_answer="42")
    comps = tmp_path / "c.jsonl"
    comps.write_text("".join(json.dumps({"id": "t1", "trajectory": traj.model_dump(mode="json"),
                                         "final_state": {"saved": s}}) + "\n" for s in (True, False)))
    out = tmp_path / "o.json"
    res = _invoke("test", f"{p}:final_ok", "--dataset", str(data), "--completions", str(comps), "--json", str(out))
    assert res.exit_code == 0, res.output
    assert [r["passed"] for r in json.loads(out.read_text())] == [True, False]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "t1", "completion": "42"}) + "\n")
    res = _invoke("test", f"{p}:final_ok", "--dataset", str(data), "--completions", str(bad))
    assert res.exit_code == 2 and "trajectory" in res.output


def test_list_shows_builtins():
    res = _invoke("list")
    assert res.exit_code == 0
    for name in ("exact_match", "numeric_match", "tool_call_match", "code_tests", "workplace_state"):
        assert name in res.output


def test_tool_call_example_end_to_end(tmp_path):
    out = tmp_path / "tc.json"
    res = _invoke("test", f"{EX}/tool_calls.py:calls_shaped", "--dataset", f"{EX}/tool_tasks.jsonl",
                  "--completions", f"{EX}/tool_completions.jsonl", "--json", str(out))
    assert res.exit_code == 0, res.output
    recs = json.loads(out.read_text())
    assert [r["passed"] for r in recs] == [True, True, True, False, False, False, True, False, False, False]
    fails = [r["score"] for r in recs if not r["passed"]]
    assert max(fails) < min(r["score"] for r in recs if r["passed"])
    assert recs[3]["score"] > recs[9]["score"]  # one of two calls right beats no call at all
    assert "get_weather(city=\"Oslo\")" in recs[3]["reason"]
