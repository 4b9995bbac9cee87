"""A rollout record: the conversation with its tool calls and results, tokens and masks, and its verdict."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from schemas.messages import Message
from schemas.rewards import RewardResult


class Trajectory(BaseModel):
    """Everything about one episode. Token fields are filled by training rollouts and empty for imported traces.

    `loss_mask[i]` is 1 for tokens the policy generated and 0 for prompt and tool-output tokens, which are never
    trained on.
    """

    model_config = ConfigDict(extra="forbid")
    task_id: str
    messages: list[Message]
    final_answer: str | None = None
    turns: int = 0
    stopped: str = "answer"  # answer | step_limit | format_error | length
    token_ids: list[int] = Field(default_factory=list)
    logprobs: list[float] = Field(default_factory=list)
    loss_mask: list[int] = Field(default_factory=list)
    reward: RewardResult | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
