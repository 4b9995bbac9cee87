"""Multi-turn tool rollouts: the token stream is exactly the rendered conversation, the policy's own tokens are
trained on and tool-output tokens are masked; episodes run through the real workplace environment and verifier.

The policy here is a scripted causal LM (a real torch module with a real KV cache, answering from a script), so
that the rollout code, the tool loop, the environment and the template rendering are all the real ones while the
replies are known in advance."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from training.rollout import SamplingParams
from policy_probe import assert_one_update_raises_the_demonstrations, mean_trained_logprob

CALL = '<tool_call>{"name": "email_search_emails", "arguments": {"query": "status"}}</tool_call>'
FINAL = "Nothing needed to change."


class ScriptedLM(torch.nn.Module):
    """Turn k of every episode replies script[k] (then its end token). The turn is read at each prefill: the number
    of assistant headers the row has seen (the generation prompt of turn 1, plus one per earlier turn)."""

    def __init__(self, tok, replies):
        super().__init__()
        self.dummy = torch.nn.Parameter(torch.zeros(1))
        self.vocab = len(tok)
        self.header = tok("<|im_start|>assistant", add_special_tokens=False)["input_ids"]
        self.script = [tok(r, add_special_tokens=False)["input_ids"] + [tok.convert_tokens_to_ids("<|im_end|>")]
                       for r in replies]
        self.turn: list[int] = []
        self.pos: list[int] = []

    def forward(self, input_ids, attention_mask=None, position_ids=None, past_key_values=None, use_cache=None,
                logits_to_keep=None, **kw):
        b, length = input_ids.shape
        # the cache holds a 1 where an assistant header ends, so the turn count survives a prefill that feeds only
        # the new tokens of a turn (the rollout keeps its KV cache between turns)
        marks = torch.zeros(b, 1, length, 1)
        h = len(self.header)
        for i, row in enumerate(input_ids.tolist()):
            for j in range(h - 1, length):
                marks[i, 0, j, 0] = float(row[j - h + 1:j + 1] == self.header)
        seen = past_key_values.update(marks, marks.clone(), 0)[0] if past_key_values is not None else marks
        if length > 1 or not self.turn:  # a prefill: read the turn from the context
            self.turn = [max(0, int(c) - 1) for c in seen.sum(dim=(1, 2, 3)).tolist()]
            self.pos = [0] * b
        else:
            if len(self.turn) != b:  # the prompt's cache was repeated for the group
                rep = b // len(self.turn)
                self.turn = [t for t in self.turn for _ in range(rep)]
                self.pos = [p for p in self.pos for _ in range(rep)]
            self.pos = [p + 1 for p in self.pos]
        logits = torch.zeros(b, 1, self.vocab)
        for i in range(b):
            script = self.script[min(self.turn[i], len(self.script) - 1)]
            logits[i, 0, script[min(self.pos[i], len(script) - 1)]] = 30.0
        return SimpleNamespace(logits=logits)


@pytest.fixture(scope="module")
def workplace(tmp_path_factory):
    from studio.workplace_dataset import build_dataset

    out = tmp_path_factory.mktemp("wp")
    build_dataset(out, n=40)
    return out


def test_tool_output_tokens_are_masked_and_the_stream_is_the_conversation(workplace):
    from generators.task_io import read_tasks
    from training.config_io import parse_train_config
    from training.model import load_tokenizer
    from training.multiturn import EnvironmentCollector
    from training.samples import pack

    tok = load_tokenizer("default")
    tok.padding_side = "left"
    cfg = parse_train_config({
        "data": {"path": str(workplace)}, "reward": {"function": "env", "allow_unaudited": True},
        "rollout": {"environment": "workplace", "max_turns": 4, "max_new_tokens": 64, "max_total_tokens": 4096},
    })
    tasks = [t for t in read_tasks(workplace / "test.parquet")][:2]
    model = ScriptedLM(tok, [CALL, FINAL])
    collector = EnvironmentCollector(cfg, model, tok, None)
    samples = collector(tasks, 2, SamplingParams(max_new_tokens=64, temperature=0.0))
    assert len(samples) == 4 and [s.group for s in samples] == [0, 0, 1, 1]
    for s in samples:
        assert s.extras["turns"] == 2 and s.extras["stopped"] == "answer"
        assert len(s.completion_ids) == len(s.loss_mask) == len(s.logprobs)
        trained = tok.decode([t for t, m in zip(s.completion_ids, s.loss_mask) if m])
        masked = tok.decode([t for t, m in zip(s.completion_ids, s.loss_mask) if not m])
        assert trained == CALL + "<|im_end|>" + FINAL + "<|im_end|>"
        assert "<|im_start|>tool" in masked and '"emails"' in masked and masked.endswith("<|im_start|>assistant\n")
        assert all(lp == 0.0 for lp, m in zip(s.logprobs, s.loss_mask) if not m)
        # prompt + completion is token for token the chat template's rendering of the whole episode
        task = next(t for t in tasks if t.id == s.task_id)
        from rewards.environments.loop import ToolLoop
        from rewards.environments.workplace import WorkplaceEnv
        from training.multiturn import load_workplace_world

        loop = ToolLoop(task, WorkplaceEnv(load_workplace_world(workplace)), max_turns=4)
        loop.step(CALL)
        loop.step(FINAL)
        rendered = tok.apply_chat_template(loop.prompt(), tokenize=False)
        assert tok.decode(s.prompt_ids + s.completion_ids) == rendered.rstrip("\n")
        # the verdict is the environment's verifier's: a search and no action does not pass
        assert s.result is not None and s.result.passed is False and s.result.score is not None
        # searching and stopping earns no shaped credit: giving up must not outscore trying (see the next test)
        assert s.result.score == s.result.components["shaped"] == 0.0
    pb = pack(samples, tok.pad_token_id)
    assert float(pb.loss_mask.sum()) == sum(sum(s.loss_mask) for s in samples)
    assert float(pb.completion_mask.sum()) > float(pb.loss_mask.sum())  # tool tokens are context, not loss


def test_env_reward_trains_on_the_shaped_composition(workplace):
    """reward.function `env` scores with the verifier's shaped composition (it once trained on the 0/1 verdict
    while logging it as shaped): trying the task's write with a wrong id fails, yet earns credit below every pass."""
    from generators.task_io import read_tasks
    from schemas.workplace import WRITE_TOOLS
    from training.config_io import parse_train_config
    from training.model import load_tokenizer
    from training.multiturn import EnvironmentCollector

    tok = load_tokenizer("default")
    tok.padding_side = "left"
    cfg = parse_train_config({
        "data": {"path": str(workplace)}, "reward": {"function": "env", "allow_unaudited": True},
        "rollout": {"environment": "workplace", "max_turns": 4, "max_new_tokens": 96, "max_total_tokens": 4096},
    })
    by_tool: dict = {}
    for t in read_tasks(workplace / "train.parquet"):
        for c in t.ground_truth_calls or []:
            if c.name in WRITE_TOOLS and any("id" in k for k in c.arguments):
                by_tool.setdefault(c.name, {}).setdefault(t.id, (t, c))
    # two different tasks that need the same write tool (two prompts: the scripted model reads turns from a prefill)
    (t1, write), (t2, _) = next(list(v.values())[:2] for v in by_tool.values() if len(v) >= 2)
    bad = {k: ("00009999" if "id" in k else v) for k, v in write.arguments.items()}
    reply = "<tool_call>" + json.dumps({"name": write.name, "arguments": bad}) + "</tool_call>"
    samples = EnvironmentCollector(cfg, ScriptedLM(tok, [reply, "Done."]), tok, None)(
        [t1, t2], 2, SamplingParams(max_new_tokens=96, temperature=0.0))
    assert len(samples) == 4
    for s in samples:
        assert s.result.passed is False and s.result.components["write_tools_tried"] == 1.0, s.result.reason
        assert s.result.score == pytest.approx(s.result.components["shaped"]) and 0 < s.result.score <= 0.49


