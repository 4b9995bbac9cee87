"""data.focus: GRPO draws its prompts from the kinds of task the starting policy fails, chosen by a real greedy probe
on the eval split, kept in focus.json so that a resumed run trains on the same tasks, and refused clearly when the
choice cannot be made or no longer matches."""

from __future__ import annotations

from pathlib import Path

import pytest

from schemas.task import TaskRow
from schemas.train_config import FocusSection
from test_training_multiturn import FINAL, ScriptedLM, workplace  # noqa: F401 - the module's fixture
from test_training_tiny import _tiny_yaml
from training.branch import FirstMistake
from training.focus import choose_focus, focused_tasks, probe_groups, probe_sample, read_focus


def _task(i: int, template: str, split: str = "train") -> TaskRow:
    return TaskRow(id=f"t{i}", split=split, prompt=[{"role": "user", "content": f"task {i}"}],
                   metadata={"template": template})


def test_the_groups_at_or_below_the_bar_and_the_unprobed_ones_are_trained_in_their_order():
    probe = [_task(100 + i, tpl, "validation") for i, tpl in enumerate(["a", "a", "a", "a", "b", "b", "c", "c"])]
    passed = ["t100", "t104", "t105", "t106"]  # a: 1 of 4 (0.25), b: 2 of 2, c: 1 of 2
    groups = probe_groups(probe, passed, "template")
    assert {g: (p.tasks, p.passed) for g, p in groups.items()} == {"a": (4, 1), "b": (2, 2), "c": (2, 1)}
    train = [_task(i, tpl) for i, tpl in enumerate(["b", "a", "d", "c", "a", "b"])]
    choice = choose_focus(train, groups, FocusSection(max_pass_rate=0.25), "sft")
    assert choice.trained_groups == ["a"] and choice.unprobed_groups == ["d"]
    assert [t.id for t in focused_tasks(train, choice)] == ["t1", "t2", "t4"]
    assert (choice.training_tasks, choice.training_tasks_before, choice.probe_tasks, choice.probe_passed) == (3, 6, 8, 4)
    looser = choose_focus(train, groups, FocusSection(max_pass_rate=0.5), "sft")
    assert looser.trained_groups == ["a", "c"] and looser.training_tasks == 4


def test_the_probe_takes_the_first_tasks_of_every_group_however_the_split_is_ordered():
    tasks = [_task(i, tpl, "validation") for i, tpl in enumerate(["a", "a", "a", "b", "a", "c", "b", "b"])]
    assert [t.id for t in probe_sample(tasks, "template", 2)] == ["t0", "t1", "t3", "t5", "t6"]
    assert probe_sample(tasks, "template", None) == tasks


def test_a_policy_above_the_bar_everywhere_is_refused_with_what_to_change():
    probe = [_task(1, "a", "validation"), _task(2, "b", "validation")]
    with pytest.raises(ValueError, match="raise data.focus.max_pass_rate, or unset data.focus"):
        choose_focus([_task(3, "a"), _task(4, "b")], probe_groups(probe, ["t1", "t2"], "template"),
                     FocusSection(max_pass_rate=0.5), "sft")


def _reward_file(tmp_path: Path) -> Path:
    """A real reward that passes every addition and fails every subtraction, whatever the model writes: the probe
    then finds '+' solved and '-' failed, which a random-initialised model could not show with a real verifier."""
    path = tmp_path / "by_op.py"
    path.write_text("def by_op(completion, op=None, **_):\n    return 1.0 if op == '+' else 0.0\n")
    return path


def _cfg(tmp_path: Path, **changes):
    from training.config_io import load_train_config

    settings = {"steps": 4, "batch_size": 8, "rollout__max_new_tokens": 8, "overlong__buffer_tokens": 2,
                "checkpoint__every": 2, "reward__function": f"{_reward_file(tmp_path)}:by_op",
                "data__focus": {"by": "op", "max_pass_rate": 0.5, "probe_per_group": 10}}
    return load_train_config(_tiny_yaml(tmp_path, **{**settings, **changes}))


