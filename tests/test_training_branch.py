"""guidance.branch first_mistake: the guided member keeps a failed episode's turns while its calls are ones the
demonstration makes (in any order), then finishes with the demonstration -- so the group's two members part at the
policy's first wrong call, not at an equally valid order of the same calls."""

from __future__ import annotations

import pytest

from training.branch import Branch, branch_point, call_signature, grounded
from training.divergence import first_divergence
from training.rollout import SamplingParams
from test_training_multiturn import FINAL, ScriptedLM, workplace  # noqa: F401 - the module's fixture

SEARCH = call_signature("email_search_emails", {"query": "lori"})
LOOKUP = call_signature("company_directory_find_email_address", {"name": "bob"})
SEND = call_signature("email_forward_email", {"email_id": "00000001", "recipient": "bob@x.io"})
DEMO = [[LOOKUP], [SEARCH], [SEND], []]  # the last reply is the answer: no calls


def test_a_valid_reordering_is_kept_and_the_branch_is_the_wrong_call():
    """The episode searches first where the demonstration looks the recipient up first: both are calls the
    demonstration makes, so the episode is kept until its forward to a wrong address; the demonstration resumes
    with the lookup it has not made, the forward and the answer."""
    wrong = call_signature("email_forward_email", {"email_id": "00000001", "recipient": "bob"})
    assert branch_point([[SEARCH], [wrong], []], DEMO) == Branch(1, (0, 2, 3))
    assert branch_point([[SEARCH], [LOOKUP], []], DEMO) == Branch(2, (2, 3))  # gave up before the write


def test_an_answer_a_malformed_reply_or_an_unknown_call_is_the_branch():
    assert branch_point([[]], DEMO) == Branch(0, (0, 1, 2, 3))
    other = call_signature("email_search_emails", {"query": "bob"})  # same tool, other arguments
    assert branch_point([[LOOKUP], [other], [SEND]], DEMO) == Branch(1, (1, 2, 3))
    assert branch_point([[LOOKUP], [LOOKUP]], DEMO) == Branch(1, (1, 2, 3))  # a repeat the demonstration lacks


def test_keys_order_does_not_matter_and_a_half_made_turn_restarts_the_demonstration():
    assert call_signature("t", {"a": 1, "b": 2}) == call_signature("t", {"b": 2, "a": 1})
    both = [[LOOKUP, SEARCH], [SEND], []]  # one reply with two calls
    assert branch_point([[SEARCH], []], both) == Branch(0, (0, 1, 2))  # resuming would repeat the search
    assert branch_point([[SEARCH, LOOKUP], []], both) == Branch(1, (1, 2))


def _multi_call_task(workplace):
    """A train task whose demonstration makes at least two calls before its answer, with its replies."""
    from generators.task_io import read_tasks
    from rewards.environments.toolcalls import parse_reply
    from training.guidance import demonstration_replies

    demos = demonstration_replies(workplace / "demonstrations.jsonl")
    for t in read_tasks(workplace / "train.parquet"):
        replies = demos.get(t.id, [])
        if sum(bool(parse_reply(r).calls) for r in replies) >= 2:
            return t, demos
    pytest.skip("no demonstration with two calls in the fixture")


def test_the_corrective_member_shares_the_failed_episodes_turns_and_passes(workplace):
    """Through the real environment and verifier: the policy makes the demonstration's first call, then a wrong one,
    then answers. The guided member is the policy's own first turn (its tokens and log-probs), then the rest of
    the demonstration, and passes; the two members first differ inside the second reply."""
    from training.config_io import parse_train_config
    from training.model import load_tokenizer
    from training.multiturn import EnvironmentCollector

    tok = load_tokenizer("default")
    tok.padding_side = "left"
    task, demos = _multi_call_task(workplace)
    wrong = '<tool_call>{"name": "email_search_emails", "arguments": {"query": "zzz-nothing"}}</tool_call>'
    cfg = parse_train_config({
        "data": {"path": str(workplace)}, "reward": {"function": "env:binary", "allow_unaudited": True},
        "rollout": {"environment": "workplace", "max_turns": 6, "max_new_tokens": 96, "max_total_tokens": 4096,
                    "num_generations": 2, "temperature": 0.0},
        "guidance": {"demonstrations": str(workplace / "demonstrations.jsonl"), "branch": "first_mistake"},
    })
    policy = ScriptedLM(tok, [demos[task.id][0], wrong, FINAL])
    failed, guided = EnvironmentCollector(cfg, policy, tok, None, demonstrations=demos)(
        [task], 2, SamplingParams(max_new_tokens=96, temperature=0.0))
    assert failed.result.passed is False and guided.result.passed is True, guided.result.reason
    assert guided.extras["demonstration"] and guided.extras["kept_turns"] == 1
    first_end = failed.completion_ids.index(tok.convert_tokens_to_ids("<|im_end|>")) + 1
    assert guided.completion_ids[:first_end] == failed.completion_ids[:first_end]
    assert guided.logprobs[:first_end] == failed.logprobs[:first_end]  # the policy's own sampling log-probs
    cut = first_divergence(failed.completion_ids, guided.completion_ids)
    assert cut is not None and cut > first_end and failed.loss_mask[cut] == guided.loss_mask[cut] == 1
    trained = tok.decode([t for t, m in zip(guided.completion_ids, guided.loss_mask) if m])
    assert trained.endswith("".join(r + "<|im_end|>" for r in demos[task.id][1:]))


