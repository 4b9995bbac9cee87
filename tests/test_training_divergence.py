"""loss.divergence_tokens: GRPO trained only where a failed episode parts from a passed one of its group."""

from __future__ import annotations

import pytest

from tests.policy_probe import mean_trained_logprob
from tests.test_training_tiny import _tiny_yaml


def test_first_divergence_finds_the_first_differing_token_or_the_shorter_end():
    from training.divergence import first_divergence

    assert first_divergence([5, 6, 7, 8], [5, 6, 9, 8]) == 2
    assert first_divergence([5, 6], [5, 6, 7]) == 2
    assert first_divergence([4], [5]) == 0
    assert first_divergence([5, 6], [5, 6]) is None


def test_divergence_masks_mark_both_sides_of_each_failed_passed_pair_and_nothing_in_tool_output():
    from training.divergence import divergence_masks

    # group 0: a failed episode that opens with another tool (token 0) and a passed demonstration;
    # group 1: the same call, a different tool answer (positions 2-3 are tool output), then different turns;
    # group 2: both passed, nothing to contrast
    completions = [[1, 2, 3, 4], [9, 2, 3, 4],
                   [1, 2, 30, 4, 7], [1, 2, 31, 4, 8],
                   [1, 2], [1, 3]]
    masks = [[1, 1, 1, 1], [1, 1, 1, 1],
             [1, 1, 0, 0, 1], [1, 1, 0, 0, 1],
             [1, 1], [1, 1]]
    passed = [False, True, False, True, True, True]
    out = divergence_masks(completions, masks, passed, 2)
    assert out[0] == [1, 0, 0, 0] and out[1] == [1, 0, 0, 0]
    assert out[2] == [0] * 5 and out[3] == [0] * 5  # they part inside the tool's answer: no choice to credit
    assert out[4] == [0, 0] and out[5] == [0, 0]


def test_divergence_masks_pair_every_failed_episode_with_every_passed_one():
    from training.divergence import divergence_masks

    completions = [[1, 2, 3], [1, 5, 3], [1, 2, 6], [7, 2, 3]]
    passed = [True, False, False, True]
    out = divergence_masks(completions, [[1] * 3] * 4, passed, 4)
    # row 1 parts from row 0 at 1 and from row 3 at 0; row 2 from row 0 at 2 and from row 3 at 0
    assert out == [[0, 1, 1], [1, 1, 0], [1, 0, 1], [1, 0, 0]]


def test_divergence_masks_refuse_rows_that_do_not_form_whole_groups():
    from training.divergence import divergence_masks

    with pytest.raises(ValueError, match="3 rows do not split into groups of 2"):
        divergence_masks([[1], [2], [3]], [[1], [1], [1]], [True, False, True], 2)


def test_a_reply_prefix_is_inside_arguments_only_after_the_whole_name_of_an_open_call():
    from training.divergence import inside_call_arguments, reply_start

    call = '<tool_call>{"name": "email_search_emails", "arguments": {"query": "'
    assert inside_call_arguments(call) and inside_call_arguments('<tool_call>\n{"name":"x","arguments":')
    assert inside_call_arguments('<tool_call>{"name": "a", "arguments": {}}</tool_call>\n' + call)  # second call
    assert not inside_call_arguments('<tool_call>{"name": "email_se')  # the tool name itself
    assert not inside_call_arguments('<tool_call>{"name": "email_search_emails", ')
    assert not inside_call_arguments('<tool_call>{"name": "a", "arguments": {}}</tool_call>\n')  # between calls
    assert not inside_call_arguments('<tool_call>{"arguments": {"query": ')  # no name written before them
    assert not inside_call_arguments("The meeting is at noon")  # an answer
    assert reply_start([0, 0, 1, 1, 0, 1, 1, 1], 7) == 5 and reply_start([1, 1, 1], 2) == 0