def test_the_run_trains_only_on_the_failed_kind_and_a_resume_reuses_the_choice(tmp_path, probe_counts):
    from training.grpo import GRPOTrainer, TrainingError

    probes = probe_counts
    cfg = _cfg(tmp_path)
    first = GRPOTrainer(cfg, stop_after=2)
    first.train()  # "killed" after step 2's checkpoint
    assert probes == [20]
    choice = read_focus(Path(cfg.output_dir))
    assert {g: p.tasks for g, p in choice.groups.items()} == {"+": 10, "-": 10}  # 10 eval tasks of each op
    assert choice.groups["+"].pass_rate == 1.0 and choice.groups["-"].pass_rate == 0.0
    assert choice.trained_groups == ["-"] and choice.probe_s is not None
    assert choice.probe_data == f"{cfg.data.path}:test"
    assert {t.metadata["op"] for t in first.tasks} == {"-"} and len(first.tasks) == choice.training_tasks == 201
    drawn = first._draw(40)
    assert {t.metadata["op"] for t in drawn} == {"-"}

    resumed = GRPOTrainer(cfg)
    resumed.train()
    assert resumed.resumed_from.name == "step-2" and resumed.step == 4
    assert probes == [20]  # the choice was read back, not probed again from the checkpoint
    assert [t.id for t in resumed.tasks] == [t.id for t in first.tasks]

    changed = _cfg(tmp_path, data__focus={"by": "op", "max_pass_rate": 0.0, "probe_per_group": 10})
    with pytest.raises(TrainingError, match="chosen with other settings"):
        GRPOTrainer(changed).train()


def test_the_cli_says_what_the_run_trained_on(tmp_path):
    from typer.testing import CliRunner

    from studio.cli import app

    cfg = _tiny_yaml(tmp_path, steps=1, batch_size=8, rollout__max_new_tokens=8, overlong__buffer_tokens=2,
                     reward__function=f"{_reward_file(tmp_path)}:by_op",
                     data__focus={"by": "op", "max_pass_rate": 0.5, "probe_per_group": 5})
    out = CliRunner().invoke(app, ["train", str(cfg), "--no-register"])
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "data.focus: 201 of 400 training tasks, the op groups the starting policy passed at most 0.5 of (- 0/" in text
    assert (tmp_path / "run" / "focus.json").is_file()


def test_mistake_from_turn_trains_only_the_groups_whose_failures_start_after_a_right_reply():
    """Two groups fail every probe task; in "late" each failed episode made one right reply first, in "early" one
    did not. With mistake_from_turn 1 only "late" is trained; without it, both (the old behaviour)."""
    probe = [_task(100 + i, tpl, "validation") for i, tpl in enumerate(["early", "early", "late", "late", "ok"])]
    groups = probe_groups(probe, ["t104"], "template", {f"t{100 + i}": FirstMistake(turn, "tool", (), ())
                                                        for i, turn in enumerate([0, 2, 1, 3])})
    assert {g: p.mistake_turns for g, p in groups.items()} == {"early": [0, 2], "late": [1, 3], "ok": []}
    train = [_task(i, tpl) for i, tpl in enumerate(["early", "late", "ok", "late"])]
    choice = choose_focus(train, groups, FocusSection(max_pass_rate=0.25, mistake_from_turn=1), "sft")
    assert choice.trained_groups == ["late"] and choice.mistake_from_turn == 1
    assert [t.id for t in focused_tasks(train, choice)] == ["t1", "t3"]
    assert choose_focus(train, groups, FocusSection(max_pass_rate=0.25), "sft").trained_groups == ["early", "late"]
    with pytest.raises(ValueError, match="fails some probe task within its first 2 replies in every 'template' "
                       "group .* lower data.focus.mistake_from_turn"):
        choose_focus(train, groups, FocusSection(max_pass_rate=0.25, mistake_from_turn=2), "sft")


