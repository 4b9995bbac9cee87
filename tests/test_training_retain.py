"""data.focus's retain anchor: while GRPO trains the kinds of task the starting policy fails, every step also holds
the verified demonstrations of the kinds it solves, on the tokens the policy is no longer sure of."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from schemas.train_config import FocusSection
from test_training_focus import _reward_file
from test_training_multiturn import _guided_trainer, workplace  # noqa: F401 - the fixture, shared
from test_training_tiny import _arithmetic_demonstrations, _tiny_yaml
from training.focus import FocusChoice, GroupProbe
from training.retain import at_risk_masks, retain_groups, retain_positions, through_last_marked


def test_the_solved_groups_are_the_probed_ones_above_the_bar():
    choice = FocusChoice(by="template", max_pass_rate=0.25, start="sft", probe_tasks=8, probe_passed=4,
                         groups={"a": GroupProbe(tasks=4, passed=1), "b": GroupProbe(tasks=2, passed=2),
                                 "c": GroupProbe(tasks=2, passed=1)},
                         trained_groups=["a"], unprobed_groups=["d"], training_tasks=3, training_tasks_before=6)
    assert retain_groups(choice) == ["b", "c"]  # a is at the bar (trained); d was never probed: not known solved


def test_retain_positions_are_a_function_of_step_and_rank_and_never_overlap():
    seen = [p for step in range(3) for rank in range(2) for p in retain_positions(step, 4, rank, 2)]
    assert seen == list(range(24))
    assert retain_positions(5, 3, 0, 1) == range(15, 18)


def test_at_risk_tokens_are_the_trained_ones_below_the_probability():
    import math

    lp = [[math.log(0.95), math.log(0.5), math.log(0.1), 0.0], [math.log(0.89), math.log(0.2), -9.0]]
    masks = [[1, 1, 0, 1], [1, 1]]  # row 0's third token is a tool output (not trained); row 1 reads 2 of 3
    assert at_risk_masks(lp, masks, 0.9) == [[0, 1, 0, 0], [1, 1]]
    assert at_risk_masks(lp, masks, 1.0) == [[1, 1, 0, 0], [1, 1]]
    # the anchor's forward stops after each row's last at-risk token (a causal model's earlier log-probs are the same)
    assert [through_last_marked(m) for m in ([0, 1, 0, 0], [1, 1], [0, 0])] == [2, 2, 0]
    with pytest.raises(ValueError, match="row 0 has 1 log-probs for 2 tokens"):
        at_risk_masks([[0.0]], [[1, 1]], 0.9)
    with pytest.raises(ValueError, match=r"below must be in \(0, 1\]"):
        at_risk_masks(lp, masks, 0.0)


def test_the_anchor_replays_verified_demonstrations_and_one_update_raises_them(workplace, tmp_path):  # noqa: F811
    """Through the real workplace environment: the retain tasks' demonstrations are replayed and verified, their
    at-risk tokens (a random model is sure of nothing: all of them) packed, and an update whose policy term is zero
    makes every one of them more likely. A bar no token is below anchors nothing and moves nothing."""
    from training.samples import pack
    from policy_probe import mean_trained_logprob

    trainer = _guided_trainer(workplace, tmp_path, workplace / "demonstrations.jsonl")
    trainer._setup()
    trainer.cfg.data.focus = FocusSection(retain_per_step=3)
    trainer.retain_tasks = trainer.tasks[:5]
    retain, stats = trainer._retain_batch()
    demos = trainer.collect.replay_scored([trainer.retain_tasks[i] for i in (0, 1, 2, 3, 4)])
    assert stats["retain_demos"] == 3 and stats["retain_demo_pass_rate"] == 1.0
    assert retain.input_ids.shape[0] == 3 and stats["retain_tokens"] == float(retain.loss_mask.sum())
    assert 0 < stats["retain_tokens"] <= sum(sum(d.loss_mask) for d in demos)
    assert all(bool(retain.loss_mask[i].sum()) for i in range(3))
    before = mean_trained_logprob(trainer, retain)
    samples, _ = trainer._rollout_phase()
    policy = pack(samples, trainer.tok.pad_token_id)
    out = trainer._update(policy, torch.zeros(len(samples)), retain=retain)
    assert out["retain_nll"] > 0
    assert bool((mean_trained_logprob(trainer, retain) - before > 0).all())

    trainer.cfg.data.focus = FocusSection(retain_per_step=3, retain_below=1e-30)
    none, stats = trainer._retain_batch()
    assert none is None and stats["retain_tokens"] == 0 and stats["retain_demos"] == 3


def _cfg(tmp_path: Path, reward: str, **focus):
    from training.config_io import load_train_config

    tmp_path.mkdir(parents=True, exist_ok=True)
    demos, _ = _arithmetic_demonstrations(tmp_path)
    return load_train_config(_tiny_yaml(
        tmp_path, steps=2, batch_size=8, rollout__max_new_tokens=8, overlong__buffer_tokens=2, checkpoint__every=1,
        reward__function=f"{_reward_file(tmp_path)}:{reward}", guidance__demonstrations=str(demos),
        data__focus={"by": "op", "max_pass_rate": 0.5, "probe_per_group": 10, "retain_per_step": 2, **focus}))


def test_a_focused_run_anchors_the_solved_kind_every_step(tmp_path):
    """End to end through train(): the probe finds '+' solved and '-' failed; prompts come from '-' only, and every
    step anchors two verified '+' demonstrations (the same ones a restarted run would draw at that step)."""
    import json

    from training.grpo import GRPOTrainer

    cfg = _cfg(tmp_path, "by_op")
    trainer = GRPOTrainer(cfg)
    trainer.train()
    assert {t.metadata["op"] for t in trainer.tasks} == {"-"}
    assert trainer.retain_tasks and {t.metadata["op"] for t in trainer.retain_tasks} == {"+"}
    everywhere = GRPOTrainer(_cfg(tmp_path / "all", "by_op", retain_from="all"), stop_after=1)
    everywhere.train()  # the anchor's pool is then every training task with a demonstration, the failed kind's too
    assert {t.metadata["op"] for t in everywhere.retain_tasks} == {"+", "-"}
    assert len(everywhere.retain_tasks) == len(trainer.retain_tasks) + len(trainer.tasks)
    lines = [json.loads(x) for x in (Path(cfg.output_dir) / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == [1, 2]
    for r in lines:
        assert r["retain_demos"] == 2 and r["retain_demo_pass_rate"] == 1.0
        assert r["retain_tokens"] > 0 and r["retain_nll"] > 0


def test_nothing_solved_to_anchor_is_refused_and_so_is_an_anchor_without_demonstrations(tmp_path):
    from training.config_io import ConfigError, parse_train_config
    from training.grpo import GRPOTrainer, TrainingError

    (tmp_path / "zero.py").write_text("def zero(completion, **_):\n    return 0.0\n")
    cfg = _cfg(tmp_path, "by_op", max_pass_rate=0.5)
    cfg.reward.function = f"{tmp_path / 'zero.py'}:zero"
    with pytest.raises(TrainingError, match=r"data.focus.retain_per_step 2 anchors the op groups .*\(groups above "
                                            r"the bar: none\); set data.focus.retain_per_step to 0"):
        GRPOTrainer(cfg).train()
    raw = cfg.model_dump(mode="json")
    raw["guidance"]["demonstrations"] = None
    with pytest.raises(ConfigError, match="data.focus.retain_per_step 2 anchors verified demonstrations: "
                                           "set guidance.demonstrations"):
        parse_train_config(raw)
