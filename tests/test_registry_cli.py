"""`rlvr checkpoints ...` as a user runs them, on a real catalog file; `rlvr eval compare` on two reports;
`rlvr triage` on a crafted file; `rlvr plan` without the probe."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from studio.cli import app

runner = CliRunner()


@pytest.fixture()
def catalog(tmp_path, monkeypatch):
    monkeypatch.setenv("RLVR_REGISTRY", str(tmp_path / "catalog.sqlite"))
    return tmp_path


def test_checkpoints_register_promote_rollback_delete(catalog):
    from tests.test_registry_catalog import make_checkpoint

    for i, name in enumerate(["v1", "v2"]):
        folder = make_checkpoint(catalog, name, i, parent="v1" if i else None)
        r = runner.invoke(app, ["checkpoints", "register", str(folder)])
        assert r.exit_code == 0, r.output
    assert runner.invoke(app, ["checkpoints", "promote", "v1", "--as", "production"]).exit_code == 0
    r = runner.invoke(app, ["checkpoints", "promote", "v2"])
    assert r.exit_code == 0 and "production -> v2 (was v1" in r.output
    r = runner.invoke(app, ["checkpoints", "list"])
    assert r.exit_code == 0 and "v1" in r.output and "production -> v2" in r.output
    r = runner.invoke(app, ["checkpoints", "show", "production"])
    assert "v2" in r.output and "lineage: v2 <- v1" in r.output and "weights match" in r.output
    r = runner.invoke(app, ["checkpoints", "rollback"])
    assert r.exit_code == 0 and "v2 -> v1" in r.output, r.output
    r = runner.invoke(app, ["checkpoints", "delete", "v2"])
    assert r.exit_code == 1 and "pass --yes" in r.output
    assert (catalog / "v2").is_dir()
    r = runner.invoke(app, ["checkpoints", "delete", "v2", "--yes", "--files"])
    assert r.exit_code == 0 and not (catalog / "v2").exists()
    (catalog / "v1" / "model.safetensors").write_bytes(b"tampered")
    r = runner.invoke(app, ["checkpoints", "verify", "v1"])
    assert r.exit_code == 1 and "mismatch" in r.output
    r = runner.invoke(app, ["checkpoints", "rollback"])
    assert r.exit_code == 2 and "no earlier promoted checkpoint" in r.output


def test_eval_compare_cli(tmp_path):
    from tests.test_eval_report import exact, task
    from training.evaluation import FixedCompletionRunner, evaluate, save_report

    tasks = [task(i, "a") for i in range(30)]
    ra = evaluate(tasks, FixedCompletionRunner({t.id: ["yes" if i < 10 else "no"] for i, t in enumerate(tasks)}, exact),
                  model="A", dataset="d")
    rb = evaluate(tasks, FixedCompletionRunner({t.id: ["yes" if i < 25 else "no"] for i, t in enumerate(tasks)}, exact),
                  model="B", dataset="d")
    pa, pb = save_report(ra, tmp_path / "a.json", plots=False), save_report(rb, tmp_path / "b.json", plots=False)
    r = runner.invoke(app, ["eval", "compare", str(pa), str(pb), "--json", str(tmp_path / "cmp.json"),
                            "--resamples", "2000"])
    assert r.exit_code == 0, r.output
    assert "B is better" in r.output and "15 fixed, 0 broken" in r.output
    cmp = json.loads((tmp_path / "cmp.json").read_text())
    assert cmp["delta"] == pytest.approx(0.5) and cmp["ci_low"] > 0
    r = runner.invoke(app, ["eval", "compare", str(pa), str(tmp_path / "missing.json")])
    assert r.exit_code == 2 and "neither a report file nor a registered checkpoint" in r.output


def test_eval_needs_model_and_dataset():
    r = runner.invoke(app, ["eval"])
    assert r.exit_code == 2 and "needs --model and --dataset" in r.output


def test_triage_cli_on_error_text_traces(tmp_path):
    lines = [{"id": f"p{i}", "messages": [{"role": "user", "content": "Move my deadline"},
                                          {"role": "assistant", "content": None, "tool_calls": [
                                              {"id": "c1", "type": "function", "function": {
                                                  "name": "project_management_update_task",
                                                  "arguments": json.dumps({"task_id": f"{i:08d}", "field": "due_date",
                                                                           "new_value": f"2026-1{i}-40"})}}]},
                                          {"role": "tool", "tool_call_id": "c1",
                                           "content": json.dumps({"error": f"invalid date '2026-1{i}-40' for due_date"})}]}
             for i in range(3)]
    path = tmp_path / "failures.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    r = runner.invoke(app, ["triage", str(path), "--json", str(tmp_path / "triage.json")])
    assert r.exit_code == 0, r.output
    rep = json.loads((tmp_path / "triage.json").read_text())
    assert len(rep["buckets"]) == 1 and rep["buckets"][0]["count"] == 3
    assert rep["buckets"][0]["recommendation"]["intervention"] == "prompt_or_tool_description"
    assert rep["regression_tasks"] == 3 and (tmp_path / "failures.regression.parquet").is_file()


def test_plan_cli_without_probe(tmp_path):
    r = runner.invoke(app, ["plan", "examples/configs/tiny.yaml", "--no-probe", "--gpu", "L4",
                            "--json", str(tmp_path / "plan.json")])
    assert r.exit_code == 0, r.output
    assert "reductions, most saving first" in r.output and "L4" in r.output
    rep = json.loads((tmp_path / "plan.json").read_text())
    assert rep["estimate"]["workload"]["completions_per_step"] == 8 and rep["probe"] is None
