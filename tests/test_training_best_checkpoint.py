"""checkpoint.keep_best: the checkpoint with the best held-out pass rate survives pruning and is named in best.json,
measured against the policy training started from, and a resumed run keeps the same best."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from studio.cli import app
from test_training_tiny import _tiny_yaml
from training.best_checkpoint import after_evaluation, read_best, start_best

runner = CliRunner()


@pytest.fixture(autouse=True)
def _own_registry(tmp_path, monkeypatch):
    monkeypatch.setenv("RLVR_REGISTRY", str(tmp_path / "registry.sqlite"))


def test_a_checkpoint_replaces_the_best_only_when_strictly_better():
    best = start_best(0, 0.5, "sft", eval_tasks=8)
    tie = after_evaluation(best, 1, 0.5, "step-1", "ck/step-1")
    assert (tie.step, tie.checkpoint, tie.path) == (0, None, "sft")  # a tie keeps the policy with fewer updates
    better = after_evaluation(tie, 2, 0.625, "step-2", "ck/step-2")
    worse = after_evaluation(better, 3, 0.25, "step-3", "ck/step-3")
    assert (worse.step, worse.value, worse.checkpoint, worse.path) == (2, 0.625, "step-2", "ck/step-2")
    assert worse.history == [(0, 0.5), (1, 0.5), (2, 0.625), (3, 0.25)]
    assert (worse.start_step, worse.start_value) == (0, 0.5)


def _scripted_eval(monkeypatch, values: list[float]) -> list[float]:
    """The trainer's held-out evaluation replaced by a script of pass rates (training runs for real), so the test
    controls which checkpoint is best; returns the list of values handed out."""
    from training.grpo import GRPOTrainer

    given: list[float] = []

    def evaluate(self):
        v = values[len(given)]
        given.append(v)
        return {"eval_pass_at_1": v, "eval_reward_mean": v, "eval_tasks": 8, "eval_time_s": 0.0}

    monkeypatch.setattr(GRPOTrainer, "_evaluate", evaluate)
    return given


def _yaml(tmp_path: Path, steps: int) -> Path:
    return _tiny_yaml(tmp_path, steps=steps, eval_every=1, checkpoint__every=10, checkpoint__keep=1,
                      checkpoint__keep_best=True, rollout__max_new_tokens=8, overlong__buffer_tokens=2)


def _cfg(tmp_path: Path, steps: int):
    from training.config_io import load_train_config

    return load_train_config(_yaml(tmp_path, steps))


def test_the_best_checkpoint_outlives_pruning_and_a_resume_keeps_it(tmp_path, monkeypatch):
    """Start 0.5, then 0.25, 0.75, 0.5, 0.75: step 2 is the best (step 4 only ties it), kept beside the newest
    checkpoint although keep is 1, and registered beside the final one so either can be promoted. Killed after
    step 2 and resumed, the run measures no new start and ends with the same best as one never interrupted."""
    from training.checkpoints import is_complete
    from training.grpo import GRPOTrainer
    from training.registry import Registry

    script = [0.5, 0.25, 0.75, 0.5, 0.75]
    given = _scripted_eval(monkeypatch, script)
    out = runner.invoke(app, ["train", str(_yaml(tmp_path / "a", 4))])
    assert out.exit_code == 0, out.output
    run = tmp_path / "a" / "run"
    ck = run / "checkpoints"
    assert sorted(p.name for p in ck.glob("step-*")) == ["step-2", "step-4"]
    assert is_complete(ck / "step-2")
    best = read_best(ck)
    assert (best.step, best.value, best.checkpoint, Path(best.path)) == (2, 0.75, "step-2", (ck / "step-2").resolve())
    assert (best.start_step, best.start_value, best.history) == (0, 0.5, list(enumerate(script)))
    assert "best by eval pass@1 on 8 held-out tasks: step-2" in " ".join(out.output.split())
    with Registry() as reg:
        assert sorted((c.step, Path(c.path)) for c in reg.checkpoints()) == [(2, (ck / "step-2").resolve()),
                                                                              (4, (ck / "step-4").resolve())]
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r["eval_pass_at_1"]) for r in lines] == list(enumerate(script))
    assert "reward_mean" not in lines[0]  # the start line holds the evaluation only

    given.clear()
    cfg_b = _cfg(tmp_path / "b", 4)
    GRPOTrainer(cfg_b, stop_after=2).train()  # "killed" after step 2's checkpoint
    resumed = GRPOTrainer(cfg_b).train()
    assert resumed.resumed_from is not None and resumed.resumed_from.name == "step-2"
    assert given == script  # the start was measured once, by the first attempt
    assert resumed.best.model_dump(exclude={"path"}) == best.model_dump(exclude={"path"})
    assert sorted(p.name for p in (Path(cfg_b.output_dir) / "checkpoints").glob("step-*")) == ["step-2", "step-4"]


def test_when_no_checkpoint_beats_the_start_the_best_is_the_starting_policy(tmp_path, monkeypatch):
    from training.grpo import GRPOTrainer

    _scripted_eval(monkeypatch, [0.5, 0.25, 0.5])
    cfg = _cfg(tmp_path, 2)
    result = GRPOTrainer(cfg).train()
    ck = Path(cfg.output_dir) / "checkpoints"
    assert (result.best.checkpoint, result.best.step, result.best.value) == (None, 0, 0.5)
    assert result.best.path.startswith("random:")  # the tiny config's random-initialised model
    assert sorted(p.name for p in ck.glob("step-*")) == ["step-2"]  # nothing to protect: keep 1


def test_keep_best_through_the_cli_measures_real_checkpoints(tmp_path):
    """No script: the trainer's own greedy evaluation on the test split ranks the start and both checkpoints."""
    cfg = _tiny_yaml(tmp_path, steps=2, eval_every=1, eval_tasks=4, checkpoint__every=10, checkpoint__keep=1,
                     checkpoint__keep_best=True, rollout__max_new_tokens=8, overlong__buffer_tokens=2)
    result = runner.invoke(app, ["train", str(cfg)])
    assert result.exit_code == 0, result.output
    assert "best by eval pass@1 on 4 held-out tasks" in " ".join(result.output.split())
    run = tmp_path / "run"
    best = read_best(run / "checkpoints")
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r["eval_pass_at_1"]) for r in lines] == best.history
    assert [r["step"] for r in lines] == [0, 1, 2] and lines[0]["eval_tasks"] == 4
    assert best.value == max(v for _, v in best.history) and best.start_value == lines[0]["eval_pass_at_1"]
    assert best.checkpoint is None or (run / "checkpoints" / best.checkpoint / "manifest.json").is_file()
