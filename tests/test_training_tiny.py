"""The tiny config trains end to end through `rlvr train`; a SIGKILLed run resumes to the same result; bad configs
are refused up front with what to change; reward errors stop the run instead of training on zeros."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from studio.cli import app
from training.config_io import load_train_config
from policy_probe import assert_one_update_raises_the_demonstrations, mean_trained_logprob

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "examples" / "configs" / "tiny.yaml"
runner = CliRunner()


@pytest.fixture(autouse=True)
def _own_registry(tmp_path, monkeypatch):
    """`rlvr train` records runs and checkpoints: each test gets its own catalog, never the user's."""
    monkeypatch.setenv("RLVR_REGISTRY", str(tmp_path / "registry.sqlite"))


def _tiny_yaml(tmp_path: Path, **changes) -> Path:
    data = yaml.safe_load(TINY.read_text())
    data["data"]["path"] = str(ROOT / "examples" / "arithmetic" / "tasks.jsonl")
    data["reward"]["function"] = str(ROOT / "examples" / "arithmetic" / "reward.py") + ":letter_share"
    data["output_dir"] = str(tmp_path / "run")
    for dotted, value in changes.items():
        node = data
        *parents, leaf = dotted.split("__")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_tiny_config_trains_through_the_cli(tmp_path):
    cfg = _tiny_yaml(tmp_path)
    t0 = time.time()
    result = runner.invoke(app, ["train", str(cfg)])
    assert result.exit_code == 0, result.output
    # under a minute on an idle 2-core machine (about 15 s); the bound leaves room for a machine shared with others
    assert time.time() - t0 < 150
    run = tmp_path / "run"
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == list(range(1, 9))
    for key in ("reward_mean", "pass_rate", "zero_variance_frac", "entropy", "clip_high_frac", "step_time_s",
                "tokens_per_s", "completion_len_mean", "adv_std", "groups_kept"):
        assert key in lines[-1], key
    assert (run / "metrics.png").stat().st_size > 1000
    final = run / "checkpoints" / "step-8"
    manifest = json.loads((final / "manifest.json").read_text())
    assert manifest["step"] == 8 and manifest["reward_version"].startswith("letter_share@")
    assert manifest["dataset_hash"] and manifest["config_hash"] and manifest["parent"] is None
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-4", "step-8"]  # keep: 2
    # the model learned something from a dense reward: the policy moved
    assert any(r["grad_norm"] > 0 for r in lines)
    # the run and its final checkpoint are in the registry, so the checkpoint can be promoted and rolled back to
    from training.registry import Registry

    with Registry() as reg:
        mine = [r for r in reg.runs() if r.config.get("output_dir") == str(run)]
        assert len(mine) == 1 and mine[0].status == "finished" and "reward_mean" in mine[0].metrics
        ck = [c for c in reg.checkpoints() if c.run_id == mine[0].id]
        assert len(ck) == 1 and ck[0].step == 8 and Path(ck[0].path) == final.resolve()


def _weights_digest(folder: Path) -> str:
    return json.loads((folder / "manifest.json").read_text())["weights_hash"]