def test_tool_suffix_closes_an_unended_turn():
    from training.model import load_tokenizer
    from training.multiturn import tool_suffix_ids

    tok = load_tokenizer("default")
    before = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    after = before + [{"role": "assistant", "content": "A"}, {"role": "tool", "content": "R"}]
    ended = tok.decode(tool_suffix_ids(tok, before, "A", after, True))
    cut = tok.decode(tool_suffix_ids(tok, before, "A", after, False))
    assert ended == "\n<|im_start|>tool\nR<|im_end|>\n<|im_start|>assistant\n"
    assert cut == "<|im_end|>" + ended


def test_sft_trains_on_exactly_the_prompts_rollouts_show(workplace):
    """A demonstration and an episode of the same stored task see the same tokens: the system prompt (tool listing
    with parameters in schema order, after the Parquet round trip), the request, and each tool result. A model
    fine-tuned on one prompt and evaluated on a reworded one is measured on a task it never saw."""
    import json

    from generators.task_io import read_tasks
    from rewards.environments.loop import ToolLoop
    from rewards.environments.workplace import WorkplaceEnv
    from training.model import load_tokenizer
    from training.multiturn import load_workplace_world
    from training.sft import tokenize_with_assistant_mask

    tok = load_tokenizer("default")
    tasks = {t.id: t for t in read_tasks(workplace / "train.parquet")}
    world = load_workplace_world(workplace)
    demos = [json.loads(line) for line in (workplace / "demonstrations.jsonl").read_text().splitlines()]
    assert demos
    for demo in demos:
        loop = ToolLoop(tasks[demo["task_id"]], WorkplaceEnv(world), max_turns=8)
        row = tokenize_with_assistant_mask(tok, demo["messages"], 8192)
        for msg in demo["messages"][2:]:
            if msg["role"] != "assistant":
                continue
            shown = tok(tok.apply_chat_template(loop.prompt(), add_generation_prompt=True, tokenize=False),
                        add_special_tokens=False)["input_ids"]
            assert row["input_ids"][: len(shown)] == shown, demo["task_id"]
            assert row["assistant_masks"][len(shown)] == 1  # the next token is the demonstrated reply
            loop.step(msg["content"])
        assert loop.done


