"""Single-turn tool-calling rewards in the style of BFCL: the reply's `<tool_call>` blocks against ground truth.

    rlvr reward test examples/rewards/tool_calls.py:calls_shaped --dataset examples/rewards/tool_tasks.jsonl \
        --completions examples/rewards/tool_completions.jsonl

`calls_binary`: every ground-truth call made exactly once with the right arguments (order-free for parallel
calls, strings compared case- and space-insensitively), no extra call, every call valid against the tool schema.

`calls_shaped`: the same verdict plus partial credit on failures: the share of ground-truth calls matched
(`calls_matched`), the share of function names right (`name_recall`), the share of arguments right
(`args_partial`), and a penalty per extra call. Weights are auto-scaled so any passing reply outscores any
failing one.
"""

from __future__ import annotations

from rewards.shaping import ShapedReward, component_signal
from rewards.verifiers import ToolCallMatch

calls_binary = ToolCallMatch()

calls_shaped = ShapedReward(
    calls_binary,
    [
        component_signal("calls_matched", 0.3, applies_to="fail"),
        component_signal("name_recall", 0.1, applies_to="fail"),
        component_signal("args_partial", 0.2, applies_to="fail"),
        component_signal("extra_calls", -0.1, low=0.0, high=4.0, clip=True, applies_to="fail"),
    ],
    name="calls_shaped",
)
