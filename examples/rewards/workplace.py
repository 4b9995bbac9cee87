"""Workplace rewards: the environment's binary final-state verdict, and a shaped reward built on it.

Both are trajectory-aware: they receive the whole episode (`Trajectory`) and judge the calls the model wrote by
replaying them on the task's world (`metadata.world_seed`; the studio's generated company by default) and comparing
the resulting rows with what the ground-truth calls produce (see `rewards/environments/workplace/verifier.py`).

`workplace_binary`: 1 when the final state is exactly right with no failed write, no write outside what the task
asks for, no format error, and (for a task that needs no change) a final answer; else 0 with a reason code
(`wrong_arguments`, `missing_action`, `extra_write`, `failed_call`, ...).

`workplace_shaped`: the same verdict plus intermediate signals, so that near-misses are ordered among themselves:
- `required_changes` (fraction of the rows the task must change that are right): partial credit, failures only;
- `write_tools_tried` (share of the task's write tools called, failed calls included): credit for trying the
  action, failures only;
- `wrong_changes` (rows changed that should not have been, incl. create-then-delete): a penalty, clipped at 3;
  (a passing trajectory has none, so the penalties apply to failures)
- `call_efficiency` (needed / used calls): a small bonus among passing samples.
Weights are auto-scaled so that every passing trajectory scores strictly above every failing one.

No failure signal pays for stopping early: an earlier version credited `valid_call_rate` (1.0 for an episode that
only reads) and penalised failed writes, so giving up after the reads outscored trying the write and failing,
which the audit's `tools/give_up_over_attempt` probe now reports and GRPO had learned (more `missing_action`).

Try: rlvr reward test examples/rewards/workplace.py:workplace_shaped --dataset TASKS --completions TRAJECTORIES
(each completions line: {"id", "trajectory": {...}}).
"""

from __future__ import annotations

from rewards.shaping import ShapedReward, component_signal
from rewards.verifiers import WorkplaceState

workplace_binary = WorkplaceState()

workplace_shaped = ShapedReward(
    workplace_binary,
    [
        component_signal("required_changes", 0.5, applies_to="fail"),
        component_signal("write_tools_tried", 0.25, applies_to="fail"),
        component_signal("wrong_changes", -0.15, low=0.0, high=3.0, clip=True, applies_to="fail"),
        component_signal("call_efficiency", 0.2, applies_to="pass"),
    ],
    name="workplace_shaped",
)