def _guided_tasks(workplace, n):
    """`n` train tasks that have a demonstration, and the demonstrations file's replies for them."""
    from generators.task_io import read_tasks
    from training.guidance import demonstration_replies

    demos = demonstration_replies(workplace / "demonstrations.jsonl")
    tasks = [t for t in read_tasks(workplace / "train.parquet") if t.id in demos][:n]
    assert len(tasks) == n
    return tasks, demos


def test_guidance_replays_each_tasks_demonstration_as_the_last_group_member(workplace):
    """guidance.demonstrations: each group is its sampled episodes plus the task's demonstration, replayed through a
    fresh environment and scored by the same verifier. The replayed stream is token for token the chat template's
    rendering of the demonstration, its replies are trained on and the environment's answers are masked, so a
    failing policy's group still holds a verified pass to learn from."""
    from training.config_io import parse_train_config
    from training.model import load_tokenizer
    from training.multiturn import EnvironmentCollector
    from training.sft import tokenize_with_assistant_mask

    tok = load_tokenizer("default")
    tok.padding_side = "left"
    cfg = parse_train_config({
        "data": {"path": str(workplace)}, "reward": {"function": "env:binary", "allow_unaudited": True},
        "rollout": {"environment": "workplace", "max_turns": 6, "max_new_tokens": 64, "max_total_tokens": 4096},
        "guidance": {"demonstrations": str(workplace / "demonstrations.jsonl")},
    })
    tasks, demos = _guided_tasks(workplace, 2)
    samples = EnvironmentCollector(cfg, ScriptedLM(tok, [CALL, FINAL]), tok, None, demonstrations=demos)(
        tasks, 3, SamplingParams(max_new_tokens=64, temperature=0.0))
    assert [s.group for s in samples] == [0, 0, 0, 1, 1, 1]
    assert [bool(s.extras["demonstration"]) for s in samples] == [False, False, True] * 2
    for s in samples:
        assert len(s.completion_ids) == len(s.loss_mask) == len(s.logprobs)
        if not s.extras["demonstration"]:
            assert s.result.passed is False and s.result.score == 0.0
            continue
        assert s.result.passed is True and s.result.score == 1.0, s.result.reason
        record = next(json.loads(line) for line in (workplace / "demonstrations.jsonl").read_text().splitlines()
                      if json.loads(line)["task_id"] == s.task_id)
        rendered = tok.apply_chat_template(record["messages"], tokenize=False)
        assert tok.decode(s.prompt_ids + s.completion_ids) == rendered.rstrip("\n")
        # token for token and mask for mask what SFT trained on (the same text can tokenize two ways): guidance
        # continues SFT's lesson, never a re-tokenised variant of it
        sft = tokenize_with_assistant_mask(tok, record["messages"], 8192)
        stream = s.prompt_ids + s.completion_ids
        assert len(stream) >= len(sft["input_ids"]) - 1  # all but the template's closing newline
        assert stream == sft["input_ids"][:len(stream)]
        assert [0] * len(s.prompt_ids) + s.loss_mask == sft["assistant_masks"][:len(stream)]
        trained = tok.decode([t for t, m in zip(s.completion_ids, s.loss_mask) if m])
        assert trained == "".join(r + "<|im_end|>" for r in demos[s.task_id])
        masked = tok.decode([t for t, m in zip(s.completion_ids, s.loss_mask) if not m])
        assert "<|im_start|>tool" in masked