def test_divergence_masks_keep_only_the_pairs_their_filter_accepts():
    from training.divergence import divergence_masks

    completions = [[1, 2, 3], [1, 2, 4], [7, 8], [9, 8]]
    masks = [[1] * 3, [1] * 3, [1] * 2, [1] * 2]
    seen = []

    def keep(completion, loss_mask, i):
        seen.append((tuple(completion), i))
        return i > 0  # a pair parting at the very first token is dropped

    out = divergence_masks(completions, masks, [False, True, False, True], 2, keep=keep)
    assert out == [[0, 0, 1], [0, 0, 1], [0, 0], [0, 0]]
    assert seen == [((1, 2, 3), 2), ((7, 8), 0)]  # called with the failed row of each pair


def test_divergence_within_arguments_needs_divergence_tokens(tmp_path):
    from training.config_io import ConfigError, load_train_config

    with pytest.raises(ConfigError, match="set loss.divergence_tokens: true or unset loss.divergence_within"):
        load_train_config(_tiny_yaml(tmp_path, loss__divergence_within="arguments"))
    cfg = load_train_config(_tiny_yaml(tmp_path, loss__divergence_tokens=True, loss__divergence_within="arguments"))
    assert cfg.loss.divergence_within == "arguments"


def test_divergence_tokens_with_another_token_choice_is_refused(tmp_path):
    from training.config_io import ConfigError, load_train_config

    with pytest.raises(ConfigError, match="set one of them"):
        load_train_config(_tiny_yaml(tmp_path, loss__divergence_tokens=True, loss__top_entropy_fraction=0.2))
    with pytest.raises(ConfigError, match="zero-variance group"):
        load_train_config(_tiny_yaml(tmp_path, loss__divergence_tokens=True, loss__zero_variance_alpha=0.5))


def test_one_update_on_divergence_tokens_moves_each_decision_and_trains_nothing_else(tmp_path):
    """Through the trainer's own sampling, token selection, packing and update: in each group of 4 one completion
    passes. After one step, at every marked token the passed completion's choice is more likely and each failed
    completion's less likely; the loss saw only those tokens (token-mean over them), so a batch whose groups all
    failed trains nothing at all."""
    import torch

    from training.config_io import load_train_config
    from training.grpo import GRPOTrainer
    from training.losses import group_advantages
    from training.rollout import SamplingParams
    from training.samples import pack

    cfg = load_train_config(_tiny_yaml(tmp_path, loss__type="dapo", overlong__mode="none", optim__lr=0.5,
                                       optim__optimizer="sgd", loss__divergence_tokens=True))
    trainer = GRPOTrainer(cfg)
    trainer._setup()
    samples = trainer.collect(trainer._draw(2), 4, SamplingParams(max_new_tokens=16, temperature=1.0, seed=1))
    for i, s in enumerate(samples):
        s.passed, s.score = i % 4 == 0, float(i % 4 == 0)
    trained, _ = trainer._trained_tokens(samples)
    marked = [sum(s.loss_mask) for s in trained]
    assert all(m >= 1 for m in marked) and sum(marked) < sum(len(s.completion_ids) for s in samples) / 4
    batch = pack(trained, trainer.tok.pad_token_id)
    scores = torch.tensor([s.score for s in samples])
    before = mean_trained_logprob(trainer, batch)
    adv, _ = group_advantages(scores, 4, scale="group", leave_one_out=False)
    trainer._update(batch, adv)
    delta = mean_trained_logprob(trainer, batch) - before
    assert bool((delta[scores == 1] > 0).all()) and bool((delta[scores == 0] < 0).all()), delta.tolist()

    for s in samples:
        s.passed, s.score = False, 0.0
    none, _ = trainer._trained_tokens(samples)
    assert all(sum(s.loss_mask) == 0 for s in none)
    weights = {k: v.detach().clone() for k, v in trainer.model.named_parameters() if v.requires_grad}
    trainer._update(pack(none, trainer.tok.pad_token_id), torch.zeros(len(none)))
    assert all(torch.equal(weights[k], v) for k, v in trainer.model.named_parameters() if v.requires_grad)
