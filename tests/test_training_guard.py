"""guard: a step is kept only as far as the starting policy's greedy passes stay as they were -- checked through real
training runs of the tiny model, a real reward and real greedy decoding, with the held set kept for resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from test_training_tiny import _tiny_yaml
from training.guard import TIE_WON, backtrack_scales, count_flips, episode_leads, read_held, token_leads


def test_a_lead_is_the_gap_to_the_runner_up_and_negative_once_another_token_is_ahead():
    logits = torch.tensor([[2.0, 0.5, 1.5], [0.0, 3.0, 1.0], [1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    targets = torch.tensor([0, 2, 1, 0])
    leads = token_leads(logits, targets)
    assert leads.tolist() == pytest.approx([0.5, -2.0, 0.0, TIE_WON])
    # a tie goes as greedy decoding breaks it: torch.argmax picks the lower index
    assert [bool(v > 0) for v in leads] == (logits.argmax(-1) == targets).tolist() == [True, False, False, True]
    # the same gap in log-probabilities: softmax shifts every logit of a row alike
    logp = torch.log_softmax(logits[:2], -1)
    assert token_leads(logp, targets[:2]).tolist() == pytest.approx([0.5, -2.0], abs=1e-6)


def test_a_step_is_tried_whole_then_halved():
    assert backtrack_scales(0) == [1.0]
    assert backtrack_scales(3) == [1.0, 0.5, 0.25, 0.125]


# a seed whose sampled groups at SGD 300 hold a difference early and break the held passes with a whole step (seeds
# 1, 4 and 5 do under the inverse-CDF sampler of training.rollout.sample_from; 0, 2 and 3 keep 0-2 groups a step,
# whose updates leave every held decision as it was)
BREAKING_SEED = 4


def _reward_file(tmp_path: Path) -> Path:
    """An addition passes when the reply holds no letter (the random model's greedy replies do: it writes newlines,
    so the starting policy has passes to hold); a subtraction scores half its share of letters (as the tiny config's
    letter_share, which varies even for random text), below the pass bar, which pushes the update towards letters
    and so towards breaking the held passes."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "by_op.py"
    path.write_text("def by_op(completion, op=None, **_):\n"
                    "    if op == '+':\n        return 0.0 if any(c.isalpha() for c in completion) else 1.0\n"
                    "    return 0.5 * sum(c.isascii() and c.isalpha() for c in completion) / max(1, len(completion))\n")
    return path


def _cfg(tmp_path: Path, lr: float, guard: dict | None, **changes):
    from training.config_io import load_train_config

    settings = {"steps": 4, "batch_size": 8, "rollout__max_new_tokens": 12, "overlong__buffer_tokens": 2,
                "checkpoint__every": 2, "reward__function": f"{_reward_file(tmp_path)}:by_op",
                "optim__optimizer": "sgd", "optim__lr": lr, "optim__max_grad_norm": None, **changes}
    if guard is not None:
        settings["guard"] = guard
    return load_train_config(_tiny_yaml(tmp_path, **settings))


def _greedy_completions(model, tok, cfg, task_ids: list[str]) -> dict[str, list[int]]:
    from training.grpo import load_train_tasks
    from training.train_eval import greedy_pass_at_1

    from training.scoring import load_reward

    by_id = {t.id: t for t in load_train_tasks(cfg)}
    r = greedy_pass_at_1(model, tok, cfg, [by_id[i] for i in task_ids], keep_samples=True,
                         reward=load_reward(cfg.reward.function, kwargs=cfg.reward.kwargs))
    return {s.task_id: s.completion_ids for s in r["samples"]}


