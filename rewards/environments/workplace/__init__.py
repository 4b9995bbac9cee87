"""The workplace environment (a WorkBench-class tool-calling world): SQLite state, 27 tools, verifier, NeMo Gym I/O.

Entry points: `WorkplaceWorld` (state), `WorkplaceEnv` (reset/step/state/verify), `verify_trajectory` (the verdict
as a `RewardResult` with reason and shaping components), `shaped_signals`, and `nemo_gym` (import/export/parity).
"""

from rewards.environments.workplace.env import WorkplaceEnv, initial_messages
from rewards.environments.workplace.tools import ToolResult, execute
from rewards.environments.workplace.verifier import (
    REASON_CODES, reason_code, shaped_signals, verify_calls, verify_trajectory,
)
from rewards.environments.workplace.world import TABLES, WorkplaceWorld, WorldError

__all__ = [
    "REASON_CODES", "TABLES", "ToolResult", "WorkplaceEnv", "WorkplaceWorld", "WorldError", "execute",
    "initial_messages", "reason_code", "shaped_signals", "verify_calls", "verify_trajectory",
]