@pytest.mark.parametrize("mistake", ["arguments", "tool"])
def test_only_a_pair_parting_inside_the_same_tools_arguments_is_trained_within_arguments(workplace, mistake):
    """loss.divergence_within: arguments, through the real environment, verifier and tokenizer: the policy makes the
    demonstration's first call, then its second call's tool with another argument value (the pair parts inside the
    arguments: trained, and the marked token is the value's) -- or another tool (the pair parts at the tool name:
    dropped, nothing trained)."""
    import json

    from rewards.environments.toolcalls import parse_reply
    from training.config_io import parse_train_config
    from training.divergence import ArgumentsOnly, divergence_masks
    from training.model import load_tokenizer
    from training.multiturn import EnvironmentCollector

    tok = load_tokenizer("default")
    tok.padding_side = "left"
    task, demos = _multi_call_task(workplace)
    first, second = demos[task.id][0], demos[task.id][1]
    call = parse_reply(second).calls[0]
    if mistake == "arguments":
        key, value = next((k, v) for k, v in call.arguments.items() if isinstance(v, str))
        wrong = second.replace(json.dumps(value), json.dumps("zzz-nothing"), 1)
        assert wrong != second, (key, second)
    else:
        other = "email_search_emails" if call.name != "email_search_emails" else "calendar_search_events"
        wrong = f'<tool_call>{{"name": "{other}", "arguments": {{"query": "zzz-nothing"}}}}</tool_call>'
    cfg = parse_train_config({
        "data": {"path": str(workplace)}, "reward": {"function": "env:binary", "allow_unaudited": True},
        "rollout": {"environment": "workplace", "max_turns": 6, "max_new_tokens": 96, "max_total_tokens": 4096,
                    "num_generations": 2, "temperature": 0.0},
        "guidance": {"demonstrations": str(workplace / "demonstrations.jsonl"), "branch": "first_mistake"},
    })
    policy = ScriptedLM(tok, [first, wrong, FINAL])
    failed, guided = EnvironmentCollector(cfg, policy, tok, None, demonstrations=demos)(
        [task], 2, SamplingParams(max_new_tokens=96, temperature=0.0))
    assert failed.result.passed is False and guided.result.passed is True, guided.result.reason
    keep = ArgumentsOnly(tok.decode)
    rows = [failed, guided]
    masks = divergence_masks([r.completion_ids for r in rows], [r.loss_mask for r in rows], [False, True], 2,
                             keep=keep)
    assert (keep.pairs, keep.kept) == (1, int(mistake == "arguments"))
    if mistake == "tool":
        assert masks == [[0] * len(failed.completion_ids), [0] * len(guided.completion_ids)]
        return
    cut = first_divergence(failed.completion_ids, guided.completion_ids)
    assert [i for i, m in enumerate(masks[0]) if m] == [i for i, m in enumerate(masks[1]) if m] == [cut]
    assert "zzz" in tok.decode(failed.completion_ids[cut:cut + 3])
    assert tok.decode(guided.completion_ids[cut:cut + 3]) in json.dumps(value)


def test_first_mistake_without_an_environment_is_refused():
    from training.config_io import ConfigError, parse_train_config

    with pytest.raises(ConfigError, match="guidance.branch first_mistake"):
        parse_train_config({"data": {"path": "x.jsonl"}, "reward": {"function": "exact", "allow_unaudited": True},
                            "guidance": {"demonstrations": "d.jsonl", "branch": "first_mistake"}})


def test_the_right_tool_with_wrong_arguments_resumes_with_that_tools_turn_when_it_can_move():
    """The policy searches first, with other arguments: the demonstration's search (grounded in the prompt) goes
    first, so the members part inside the arguments, not at the tool name the demonstration happens to call first.
    A write carrying an address the lookup returned cannot move ahead of the lookup: forwarding to a guessed
    address is the mistake there."""
    prompt = "Forward Lori's last email to Bob."
    movable = [all(grounded(sig, prompt) for sig in turn) and bool(turn) for turn in DEMO]
    assert movable == [True, True, False, False]
    other = call_signature("email_search_emails", {"query": "bob"})
    assert branch_point([[other], []], DEMO, movable) == Branch(0, (1, 0, 2, 3))
    assert branch_point([[other], []], DEMO) == Branch(0, (0, 1, 2, 3))  # without `movable`: its order
    wrong = call_signature("email_forward_email", {"email_id": "00000001", "recipient": "bob"})
    assert branch_point([[SEARCH], [wrong], []], DEMO, movable) == Branch(1, (0, 2, 3))


def test_the_first_mistake_is_placed_and_told_apart_by_what_the_reply_got_wrong():
    """After a right lookup, a search with other words is the right tool with other arguments; a write with a
    guessed address is a tool the remaining ground truth does use (the order is the mistake, still no new tool);
    a directory lookup the task never needs is a wrong tool; an answer before the work is done is an answer."""
    from training.branch import first_mistake

    truth = [LOOKUP, SEARCH, SEND]
    other = call_signature("email_search_emails", {"query": "bob"})
    m = first_mistake([[LOOKUP], [other], []], truth)
    assert (m.turn, m.kind, m.tools) == (1, "arguments", ("email_search_emails",))
    assert m.left == ("email_forward_email", "email_search_emails")
    stray = call_signature("calendar_search_events", {"query": "bob"})
    assert first_mistake([[stray]], truth).kind == "tool" and first_mistake([[stray]], truth).turn == 0
    assert first_mistake([[LOOKUP], [SEARCH], []], truth) == first_mistake([[SEARCH], [LOOKUP], []], truth)
    assert first_mistake([[LOOKUP], [SEARCH], []], truth).kind == "answer"
    assert first_mistake([[LOOKUP], [LOOKUP]], truth).kind == "tool"  # a repeat no remaining call needs
    guessed = call_signature("email_forward_email", {"email_id": "00000001", "recipient": "bob"})
    assert first_mistake([[LOOKUP], [guessed]], truth).kind == "arguments"  # before the search: order and arguments