def test_keep_decisions_cuts_a_step_back_until_the_held_greedy_passes_reproduce_token_for_token(tmp_path):
    from training.grpo import GRPOTrainer

    guard = {"by": "op", "per_group": 4, "backtrack": 2, "keep": "decisions"}
    guarded = _cfg(tmp_path / "g", 300.0, guard, seed=BREAKING_SEED)
    trainer = GRPOTrainer(guarded)
    trainer.train()
    held = read_held(Path(guarded.output_dir))
    assert held is not None and held.tasks_probed == 8 and held.passed == 4  # the 4 additions pass, never the rest
    assert {e.task_id for e in held.episodes} <= {t.id for t in trainer.tasks}
    assert held.decisions > 0 and held.probe_s is not None
    lines = [json.loads(x) for x in (Path(guarded.output_dir) / "metrics.jsonl").read_text().splitlines()]
    assert all(r["guard_checks"] >= 1 and "guard_s" in r for r in lines)
    assert any(r["guard_scale"] < 1.0 for r in lines)  # this rate breaks them whole; the guard cut steps back
    assert all(r.get("guard_flips", 0) == 0 for r in lines)
    assert any(r["guard_scale"] > 0.0 for r in lines) or all(r["guard_flips_whole_step"] > 0 for r in lines)
    # what the user is promised: the trained policy still decodes every held pass token for token
    ids = [e.task_id for e in held.episodes]
    after = _greedy_completions(trainer.model, trainer.tok, guarded, ids)
    assert all(after[e.task_id] == e.completion_ids for e in held.episodes)
    leads = episode_leads(trainer.model, held.episodes, trainer.tok.pad_token_id)
    assert count_flips(held.episodes, leads) == 0

    # the same run without the guard changes them: the check above could fail
    free = _cfg(tmp_path / "f", 300.0, None, seed=BREAKING_SEED)
    unguarded = GRPOTrainer(free)
    unguarded.train()
    changed = _greedy_completions(unguarded.model, unguarded.tok, free, ids)
    assert any(changed[e.task_id] != e.completion_ids for e in held.episodes)


def test_keep_passes_cuts_a_step_back_until_the_held_tasks_still_pass_and_holds_their_new_episodes(tmp_path):
    from training.grpo import GRPOTrainer, load_train_tasks
    from training.scoring import load_reward
    from training.train_eval import greedy_pass_at_1

    guarded = _cfg(tmp_path / "g", 300.0, {"by": "op", "per_group": 4, "backtrack": 2}, steps=6, seed=BREAKING_SEED)
    trainer = GRPOTrainer(guarded)
    trainer.train()
    held = read_held(Path(guarded.output_dir))
    lines = [json.loads(x) for x in (Path(guarded.output_dir) / "metrics.jsonl").read_text().splitlines()]
    assert any(r["guard_scale"] < 1.0 for r in lines)  # whole steps lost held passes, so they were cut back
    assert all(r.get("guard_lost", 0) == 0 for r in lines)
    reward = load_reward(guarded.reward.function, kwargs=guarded.reward.kwargs)
    by_id = {t.id: t for t in load_train_tasks(guarded)}
    tasks = [by_id[e.task_id] for e in held.episodes]
    # what the user is promised: every held task still passes greedily
    after = greedy_pass_at_1(trainer.model, trainer.tok, guarded, tasks, reward=reward)
    assert after["passed"] == len(tasks) == held.passed

    free = _cfg(tmp_path / "f", 300.0, None, steps=6, seed=BREAKING_SEED)
    unguarded = GRPOTrainer(free)
    unguarded.train()
    broken = greedy_pass_at_1(unguarded.model, unguarded.tok, free, tasks, reward=reward)
    assert broken["passed"] < len(tasks)  # the same run without the guard loses held passes: the check could fail


def test_a_held_episode_that_changed_but_still_passes_is_held_as_decoded_now_and_resumed_so(tmp_path):
    """The replacement path, through real greedy decoding: a held episode the weights no longer reproduce (its
    tokens swapped for spaces, which the reward also passes) is decoded again, passes, and is held as the model now
    decodes it; the checkpoint carries the replacement to a resumed run."""
    from training.grpo import GRPOTrainer

    cfg = _cfg(tmp_path, 1e-4, {"by": "op", "per_group": 2}, steps=2, checkpoint__every=1)
    trainer = GRPOTrainer(cfg, stop_after=1)
    trainer.train()
    decoded = trainer.held_now[0]
    space = trainer.tok.encode(" ")[0]
    # as if an earlier check had held it so: the held set reads each task's episode through guard_changed
    trainer.guard_changed[decoded.task_id] = decoded.model_copy(
        update={"completion_ids": [space] * len(decoded.completion_ids)})
    ok, stats = trainer._guard_check()
    assert ok and stats["guard_redecoded"] == 1 and stats["guard_lost"] == 0 and stats["guard_flips"] > 0
    assert trainer.held_now[0].completion_ids == decoded.completion_ids  # what greedy decoding gives now
    assert trainer.guard_changed == {decoded.task_id: trainer.held_now[0]}
    trainer.save()
    resumed = GRPOTrainer(cfg)
    resumed._setup()
    resumed._hold_guard()
    assert resumed.resumed_from.name == "step-1" and resumed.held_now == trainer.held_now
    assert resumed.guard_changed == trainer.guard_changed


