"""The demo's dataset stage generates the example world with every relation holding."""

from __future__ import annotations

import json

from rich.console import Console

from studio.demo import DemoContext


def test_demo_stage_generates_the_world(tmp_path):
    import studio.demo_stages.s10_dataset as stage

    ctx = DemoContext(out=tmp_path, quick=True, console=Console(quiet=True))
    produced = stage.run(ctx)
    assert produced["world rows"] == "employees 40, projects 12, tasks 300"
    rep = json.loads((tmp_path / "datasets" / "world" / "report.json").read_text())
    assert rep["ok"] and len(rep["relations"]) > 15
    assert ctx.state["world_tasks"].endswith("world/tasks")
    assert stage.ORDER < 30  # before the reward and training stages
