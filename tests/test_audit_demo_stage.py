"""Demo stage 30: it audits the reward the demo trains with and stops the demo when the audit fails."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from rich.console import Console

import studio.demo_stages.s30_audit as stage
from studio.demo import DemoContext, StageFailed, discover_stages

HERE = Path(__file__).resolve().parent


def _ctx(tmp_path, **state):
    ctx = DemoContext(out=tmp_path, quick=True, console=Console(quiet=True))
    ctx.state["registry_path"] = str(tmp_path / "catalog.sqlite")
    ctx.state.update(state)
    return ctx


def test_stage_is_discovered_at_order_30():
    assert stage in discover_stages() and stage.ORDER == 30


def test_default_demo_reward_passes_and_report_is_shared(tmp_path):
    ctx = _ctx(tmp_path, audit_samples=0)
    produced = stage.run(ctx)
    assert produced["verdict"] == "pass"
    report = ctx.state["audit_report"]
    assert report.verdict == "pass" and report.rows > 0
    data = json.loads(Path(ctx.state["audit_report_path"]).read_text())
    assert data["verdict"] == "pass"
    assert (tmp_path / "audit" / "audit_report.md").exists()
    from training.registry import Registry

    audits = Registry(tmp_path / "catalog.sqlite").audits()
    assert len(audits) == 1 and audits[0].passed and audits[0].report_path == ctx.state["audit_report_path"]
    assert produced["catalog"] == f"audit #{audits[0].id}"


def test_gameable_reward_stops_the_demo_with_its_findings(tmp_path):
    shutil.copy(HERE / "audit_gallery.py", tmp_path / "gallery.py")
    ctx = _ctx(tmp_path, audit_samples=0, reward=f"{tmp_path}/gallery.py:containment")
    with pytest.raises(StageFailed) as err:
        stage.run(ctx)
    msg = str(err.value)
    assert "failed its audit" in msg and "parser/" in msg and "fooled on" in msg
    assert ctx.state["audit_report"].verdict == "fail"
    assert json.loads((tmp_path / "audit" / "audit_report.json").read_text())["verdict"] == "fail"