def test_a_small_step_is_kept_whole_and_a_resume_keeps_the_starting_policys_decisions(tmp_path, probe_counts):
    from training.grpo import GRPOTrainer, TrainingError

    probes = probe_counts
    cfg = _cfg(tmp_path, 1e-4, {"by": "op", "per_group": 3})
    GRPOTrainer(cfg, stop_after=2).train()  # "killed" after step 2's checkpoint
    assert probes == [6, 3]  # 3 tasks of each op, then the 3 passes (the additions) decoded again one at a time
    first = read_held(Path(cfg.output_dir))
    resumed = GRPOTrainer(cfg)
    resumed.train()
    assert resumed.resumed_from.name == "step-2" and resumed.step == 4
    assert probes == [6, 3]  # read back, not probed again from the checkpoint
    assert resumed.held == first
    lines = [json.loads(x) for x in (Path(cfg.output_dir) / "metrics.jsonl").read_text().splitlines()]
    assert [r["guard_scale"] for r in lines] == [1.0] * 4 and [r["guard_checks"] for r in lines] == [1.0] * 4

    changed = _cfg(tmp_path, 1e-4, {"by": "op", "per_group": 2})
    with pytest.raises(TrainingError, match="held with other settings"):
        GRPOTrainer(changed).train()


def test_a_policy_with_no_pass_to_hold_is_refused_with_what_to_change(tmp_path):
    from training.grpo import GRPOTrainer, TrainingError

    path = tmp_path / "never.py"
    path.write_text("def never(completion, **_):\n    return 0.5 * (len(completion) % 2)\n")
    cfg = _cfg(tmp_path, 1e-4, {"by": "op", "per_group": 2}, reward__function=f"{path}:never")
    with pytest.raises(TrainingError, match="passes none of the 4 training tasks.*raise guard.per_group"):
        GRPOTrainer(cfg).train()


def test_leads_through_the_shared_prompt_equal_a_plain_forwards(tmp_path):
    """The check's forward (common system prompt once, the head only at held tokens) is the plain full forward."""
    from training.guard import HeldEpisode
    from training.policy import load_policy

    cfg = _cfg(tmp_path, 1e-4, None)
    model, tok = load_policy(cfg.model, seed=0, threads=1)
    system = tok("You are a careful assistant that answers arithmetic questions with one number. " * 3)["input_ids"]
    g = torch.Generator().manual_seed(0)
    episodes = []
    for n, m in [(5, 9), (11, 4), (7, 13)]:
        p = system + torch.randint(10, 4000, (n,), generator=g).tolist()
        c = torch.randint(10, 4000, (m,), generator=g).tolist()
        episodes.append(HeldEpisode(task_id=str(n), prompt_ids=p, completion_ids=c, held=[1] * m))
    got = episode_leads(model, episodes, tok.pad_token_id, batch=2, head_rows=3)
    with torch.no_grad():
        for e, lead in zip(episodes, got):
            ids = torch.tensor([e.prompt_ids + e.completion_ids])
            logits = model(input_ids=ids).logits[0, len(e.prompt_ids) - 1:-1]
            assert lead == pytest.approx(token_leads(logits, torch.tensor(e.completion_ids)).tolist(), abs=1e-4)


def test_a_guard_section_is_checked_up_front():
    from pydantic import ValidationError

    from schemas.train_config import GuardSection

    with pytest.raises(ValidationError, match="per_group"):
        GuardSection(per_group=0)
    with pytest.raises(ValidationError, match="extra"):
        GuardSection(per_groups=2)


def test_the_cli_says_what_the_guard_held_and_did(tmp_path):
    from typer.testing import CliRunner

    from studio.cli import app

    cfg = _tiny_yaml(tmp_path, steps=2, batch_size=8, rollout__max_new_tokens=12, overlong__buffer_tokens=2,
                     reward__function=f"{_reward_file(tmp_path)}:by_op", optim__optimizer="sgd", optim__lr=300.0,
                     optim__max_grad_norm=None, guard={"by": "op", "per_group": 2, "backtrack": 1}, seed=BREAKING_SEED)
    out = CliRunner().invoke(app, ["train", str(cfg), "--no-register"])
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "guard: held 24 decisions of 2 passing greedy episodes on 4 training tasks (2 per op); steps kept" in text
    import re

    whole, cut, dropped = map(int, re.search(r"kept whole (\d+), cut back (\d+), dropped (\d+) of 2", text).groups())
    assert whole + cut + dropped == 2 and whole < 2  # this rate breaks the held passes whole at the first step