def test_a_demonstration_the_world_rejects_is_scored_as_a_fail(workplace):
    """A replayed demonstration is scored, never assumed to pass: one that does not do the task (here it searches
    and stops) fails the verifier like a sample would, and so gets no positive advantage."""
    from training.config_io import parse_train_config
    from training.model import load_tokenizer
    from training.multiturn import EnvironmentCollector

    tok = load_tokenizer("default")
    tok.padding_side = "left"
    cfg = parse_train_config({
        "data": {"path": str(workplace)}, "reward": {"function": "env:binary", "allow_unaudited": True},
        "rollout": {"environment": "workplace", "max_turns": 6, "max_new_tokens": 64, "max_total_tokens": 4096},
    })
    tasks, _ = _guided_tasks(workplace, 1)
    wrong = {tasks[0].id: [CALL, FINAL]}  # a "demonstration" that searches and stops: not the task's action
    samples = EnvironmentCollector(cfg, ScriptedLM(tok, [CALL, FINAL]), tok, None, demonstrations=wrong)(
        tasks, 2, SamplingParams(max_new_tokens=64, temperature=0.0))
    demo = samples[-1]
    assert demo.extras["demonstration"] and demo.result.passed is False and demo.result.score == 0.0


@pytest.mark.parametrize("script, first_call", [([CALL, FINAL], "email_search_emails"), ([FINAL], None)])
def test_greedy_evaluation_keeps_each_tasks_episode_and_first_call(workplace, script, first_call):
    """greedy_pass_at_1(keep_episodes=True), what benchmarks/greedy_episode_diff.py compares: one episode per task,
    with the verifier's verdict and reason, the tool the first reply called (None when it answered without one) and
    the whole episode's text."""
    from training.config_io import parse_train_config
    from training.model import load_tokenizer
    from training.train_eval import greedy_pass_at_1

    tok = load_tokenizer("default")
    cfg = parse_train_config({
        "data": {"path": str(workplace)}, "reward": {"function": "env:binary", "allow_unaudited": True},
        "rollout": {"environment": "workplace", "max_turns": 6, "max_new_tokens": 64, "max_total_tokens": 4096},
    })
    tasks, _ = _guided_tasks(workplace, 3)
    r = greedy_pass_at_1(ScriptedLM(tok, script), tok, cfg, tasks, batch=2, keep_episodes=True)
    assert [e["task_id"] for e in r["episodes"]] == [t.id for t in tasks]
    for e in r["episodes"]:
        assert e["first_call"] == first_call and e["passed"] == (e["task_id"] in r["passed_ids"]) and e["reason"]
        assert FINAL in e["text"] and (CALL in e["text"]) == (first_call is not None)
    assert "episodes" not in greedy_pass_at_1(ScriptedLM(tok, script), tok, cfg, tasks[:1])


