"""The task row: what a dataset holds, what a reward and an environment receive, what training consumes."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.messages import Message, ToolCall

Split = Literal["train", "validation", "test", "regression"]


class FunctionSpec(BaseModel):
    """An OpenAI function schema: name, description, JSON Schema of the parameters."""

    model_config = ConfigDict(extra="forbid")
    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class ToolSpec(BaseModel):
    """`{"type": "function", "function": {...}}` as sent to chat templates and OpenAI-compatible servers."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["function"] = "function"
    function: FunctionSpec


class TaskRow(BaseModel):
    """One task. Reference fields (`answer`, `ground_truth_calls`) are what verifiers compare against.

    Stored as Parquet with nested fields JSON-encoded (see `generators`' writer); `metadata` holds the category,
    difficulty, template id and anything a report groups by.
    """

    model_config = ConfigDict(extra="forbid")
    id: str
    split: Split = "train"
    prompt: list[Message]
    tools: list[ToolSpec] | None = None
    answer: str | None = None
    ground_truth_calls: list[ToolCall] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
