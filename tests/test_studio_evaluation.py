"""Evaluation & checkpoints page: reports compared (bootstrap CI, per-category bars), checkpoints registered from a
run's output, promoted and rolled back through the real SQLite registry."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

PAGE = "../studio/pages/evaluation_checkpoints.py"


@pytest.fixture()
def ws(tmp_path, monkeypatch):
    monkeypatch.setenv("RLVR_STUDIO_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.setenv("RLVR_HOME", str(tmp_path / "home"))
    from studio.workspace import Workspace

    return Workspace.open(tmp_path / "ws")


def _report(path, model, passes):
    from schemas.evaluation import SampleResult
    from training.evaluation import build_report, make_task_eval, save_report
    from schemas.task import TaskRow

    evals = []
    for i, ok in enumerate(passes):
        task = TaskRow(id=f"t{i}", split="test", prompt=[{"role": "user", "content": "q"}],
                       metadata={"category": "math" if i % 2 else "email"})
        evals.append(make_task_eval(task, [SampleResult(completion="x", score=float(ok), passed=ok,
                                                        reason="" if ok else "wrong_answer")]))
    save_report(build_report(evals, k=1, model=model, dataset="d"), path, plots=False)


def _checkpoint(folder, name, parent=None):
    from training.registry import make_manifest

    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(name.encode() * 100)
    make_manifest(folder, name=name, base_model="tiny", parent=parent, step=1)


def test_compare_two_reports(ws):
    _report(ws.root / "evals" / "base.json", "base", [False] * 10 + [True] * 2)
    _report(ws.root / "evals" / "tuned.json", "tuned", [True] * 12)
    at = AppTest.from_file(PAGE, default_timeout=60).run()
    assert not at.exception
    assert at.dataframe[0].value.shape[0] == 2
    at.selectbox(key="cmp_a").set_value("evals/base.json").run()
    at.selectbox(key="cmp_b").set_value("evals/tuned.json").run()
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["A"] == "0.167" and metrics["B"] == "1.000"
    assert metrics["significant"] == "yes"


def test_register_promote_rollback(ws):
    run_out = ws.root / "runs" / "r1" / "output"
    _checkpoint(run_out / "checkpoint-1", "ck1")
    _checkpoint(run_out / "checkpoint-2", "ck2", parent="ck1")
    at = AppTest.from_file(PAGE, default_timeout=60).run()
    for _ in range(2):
        at.button(key="ckpt_register").click().run()
        assert not at.exception
    from training.registry import Registry

    with Registry() as reg:
        assert sorted(c.name for c in reg.checkpoints()) == ["ck1", "ck2"]
    at.selectbox(key="ckpt_pick").set_value("ck1").run()
    at.button(key="ckpt_promote").click().run()
    at.selectbox(key="ckpt_pick").set_value("ck2").run()
    at.button(key="ckpt_promote").click().run()
    with Registry() as reg:
        assert reg.aliases()["production"] == "ck2"
    assert "ck2 ← ck1" in " ".join(c.value for c in at.caption)
    at.button(key="ckpt_rollback").click().run()
    assert not at.exception
    with Registry() as reg:
        assert reg.aliases()["production"] == "ck1"
    # a tampered checkpoint cannot be promoted: the registry's refusal is shown
    (run_out / "checkpoint-2" / "model.safetensors").write_bytes(b"changed")
    at.selectbox(key="ckpt_pick").set_value("ck2").run()
    at.button(key="ckpt_promote").click().run()
    assert any("refusing to promote" in e.value for e in at.error)
    with Registry() as reg:
        assert reg.aliases()["production"] == "ck1"
