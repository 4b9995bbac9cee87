"""Training page: a run starts only from a validated dataset and an audited reward (or a recorded override), runs
as a background `rlvr train` process that a fresh page (a reload) finds again, shows its curves, stops cleanly."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml
from streamlit.testing.v1 import AppTest

from studio.runs import RunManager

PAGE = "../studio/pages/training_runs.py"


@pytest.fixture()
def ws(studio_ws):
    w = studio_ws
    yield w
    runs = RunManager(w.dir("runs"))
    for r in runs.list():
        if r.state == "running":
            runs.stop(r.record.run_id, grace_s=5)


def _form(at, fn="tagged_answer_shaped"):
    at.selectbox(key="train_dataset").select("datasets/arithmetic_tasks.jsonl").run()
    at.selectbox(key="train_reward_file").select("rewards/arithmetic_reward.py").run()
    at.selectbox(key="train_reward_fn").select(fn).run()
    at.selectbox(key="train_template").select("configs/tiny.yaml").run()


def _audit(ws, fn):
    """A real audit (no model sampling) written where the Audit page writes it."""
    from rewards.audit import write_json
    from studio.commands.audit import run_audit_job
    from studio.pickers import audit_meta_path, file_hash

    reward = ws.root / "rewards" / "arithmetic_reward.py"
    spec = f"{reward}:{fn}"
    report, _ = run_audit_job(spec, ws.root / "datasets" / "arithmetic_tasks.jsonl", samples=0, sandbox=False,
                              limit=60)
    out = ws.root / "audits" / f"{fn}.json"
    write_json(report, out)
    audit_meta_path(out).write_text(json.dumps({"reward": spec, "reward_hash": file_hash(reward)}))
    return report


def test_unaudited_reward_needs_a_recorded_override_then_the_run_starts_and_stops(ws):
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    _form(at)
    assert any("not been audited" in w.value for w in at.warning)
    assert at.button(key="start_run").disabled
    at.checkbox(key="allow_unaudited").check().run()
    at.number_input(key="train_steps").set_value(500).run()
    at.button(key="start_run").click().run()
    assert not at.exception
    runs = RunManager(ws.dir("runs")).list()
    assert len(runs) == 1 and runs[0].record.allow_unaudited
    assert runs[0].record.command[-2:] == ["train", runs[0].record.config_path]
    cfg = yaml.safe_load(Path(runs[0].record.config_path).read_text())
    assert cfg["reward"]["allow_unaudited"] is True and cfg["steps"] == 500
    run_id = runs[0].record.run_id
    at.run()
    assert {m.label: m.value for m in at.metric}["state"] == "running"
    at.button(key=f"stop_{run_id}").click().run()
    assert not at.exception
    status = RunManager(ws.dir("runs")).status(run_id)
    assert status.state == "stopped"
    import psutil

    assert not psutil.pid_exists(status.pid) or psutil.Process(status.pid).status() == psutil.STATUS_ZOMBIE


WRITER = """
import json, pathlib, sys
out = pathlib.Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
with open(out / "metrics.jsonl", "w") as f:
    for i in range(1, 6):
        f.write(json.dumps({"step": i, "reward_mean": i / 5, "pass_rate": i / 10, "completion_len_mean": 10 + i,
                            "loss": 1 / i}) + "\\n")
"""


def test_a_reload_finds_the_run_and_draws_its_curves(ws):
    import sys

    out = ws.dir("runs") / "r" / "output"
    runs = RunManager(ws.dir("runs"))
    s = runs.start("train", [sys.executable, "-c", WRITER, str(out)], output_dir=out, allow_unaudited=True)
    deadline = time.time() + 30
    while runs.status(s.record.run_id).state == "running" and time.time() < deadline:
        time.sleep(0.1)
    at = AppTest.from_file(PAGE, default_timeout=120).run()  # a fresh session: what a browser reload gets
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["state"] == "finished" and metrics["steps logged"] == "5"
    assert metrics["unaudited override"] == "yes"
    assert len(at.get("vega_lite_chart")) == 4
    titles = {m.value for m in at.markdown}
    assert {"**reward**", "**pass rate**", "**completion length**", "**loss**"} <= titles


def test_audited_reward_is_accepted_and_a_failed_audit_is_not(ws):
    _audit(ws, "tagged_answer_shaped")
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    _form(at)
    assert any("audited" in s.value and "verdict pass" in s.value for s in at.success)
    assert not at.button(key="start_run").disabled
    report = _audit(ws, "letter_share")  # a meaningless dense reward: the audit must fail it
    assert report.verdict == "fail"
    _form(at, "letter_share")
    assert any("latest audit of this reward failed" in w.value for w in at.warning)
    assert at.button(key="start_run").disabled
