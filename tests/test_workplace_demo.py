"""Demo stage 20 (workplace environment) end to end in quick mode, with the real embedded model."""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_workplace_demo_stage_quick(tmp_path, embedded):
    from rich.console import Console

    from studio.demo import DemoContext
    from studio.demo_stages import s20_workplace as stage

    ctx = DemoContext(out=tmp_path, quick=True, console=Console(record=True))
    ctx.state["model"] = embedded
    produced = stage.run(ctx)
    assert ctx.state["workplace_tasks"] == str(tmp_path / "workplace")
    assert (tmp_path / "workplace" / "test.parquet").exists()
    assert produced["ground truth verified"] == "40/40 pass"
    assert produced["model rollouts"].startswith(("0/2", "1/2", "2/2"))