def test_resume_after_sigkill_gives_the_uninterrupted_result(tmp_path):
    """Kill -9 a run after its first checkpoint, restart it: it resumes from the last complete checkpoint and
    ends with exactly the weights and the per-step rewards of a run that was never interrupted."""
    env = {**os.environ, "RLVR_THREADS": "1"}
    small = {"steps": 4, "checkpoint__every": 2, "checkpoint__keep": 5, "rollout__max_new_tokens": 8,
             "overlong__buffer_tokens": 2, "optim__scheduler": "cosine"}
    straight = _tiny_yaml(tmp_path / "a", **small)
    killed = _tiny_yaml(tmp_path / "b", **small)
    cmd = [sys.executable, "-m", "studio.cli", "train"]
    subprocess.run(cmd + [str(straight)], env=env, cwd=ROOT, check=True, capture_output=True)

    proc = subprocess.Popen(cmd + [str(killed)], env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    ck = tmp_path / "b" / "run" / "checkpoints"
    deadline = time.time() + 120
    while time.time() < deadline and not (ck / "step-2" / "manifest.json").exists():
        time.sleep(0.05)
    time.sleep(0.2)  # somewhere inside step 3 or 4
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert (ck / "step-2").exists()
    if (ck / "step-4").exists():  # the run outpaced the kill: start again from step 2 to test the resume
        import shutil

        shutil.rmtree(ck / "step-4")
    # a half-written checkpoint must never be used
    (ck / ".tmp-step-3").mkdir(exist_ok=True)
    (ck / "step-3").mkdir(exist_ok=True)
    (ck / "step-3" / "model.safetensors").write_bytes(b"truncated")
    done = subprocess.run(cmd + [str(killed)], env=env, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "resumed from" in done.stdout
    assert not (ck / "step-3").exists() and not (ck / ".tmp-step-3").exists()
    a = tmp_path / "a" / "run"
    b = tmp_path / "b" / "run"
    assert _weights_digest(a / "checkpoints" / "step-4") == _weights_digest(b / "checkpoints" / "step-4")
    ra = [json.loads(x) for x in (a / "metrics.jsonl").read_text().splitlines()]
    rb = [json.loads(x) for x in (b / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rb] == [1, 2, 3, 4]
    assert [r["reward_mean"] for r in ra] == [r["reward_mean"] for r in rb]
    assert [r["cursor"] for r in ra] == [r["cursor"] for r in rb]
    # the resumed run takes the cosine schedule's rates where the uninterrupted one did: base x 1, .85, .5, .15
    base = load_train_config(straight).optim.lr
    assert [r["lr"] for r in rb] == [r["lr"] for r in ra] == pytest.approx(
        [base * 0.5 * (1 + math.cos(math.pi * k / 4)) for k in range(4)])
    manifest = json.loads((b / "checkpoints" / "step-4" / "manifest.json").read_text())
    assert manifest["parent"] == "step-2"


@pytest.mark.parametrize("changes, expected", [
    ({"batch_size": 10}, "batch_size 10 is not a multiple of rollout.num_generations 4"),
    ({"loss__type": "gspo", "loss__aggregation": "token-mean"}, "set loss.aggregation: seq-mean-token-mean"),
    ({"reward__allow_unaudited": False}, "reward.allow_unaudited: true"),
    ({"overlong__buffer_tokens": 40}, "must be below rollout.max_new_tokens"),
    ({"rollout__max_turns": 3}, "needs rollout.environment"),
    ({"model__freeze_layers": 1, "lora__enabled": True}, "with LoRA only the adapters train anyway"),
    ({"rollout__temperature": 0}, "rollout.temperature 0 decodes greedily, so the 4 sampled members of every group "
                                  "would be the same reply"),
    ({"loss__policy_coef": 0}, "loss.policy_coef 0 with no guidance.sft_coef leaves nothing to train"),
    ({"guidance__sft_coef": 0.5}, "guidance.sft_coef 0.5 trains on the tasks' demonstrations: set "
                                  "guidance.demonstrations"),
    ({"optim__sft_moments": "both", "optim__optimizer": "sgd"}, "set optim.optimizer to adamw or adamw-bf16"),
    ({"optim__sft_moments": "both", "sft__data_path": "d.jsonl"}, "set sft.save_optimizer: true"),
    ({"optim__sft_moments": "both", "lora__enabled": True}, "trains new adapter weights that have none"),
    ({"steps": 3, "optim__scheduler": "cosine", "optim__warmup_steps": 3}, "leaves none of the run's 3 steps to "
                                                                           "decay"),
    ({"checkpoint__keep_best": True}, "checkpoint.keep_best ranks checkpoints by the held-out pass rate that "
                                      "eval_every measures: set eval_every (e.g. eval_every: 4)"),
])
def test_incompatible_options_are_refused_with_what_to_change(tmp_path, changes, expected):
    result = runner.invoke(app, ["train", str(_tiny_yaml(tmp_path, **changes))])
    assert result.exit_code == 2
    assert expected in " ".join(result.output.split()), result.output
    assert not (tmp_path / "run").exists()


def test_audit_report_verdict_is_checked(tmp_path):
    report = tmp_path / "audit.json"
    report.write_text(json.dumps({"verdict": "fail", "findings": ["no-op passes"]}))
    cfg = _tiny_yaml(tmp_path, reward__allow_unaudited=False, reward__audit_report=str(report))
    result = runner.invoke(app, ["train", str(cfg)])
    assert result.exit_code == 2 and "verdict 'fail'" in result.output
    report.write_text(json.dumps({"verdict": "pass"}))
    from training.config_io import load_train_config

    assert load_train_config(cfg).reward.audit_report == str(report)


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks the refusal on a machine without a GPU")
def test_model_device_cuda_without_a_gpu_is_refused_saying_what_to_set(tmp_path):
    """model.device: cuda on a CPU-only machine stops `rlvr train` with the setting to change, before any step;
    `auto` (the default) trains here on the CPU."""
    from training.policy import load_policy

    result = runner.invoke(app, ["train", str(_tiny_yaml(tmp_path, model__device="cuda"))])
    assert result.exit_code == 1, result.output
    assert "model.device: cuda" in result.output and "auto or cpu" in result.output
    assert not (tmp_path / "run" / "metrics.jsonl").exists()
    from training.config_io import load_train_config

    model, _ = load_policy(load_train_config(_tiny_yaml(tmp_path)).model)
    assert next(model.parameters()).device.type == "cpu"


def test_a_reward_that_raises_stops_training_with_its_error(tmp_path):
    bad = tmp_path / "bad_reward.py"
    bad.write_text("def reward(completion, **kw):\n    raise KeyError('answer_field')\n")
    cfg = _tiny_yaml(tmp_path, reward__function=f"{bad}:reward", steps=2)
    result = runner.invoke(app, ["train", str(cfg)])
    assert result.exit_code == 1
    out = " ".join(result.output.split())
    assert "errored on" in out and "KeyError" in out and "answer_field" in out
    from training.registry import Registry

    with Registry() as reg:  # the run is on record as failed, with no checkpoint
        mine = [r for r in reg.runs() if r.config.get("output_dir") == str(tmp_path / "run")]
        assert [r.status for r in mine] == ["failed"] and not [c for c in reg.checkpoints() if c.run_id == mine[0].id]


def test_dynamic_sampling_drops_zero_variance_groups_and_logs_counts(tmp_path):
    """A reward that is constant on '+' tasks: those groups carry no signal and are dropped; more prompts are drawn
    (bounded by max_rounds) and the counts are in the metrics."""
    rw = tmp_path / "half_reward.py"
    rw.write_text(
        "def reward(completion, op=None, **kw):\n"
        "    if op == '+':\n        return 0.5\n"
        "    chars = [c for c in completion if not c.isspace()]\n"
        "    return sum(c.isalpha() for c in chars) / max(1, len(chars))\n")
    cfg = _tiny_yaml(tmp_path, reward__function=f"{rw}:reward", steps=2, dynamic_sampling__max_rounds=4,
                     overlong__mode="none", rollout__max_new_tokens=8)
    result = runner.invoke(app, ["train", str(cfg)])
    assert result.exit_code == 0, result.output
    recs = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert sum(r["zero_variance_groups"] for r in recs) > 0
    for r in recs:
        assert r["groups_kept"] <= 2
        assert r["groups_sampled"] == r["groups_kept"] + r["zero_variance_groups"]
        assert 1 <= r["ds_rounds"] <= 4


def test_negative_advantage_weight_zero_trains_only_on_the_better_samples(tmp_path):
    """loss.negative_advantage_weight from the YAML reaches the update: with 0, no sample is pushed away, so the
    mean advantage of every step that kept a group is positive (plain GRPO's is 0 by construction)."""
    cfg = _tiny_yaml(tmp_path, steps=2, loss__negative_advantage_weight=0.0)
    result = runner.invoke(app, ["train", str(cfg)])
    assert result.exit_code == 0, result.output
    recs = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    kept = [r for r in recs if r["groups_kept"] > 0]
    assert kept and all(r["adv_mean"] > 0.1 for r in kept), [(r["groups_kept"], r.get("adv_mean")) for r in recs]


def test_top_entropy_fraction_reaches_the_update(tmp_path):
    """loss.top_entropy_fraction from the YAML: every update trains on about that share of the completion tokens."""
    cfg = _tiny_yaml(tmp_path, steps=2, loss__top_entropy_fraction=0.2)
    result = runner.invoke(app, ["train", str(cfg)])
    assert result.exit_code == 0, result.output
    recs = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    kept = [r for r in recs if r["groups_kept"] > 0]
    assert kept and all(0.15 <= r["selected_token_frac"] <= 0.3 for r in kept), [r.get("selected_token_frac") for r in recs]


def test_frozen_layers_keep_their_weights_while_the_rest_trains(tmp_path):
    """model.freeze_embeddings + freeze_layers: GRPO updates only the upper layers; the embeddings (the tied head)
    and the first layer are bit-identical to the initial model in the final checkpoint."""
    import torch
    from safetensors.torch import load_file

    from training.model import load_tokenizer
    from training.policy import build_random_model

    cfg = _tiny_yaml(tmp_path, steps=2, checkpoint__every=2, model__freeze_layers=1, model__freeze_embeddings=True,
                     optim__lr=1e-2)
    result = runner.invoke(app, ["train", str(cfg)])
    assert result.exit_code == 0, result.output
    data = yaml.safe_load(cfg.read_text())
    start = build_random_model(load_tokenizer("default"), data["model"]["architecture"], seed=data["seed"])
    after = load_file(tmp_path / "run" / "checkpoints" / "step-2" / "model.safetensors")
    before = {k: v for k, v in start.state_dict().items() if k in after}
    frozen = [k for k in before if k.startswith(("model.embed_tokens", "model.layers.0."))]
    trained = [k for k in before if k.startswith("model.layers.1.") and k.endswith("proj.weight")]
    assert frozen and trained
    assert all(torch.equal(before[k], after[k]) for k in frozen), [k for k in frozen if not torch.equal(before[k], after[k])]
    assert any(not torch.equal(before[k], after[k]) for k in trained)


def test_freezing_every_layer_is_refused_with_the_layer_count():
    from schemas.train_config import ModelSection
    from training.model import load_tokenizer
    from training.policy import build_random_model, freeze

    model = build_random_model(load_tokenizer("default"))
    with pytest.raises(ValueError, match="the model has 2 decoder layers; freeze fewer"):
        freeze(model, ModelSection(freeze_layers=2))


@pytest.mark.parametrize("loss,optimizer,lr", [("grpo", "adamw", 1e-3), ("dapo", "adamw", 1e-3),
                                               ("dr_grpo", "adamw", 1e-3), ("gspo", "adamw", 1e-3),
                                               ("grpo", "sgd", 0.5)])
def test_one_update_raises_the_better_completions_and_lowers_the_worse(tmp_path, loss, optimizer, lr):
    """The direction of learning, end to end through the trainer's own sampling, packing and update: in each group
    of 4 completions one is scored 1 and three 0; after one optimizer step every rewarded completion is more likely
    under the policy and every other one less likely. A sign slip anywhere between the scores and the gradient (the
    advantages, the loss, its aggregation, the shared-prompt forward) fails here, where the parity tests, which
    compare the loss value, would not see it."""
    import torch

    from training.config_io import load_train_config
    from training.grpo import GRPOTrainer
    from training.losses import group_advantages
    from training.rollout import SamplingParams
    from training.samples import pack

    cfg = load_train_config(_tiny_yaml(tmp_path, loss__type=loss, overlong__mode="none", optim__lr=lr,
                                       optim__optimizer=optimizer))
    trainer = GRPOTrainer(cfg)
    trainer._setup()
    samples = trainer.collect(trainer._draw(2), 4, SamplingParams(max_new_tokens=16, temperature=1.0, seed=1))
    scores = torch.tensor([1.0 if i % 4 == 0 else 0.0 for i in range(len(samples))])
    batch = pack(samples, trainer.tok.pad_token_id)

    before = mean_trained_logprob(trainer, batch)
    adv, _ = group_advantages(scores, 4, scale="group", leave_one_out=False)
    trainer._update(batch, adv)
    delta = mean_trained_logprob(trainer, batch) - before
    assert bool((delta[scores == 1] > 0).all()) and bool((delta[scores == 0] < 0).all()), delta.tolist()


def _always_pass_reward(tmp_path: Path) -> str:
    """A reward file, as a user writes one, that passes every completion: every group is zero-variance."""
    f = tmp_path / "always.py"
    f.write_text("from schemas.rewards import RewardResult\n\n"
                 "def always(completion, **_):\n"
                 "    return RewardResult(score=1.0, passed=True, reason='always')\n")
    return f"{f}:always"


@pytest.mark.parametrize("loss,verdict", [("grpo", True), ("dapo", True), ("grpo", False)])
def test_zero_variance_groups_learn_under_rl_zvp(tmp_path, loss, verdict):
    """loss.zero_variance_alpha (RL-ZVP): an all-pass group, which GRPO's advantages leave untouched and DAPO's
    dynamic sampling drops, is kept and after one optimizer step made more likely; an all-fail group is made less
    likely. Through the trainer's own rollout phase (the groups kept and logged), packing and update."""
    import torch

    from training.config_io import load_train_config
    from training.grpo import GRPOTrainer
    from training.losses import group_advantages
    from training.samples import pack

    cfg = load_train_config(_tiny_yaml(tmp_path, loss__type=loss, overlong__mode="none", optim__lr=1e-3,
                                       reward__function=_always_pass_reward(tmp_path), loss__zero_variance_alpha=0.5,
                                       optim__micro_batch_size=4))
    trainer = GRPOTrainer(cfg)
    trainer._setup()
    samples, stats = trainer._rollout_phase()
    assert len(samples) == cfg.batch_size and stats["zero_variance_groups_trained"] == cfg.prompts_per_step
    assert stats["ds_rounds"] == 1  # nothing was dropped, so nothing was sampled again
    if not verdict:  # the same completions, all failed
        for s in samples:
            s.passed, s.score = False, 0.0
    # and one group of the batch with a spread: its micro-batch has group advantages only, the other RL-ZVP's
    samples[0].passed, samples[0].score = (False, 0.0) if verdict else (True, 1.0)
    batch = pack(samples, trainer.tok.pad_token_id)

    outcome = trainer._zero_variance_outcome(samples)
    assert outcome[:4].tolist() == [0, 0, 0, 0] and bool((outcome[4:] == (1 if verdict else -1)).all())
    adv, _ = group_advantages(torch.tensor([s.score for s in samples]), 4)
    before = mean_trained_logprob(trainer, batch)
    out = trainer._update(batch, adv, outcome)
    delta = mean_trained_logprob(trainer, batch)[4:] - before[4:]
    assert bool((delta > 0).all() if verdict else (delta < 0).all()), delta.tolist()
    assert (out["zero_variance_adv_mean"] > 0) == verdict


def test_without_rl_zvp_dynamic_sampling_drops_zero_variance_groups(tmp_path):
    from training.config_io import load_train_config
    from training.grpo import GRPOTrainer

    cfg = load_train_config(_tiny_yaml(tmp_path, loss__type="dapo", reward__function=_always_pass_reward(tmp_path),
                                       dynamic_sampling__max_rounds=2))
    trainer = GRPOTrainer(cfg)
    trainer._setup()
    samples, stats = trainer._rollout_phase()
    assert samples == [] and stats["ds_rounds"] == 2 and "zero_variance_groups_trained" not in stats


def test_rl_zvp_settings_that_train_nothing_are_refused(tmp_path):
    from training.config_io import load_train_config

    with pytest.raises(Exception, match="trains no zero-variance group"):
        load_train_config(_tiny_yaml(tmp_path, loss__zero_variance_alpha=0.0, loss__zero_variance_negative_alpha=0.0))
    with pytest.raises(Exception, match="needs loss.zero_variance_alpha"):
        load_train_config(_tiny_yaml(tmp_path, loss__zero_variance_negative_alpha=0.1))


def test_lora_on_chosen_layers_trains_only_those_adapters(tmp_path):
    """lora.layers puts adapters on those decoder layers only (peft's layers_to_transform): the GRPO checkpoint holds
    adapter weights for layer 1 alone, and the update moved them (B starts at zero)."""
    from safetensors.torch import load_file

    cfg = _tiny_yaml(tmp_path, steps=2, checkpoint__every=2, optim__lr=1e-2, lora__enabled=True, lora__r=4,
                     lora__layers=[1])
    result = runner.invoke(app, ["train", str(cfg)])
    assert result.exit_code == 0, result.output
    step = tmp_path / "run" / "checkpoints" / "step-2"
    assert json.loads((step / "adapter_config.json").read_text())["layers_to_transform"] == [1]
    weights = load_file(step / "adapter_model.safetensors")
    assert weights and all(".layers.1." in k for k in weights), sorted(weights)
    assert any(k.endswith("lora_B.weight") and v.abs().max() > 0 for k, v in weights.items())
    # step 2 samples through the merged step-1 adapters (training.lora_sampling); its recorded log-probs must be
    # the ones the unmerged training forward computes
    recs = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert recs[1]["logprob_gen_gap"] < 1e-3, recs[1]["logprob_gen_gap"]


def test_lora_layers_outside_the_model_are_refused(tmp_path):
    cfg = _tiny_yaml(tmp_path, steps=1, lora__enabled=True, lora__layers=[2])
    result = runner.invoke(app, ["train", str(cfg)])
    assert result.exit_code != 0
    assert "lora.layers [2]: the model has 2 decoder layers (0..1)" in " ".join(result.output.split()), result.output


def _arithmetic_demonstrations(tmp_path: Path, wrong_every: int = 0) -> tuple[Path, set[str]]:
    """The arithmetic demonstrations, every `wrong_every`-th one given a wrong answer (0: none); the wrong task ids."""
    rows = [json.loads(x) for x in (ROOT / "examples" / "arithmetic" / "demonstrations.jsonl").read_text().splitlines()]
    wrong = set()
    for i, row in enumerate(rows):
        if wrong_every and i % wrong_every == 0:
            row["messages"][-1]["content"] = "<answer>-99999</answer>"
            wrong.add(row["task_id"])
    path = tmp_path / "demos.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path, wrong


def test_single_turn_guided_groups_end_with_the_demonstration_scored_by_the_reward(tmp_path):
    """guidance.demonstrations on single-turn tasks (no environment): each group is its sampled completions plus
    the task's demonstrated reply, with the group's prompt tokens, trained on, and scored by the run's reward -- a
    wrong demonstration fails like a sample, it is never assumed to pass. A random model fails every sample of the
    strict reward, so without guidance nothing would be learned; with it, one update makes every demonstration more
    likely and every failed sample less likely."""
    from training.config_io import load_train_config
    from training.grpo import GRPOTrainer
    from training.rollout import SamplingParams

    demos, wrong = _arithmetic_demonstrations(tmp_path, wrong_every=2)
    strict = str(ROOT / "examples" / "arithmetic" / "reward.py") + ":tagged_answer"
    trainer = GRPOTrainer(load_train_config(_tiny_yaml(tmp_path, guidance__demonstrations=str(demos),
                                                       reward__function=strict, overlong__mode="none")))
    trainer._setup()
    tasks = [next(t for t in trainer.tasks if t.id in wrong), next(t for t in trainer.tasks if t.id not in wrong)]
    samples = trainer.collect(tasks, 4, SamplingParams(max_new_tokens=16, temperature=1.0, seed=0))
    assert [s.group for s in samples] == [0] * 4 + [1] * 4
    assert [bool(s.extras.get("demonstration")) for s in samples] == [False, False, False, True] * 2
    for s in samples:
        assert s.prompt_ids == samples[4 * s.group].prompt_ids and len(s.completion_ids) == len(s.loss_mask)
    bad, good = samples[3], samples[7]
    assert bad.result.passed is False and "-99999" in bad.text
    assert good.result.passed is True and good.loss_mask == [1] * len(good.completion_ids)
    assert trainer.tok.decode(good.completion_ids) == f"<answer>{tasks[1].answer}</answer><|im_end|>"
    assert not any(s.result.passed for s in samples if not s.extras.get("demonstration"))

    kept, stats = trainer._rollout_phase()  # groups whose demonstration is wrong are zero-variance: dropped
    assert stats["groups_kept"] >= 1 and 0 < stats["demo_pass_rate"] < 1 and stats["pass_rate"] == 0.0
    assert all(s.passed == bool(s.extras.get("demonstration")) for s in kept)
    for s in kept:
        s.score = float(s.passed)
    assert_one_update_raises_the_demonstrations(trainer, kept, 4)


def test_a_single_turn_demonstration_with_several_replies_is_refused_naming_the_task(tmp_path):
    from training.config_io import load_train_config
    from training.grpo import GRPOTrainer, TrainingError

    demos, _ = _arithmetic_demonstrations(tmp_path)
    rows = [json.loads(x) for x in demos.read_text().splitlines()]
    for row in rows:
        row["messages"] += [{"role": "user", "content": "and?"}, {"role": "assistant", "content": "<answer>1</answer>"}]
    demos.write_text("".join(json.dumps(r) + "\n" for r in rows))
    trainer = GRPOTrainer(load_train_config(_tiny_yaml(tmp_path, guidance__demonstrations=str(demos))))
    trainer._setup()
    with pytest.raises(TrainingError, match=r"task arith-\d+ has 2 assistant replies; a single-turn task"):
        trainer._rollout_phase()


def test_guidance_demonstrations_resolve_next_to_the_config_and_must_exist(tmp_path, monkeypatch):
    """Like data.path and sft.data_path: a relative guidance.demonstrations is found next to the config file
    wherever the command runs from, and a missing one is refused up front naming the field."""
    from training.config_io import ConfigError, load_train_config

    (tmp_path / "configs").mkdir()
    demos, _ = _arithmetic_demonstrations(tmp_path / "configs")
    cfg_path = _tiny_yaml(tmp_path / "configs", guidance__demonstrations="demos.jsonl")
    monkeypatch.chdir(tmp_path)
    assert load_train_config(cfg_path).guidance.demonstrations == str(demos)
    demos.unlink()
    with pytest.raises(ConfigError, match="guidance.demonstrations: .*demos.jsonl does not exist"):
        load_train_config(cfg_path)


def test_a_demonstration_longer_than_max_new_tokens_is_cut_and_scored_as_cut():
    """A demonstration is held to the samples' token limit: cut, marked truncated, and its text (what the reward
    scores) is the cut reply, not the full one the model is not trained on."""
    from schemas.task import TaskRow
    from training.guidance import append_demonstrations
    from training.model import load_tokenizer
    from training.samples import Sample

    tok = load_tokenizer("default")
    task = TaskRow(id="t", split="train", prompt=[{"role": "user", "content": "What is 1 + 12344?"}], answer="12345")
    sampled = Sample(group=0, task_id="t", prompt_ids=[1, 2], completion_ids=[3], loss_mask=[1], logprobs=[-1.0],
                     truncated=False, text="")
    *_, demo = append_demonstrations([sampled], [task], {"t": ["<answer>12345</answer>"]}, tok, 4)
    assert demo.truncated and len(demo.completion_ids) == 4 and demo.prompt_ids == [1, 2]
    assert demo.text == tok.decode(demo.completion_ids) and "</answer>" not in demo.text
    *_, whole = append_demonstrations([sampled], [task], {"t": ["<answer>12345</answer>"]}, tok, 64)
    assert not whole.truncated and whole.text == "<answer>12345</answer>"
    assert tok.decode(whole.completion_ids) == "<answer>12345</answer><|im_end|>"


@pytest.mark.parametrize("mode", ["both", "second"])
def test_grpo_continues_the_adamw_moments_the_sft_stage_ended_with(tmp_path, mode):
    """sft.save_optimizer writes SFT's AdamW moments beside its model, by weight name; optim.sft_moments starts GRPO's
    AdamW from them. Checked on the first GRPO update itself: each weight's second moment is SFT's decayed by beta2
    plus the new gradient's share, and the step count goes on from SFT's (a fresh AdamW would hold only the new
    gradient, and its first update is sign descent); "second" starts the first moment at zero, so the update follows
    GRPO's gradient alone. A wrong beta, or a model folder without moments, is refused."""
    import torch

    from training.config_io import load_train_config
    from training.grpo import GRPOTrainer, TrainingError
    from training.losses import group_advantages
    from training.optim import SFT_MOMENTS
    from training.rollout import SamplingParams
    from training.samples import pack
    from training.sft import run_sft

    demos, _ = _arithmetic_demonstrations(tmp_path)
    betas = [0.9, 0.999]
    cfg = load_train_config(_tiny_yaml(tmp_path, model__freeze_layers=1, overlong__mode="none",
                                       optim__optimizer="adamw", optim__sft_moments=mode, optim__betas=betas,
                                       sft__data_path=str(demos), sft__max_steps=3, sft__lr=3e-3,
                                       sft__batch_size=4, sft__save_optimizer=True))
    sft = run_sft(cfg, out_dir=tmp_path / "sft")
    saved = torch.load(sft / SFT_MOMENTS, weights_only=True)
    assert saved["betas"] == betas and json.loads((sft / "sft_info.json").read_text())["optimizer_moments"] == \
        len(saved["moments"])

    trainer = GRPOTrainer(cfg, init_from=str(sft))
    trainer._setup()
    trained = {n: p for n, p in trainer.model.named_parameters() if p.requires_grad}
    assert set(trained) == set(saved["moments"]) and not any(n.startswith("model.layers.0.") for n in trained)
    samples = trainer.collect(trainer._draw(2), 4, SamplingParams(max_new_tokens=16, temperature=1.0, seed=1))
    scores = torch.tensor([1.0 if i % 4 == 0 else 0.0 for i in range(len(samples))])
    adv, _ = group_advantages(scores, 4, scale="group", leave_one_out=False)
    trainer._update(pack(samples, trainer.tok.pad_token_id), adv)
    b1, b2 = betas
    for name, p in trained.items():
        old, st = saved["moments"][name], trainer.optimizer.state[p]
        assert int(st["step"]) == old["step"] + 1 == 4, name
        m0 = old["exp_avg"] if mode == "both" else torch.zeros_like(old["exp_avg"])
        assert mode == "second" or m0.abs().sum() > 0, name
        grad = (st["exp_avg"] - b1 * m0) / (1 - b1)  # the new gradient, from the first moment
        assert torch.allclose(st["exp_avg_sq"], b2 * old["exp_avg_sq"] + (1 - b2) * grad * grad,
                              rtol=1e-3, atol=1e-12), name

    wrong = load_train_config(_tiny_yaml(tmp_path / "b", model__freeze_layers=1, optim__optimizer="adamw",
                                         optim__sft_moments="both"))  # the default betas (0.9, 0.99)
    with pytest.raises(TrainingError, match=r"betas \[0.9, 0.999\]; set optim.betas"):
        GRPOTrainer(wrong, init_from=str(sft))._setup()
    (sft / SFT_MOMENTS).unlink()
    with pytest.raises(TrainingError, match="no SFT moments here; run the SFT stage with sft.save_optimizer"):
        GRPOTrainer(cfg, init_from=str(sft))._setup()
