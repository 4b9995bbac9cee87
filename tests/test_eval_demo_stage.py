"""Demo stage 50 on a real (tiny) GRPO checkpoint: evaluated on held-out tasks, registered, promoted."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from studio.demo import DemoContext


def test_stage_registers_and_promotes_the_trained_checkpoint(tmp_path, monkeypatch):
    from training.config_io import load_train_config
    from training.grpo import GRPOTrainer
    from training.model import ensure_embedded_cache, load_tokenizer
    from training.policy import build_random_model
    from training.registry import Registry
    import studio.demo_stages.s50_evaluate as stage

    cfg = load_train_config("examples/configs/tiny.yaml", overrides={"steps": 2, "output_dir": str(tmp_path / "run"),
                                                                      "checkpoint": {"every": 2}})
    tok = load_tokenizer(str(ensure_embedded_cache(full_hash=False)))
    result = GRPOTrainer(cfg, model=build_random_model(tok, cfg.model.architecture), tokenizer=tok).train()
    monkeypatch.setenv("RLVR_REGISTRY", str(tmp_path / "catalog.sqlite"))
    ctx = DemoContext(out=tmp_path / "demo", quick=True, console=Console(width=120))
    ctx.state["train_result"] = result
    produced = stage.run(ctx)
    assert produced["production"].startswith("demo-step-2-")
    report = json.loads(Path(ctx.state["eval_reports"]["trained"]).read_text())
    assert report["overall"]["tasks"] == 4 and report["n_samples"] == 2 and len(report["plots"]) == 2
    assert "base" not in ctx.state["eval_reports"]  # a random-init run is not compared with the embedded model
    with Registry() as reg:
        rec = reg.checkpoint("production")
        assert rec.name == produced["production"] and reg.verify("production")[0]
        assert reg.evaluations(rec.name)[0].report_path.endswith("trained.json")