def _guided_trainer(workplace, tmp_path, demonstrations, num_generations=4, temperature=1.0, sft_coef=0.0):
    from training.config_io import parse_train_config
    from training.grpo import GRPOTrainer

    cfg = parse_train_config({
        "output_dir": str(tmp_path / "run"), "threads": 1, "batch_size": 8, "seed": 0,
        "model": {"init": "random", "tokenizer": "default", "architecture": {
            "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 2}},
        "data": {"path": str(workplace), "split": "train"},
        "reward": {"function": "env:binary", "allow_unaudited": True},
        "rollout": {"environment": "workplace", "num_generations": num_generations, "max_turns": 6,
                    "max_new_tokens": 12, "max_total_tokens": 4096, "temperature": temperature},
        "guidance": {"demonstrations": str(demonstrations), "sft_coef": sft_coef},
        "loss": {"type": "grpo"}, "overlong": {"mode": "none"}, "optim": {"lr": 1e-3, "micro_batch_size": 4},
    })
    return GRPOTrainer(cfg)


def test_guided_groups_train_toward_the_demonstration_when_every_sample_fails(workplace, tmp_path):
    """End to end through the trainer: a random model fails every episode, so without guidance every group is
    zero-variance and there is nothing to learn; with guidance each group is 3 failed samples + 1 verified
    demonstration, the rollout phase keeps every group, logs the sampled pass rate apart from the demonstrations',
    and one update makes each demonstration more likely and each failed sample less likely."""
    import torch

    trainer = _guided_trainer(workplace, tmp_path, workplace / "demonstrations.jsonl")
    trainer._setup()
    assert all(t.id in trainer.demonstrations for t in trainer.tasks)
    samples, stats = trainer._rollout_phase()
    demo = torch.tensor([bool(s.extras["demonstration"]) for s in samples])
    assert demo.tolist() == [False, False, False, True] * 2
    assert stats["groups_kept"] == 2 and stats["demo_pass_rate"] == 1.0 and stats["pass_rate"] == 0.0
    assert_one_update_raises_the_demonstrations(trainer, samples, 4)


def test_greedy_guided_groups_pit_the_greedy_reply_against_the_demonstration(workplace, tmp_path):
    """rollout.temperature 0 with guided groups of two: the sampled member is the greedy reply, the very episode a
    greedy evaluation would run, so the update lowers what greedy decoding chose and raises the demonstration. Its
    log-probs are recorded under temperature 1, the temperature the trainer's forward then uses, so generation and
    training agree."""
    import torch

    trainer = _guided_trainer(workplace, tmp_path, workplace / "demonstrations.jsonl", num_generations=2,
                              temperature=0.0)
    trainer._setup()
    samples, stats = trainer._rollout_phase()
    demo = torch.tensor([bool(s.extras["demonstration"]) for s in samples])
    assert demo.tolist() == [False, True] * 4 and stats["groups_kept"] == 4
    greedy = [s for s in samples if not s.extras["demonstration"]]
    first = greedy[0]  # its first reply is what plain greedy generation of the prompt gives
    n0 = first.loss_mask.index(0) if 0 in first.loss_mask else len(first.loss_mask)
    ids = torch.tensor([first.prompt_ids])
    out = trainer.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n0, do_sample=False,
                                 pad_token_id=trainer.tok.pad_token_id)
    assert out[0, ids.shape[1]:].tolist()[:n0] == first.completion_ids[:n0]
    assert_one_update_raises_the_demonstrations(trainer, samples, 2)


def test_sft_coef_adds_the_demonstrations_nll_to_the_update(workplace, tmp_path):
    """guidance.sft_coef: the step's verified demonstrations (one per drawn task) join the update through their
    token-mean NLL. With the policy term contributing nothing (zero advantages), the update is exactly an SFT step
    on them: every demonstration becomes more likely, the logged NLL is the one before the step, and without the
    term the same zero-advantage update leaves the model as it was."""
    import copy

    import torch

    from training.losses import group_advantages
    from training.samples import pack

    trainer = _guided_trainer(workplace, tmp_path, workplace / "demonstrations.jsonl", sft_coef=1.0)
    trainer._setup()
    samples, _ = trainer._rollout_phase()
    demos = [s for s in samples if s.extras["demonstration"]]
    assert len(demos) == 2 and trainer.sft_demos == demos
    batch = pack(demos, trainer.tok.pad_token_id)
    with torch.no_grad():
        lp, _ = trainer._forward_logprobs(trainer.model, batch)
    nll = float(-(lp * batch.loss_mask).sum() / batch.loss_mask.sum())
    before = mean_trained_logprob(trainer, batch)
    policy = pack(samples, trainer.tok.pad_token_id)
    weights = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.cfg.guidance.sft_coef = 0.0
    trainer._update(policy, torch.zeros(len(samples)), sft=trainer._sft_batch())
    assert all(torch.equal(a, b) for a, b in zip(weights, trainer.model.parameters()))
    trainer.cfg.guidance.sft_coef = 1.0
    out = trainer._update(policy, torch.zeros(len(samples)), sft=trainer._sft_batch())
    assert out["sft_nll"] == pytest.approx(nll, rel=1e-3) and out["sft_demos"] == 2
    assert bool((mean_trained_logprob(trainer, batch) - before > 0).all())
    # loss.policy_coef 0 (the supervised-only ablation): the groups' real advantages move nothing beyond that term
    adv, _ = group_advantages(torch.tensor([s.score for s in samples]), 4)
    start = (copy.deepcopy(trainer.model.state_dict()), copy.deepcopy(trainer.optimizer.state_dict()))
    trainer._update(policy, torch.zeros(len(samples)), sft=trainer._sft_batch())
    sft_only = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.model.load_state_dict(start[0])
    trainer.optimizer.load_state_dict(start[1])
    trainer.loss_cfg["policy_coef"] = 0.0
    trainer._update(policy, adv, sft=trainer._sft_batch())
    assert all(torch.allclose(a, b, atol=1e-7) for a, b in zip(sft_only, trainer.model.parameters()))


def test_guidance_files_that_cannot_guide_are_refused_with_the_row(workplace, tmp_path):
    from training.grpo import TrainingError

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"task_id": "t1", "messages": [{"role": "assistant", "content": "x"}]}) + "\n"
                   + json.dumps({"messages": [{"role": "assistant", "content": "x"}]}) + "\n")
    with pytest.raises(TrainingError, match=r"bad.jsonl: row 1: expected `task_id`"):
        _guided_trainer(workplace, tmp_path, bad)._setup()
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"task_id": "nope", "messages": [{"role": "assistant", "content": "x"}]}) + "\n")
    with pytest.raises(TrainingError, match="none of its task ids is a training task"):
        _guided_trainer(workplace, tmp_path, other)._setup()
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps({"task_id": "t1", "messages": "[{not json"}) + "\n")
    with pytest.raises(TrainingError, match=r"broken.jsonl: row 0 \(task t1\): `messages` is not JSON"):
        _guided_trainer(workplace, tmp_path, broken)._setup()
    with pytest.raises(TrainingError, match="no such dataset file"):
        _guided_trainer(workplace, tmp_path, tmp_path / "missing.jsonl")._setup()
