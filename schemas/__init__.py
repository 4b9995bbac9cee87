"""Pydantic contracts between the stages. No I/O and no heavy imports here."""

from schemas.messages import Message, ToolCall
from schemas.rewards import RewardResult, RewardVersion
from schemas.task import FunctionSpec, TaskRow, ToolSpec
from schemas.trajectory import Trajectory

__all__ = [
    "FunctionSpec", "Message", "RewardResult", "RewardVersion", "TaskRow", "ToolCall", "ToolSpec", "Trajectory",
]