def test_mistake_kind_arguments_trains_only_the_groups_whose_failures_all_start_inside_a_calls_arguments():
    """"args" fails both probe tasks with the right tools and other arguments; "mixed" once that way and once with
    another tool; "tool" with another tool. With mistake_kind arguments only "args" is trained (and a group the
    probe never saw is kept, as always); the choice records the kind, so a run asking for "any" probes again."""
    kinds = {"t100": "arguments", "t101": "arguments", "t102": "arguments", "t103": "tool", "t104": "tool"}
    probe = [_task(100 + i, tpl, "validation") for i, tpl in enumerate(["args", "args", "mixed", "mixed", "tool"])]
    groups = probe_groups(probe, [], "template", {k: FirstMistake(0, v, (), ()) for k, v in kinds.items()})
    assert groups["mixed"].mistake_kinds == ["arguments", "tool"]
    train = [_task(i, tpl) for i, tpl in enumerate(["args", "mixed", "tool", "new"])]
    focus = FocusSection(max_pass_rate=0.25, mistake_kind="arguments")
    choice = choose_focus(train, groups, focus, "sft")
    assert choice.trained_groups == ["args"] and choice.unprobed_groups == ["new"]
    assert [t.id for t in focused_tasks(train, choice)] == ["t0", "t3"]
    assert choice.matches(focus, "sft") and not choice.matches(FocusSection(max_pass_rate=0.25), "sft")
    with pytest.raises(ValueError, match="other than in a call's arguments .* set data.focus.mistake_kind: any"):
        choose_focus(train[1:3], groups, focus, "sft")


def test_mistake_kind_without_an_environment_is_refused():
    from training.config_io import ConfigError, parse_train_config

    with pytest.raises(ConfigError, match="data.focus.mistake_kind arguments compares"):
        parse_train_config({"data": {"path": "x.jsonl", "focus": {"mistake_kind": "arguments"}},
                            "reward": {"function": "exact", "allow_unaudited": True}})


def test_the_probe_places_each_failed_episodes_first_mistake_against_the_tasks_ground_truth(workplace):
    """Through the real workplace environment and verifier (greedy_pass_at_1, a scripted policy): an episode whose
    first reply is the demonstration's first call and whose second is a wrong search failed after one right turn;
    an episode that answers at once failed at turn 0. A task without ground_truth_calls is refused by name."""
    from test_training_branch import _multi_call_task
    from training.config_io import parse_train_config
    from training.focus import probe_mistakes
    from training.model import load_tokenizer
    from training.train_eval import greedy_pass_at_1

    tok = load_tokenizer("default")
    task, demos = _multi_call_task(workplace)
    cfg = parse_train_config({
        "data": {"path": str(workplace)}, "reward": {"function": "env:binary", "allow_unaudited": True},
        "rollout": {"environment": "workplace", "max_turns": 6, "max_new_tokens": 96, "max_total_tokens": 4096}})
    wrong = '<tool_call>{"name": "email_search_emails", "arguments": {"query": "zzz-nothing"}}</tool_call>'
    late = greedy_pass_at_1(ScriptedLM(tok, [demos[task.id][0], wrong, FINAL]), tok, cfg, [task],
                            keep_episodes=True)
    early = greedy_pass_at_1(ScriptedLM(tok, [FINAL]), tok, cfg, [task], keep_episodes=True)
    assert late["passed"] == early["passed"] == 0
    assert {k: m.turn for k, m in probe_mistakes([task], late["episodes"]).items()} == {task.id: 1}
    early_mistakes = probe_mistakes([task], early["episodes"])
    assert {k: (m.turn, m.kind) for k, m in early_mistakes.items()} == {task.id: (0, "answer")}
    bare = task.model_copy(update={"ground_truth_calls": None})
    with pytest.raises(ValueError, match=f"probe task {task.id} has no ground_truth_calls"):
        probe_mistakes([bare], late["episodes"])


def test_mistake_from_turn_without_an_environment_is_refused():
    from training.config_io import ConfigError, parse_train_config

    with pytest.raises(ConfigError, match="data.focus.mistake_from_turn 1 compares"):
        parse_train_config({"data": {"path": "x.jsonl", "focus": {"mistake_from_turn": 1}},
                            "reward": {"function": "exact", "allow_unaudited": True}})
