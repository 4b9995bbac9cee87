"""Math rewards: a strict binary verifier and a shaped reward built on it.

Try them:

    rlvr reward test examples/rewards/math_rewards.py:math_binary --dataset examples/rewards/math_tasks.jsonl \
        --completions examples/rewards/math_completions.jsonl --json /tmp/math_scores.json
    rlvr reward test examples/rewards/math_rewards.py:math_shaped --dataset examples/rewards/math_tasks.jsonl \
        --completions examples/rewards/math_completions.jsonl

`math_binary`: the last <answer>...</answer> must hold a number exactly equal to the row's `answer` ("1,000",
"1000.0" and "1e3" are the same number; "about 1000" is not a number). No tag, no credit: the model must learn the
format, and a hedge like "3 or 4" is not a number.

`math_shaped`: the same verdict, plus a little credit for a well-formed answer on *failing* samples (so a model
that is never right still gets a gradient towards the format) and DAPO's soft overlong penalty on every sample.
Weights are scaled automatically so that every passing sample scores strictly above every failing one; the
effective weights are in `math_shaped.weights` and in `rlvr reward test`'s version.

`my_math_reward` shows the plain-function form of the protocol: any `fn(completion, **row_fields)` returning a
float, a bool, a dict or a RewardResult is a reward.
"""

from __future__ import annotations

from rewards.extraction import Extraction
from rewards.shaping import ShapedReward, component_signal, overlong_signal
from rewards.verifiers import NumericMatch
from schemas.rewards import RewardResult

math_binary = NumericMatch(extraction=Extraction(method="tag", tag="answer", occurrence="last"))

math_shaped = ShapedReward(
    math_binary,
    [
        component_signal("format_ok", weight=0.1, applies_to="fail"),
        overlong_signal(max_length=256, cache_length=64, unit="tokens", weight=0.5),
    ],
    name="math_shaped",
)


def my_math_reward(completion: str, answer: str) -> RewardResult:
    """A hand-written binary reward: the protocol needs nothing more than this."""
    verdict = math_binary(completion, answer=answer)
    return RewardResult(score=verdict.score, passed=verdict.passed, components=verdict.components,
                        reason=verdict.reason)
