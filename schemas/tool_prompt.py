"""The text format of tool use for models whose chat template has no tool support (SmolLM2): one place for it.

Why in schemas/: the parser (rewards/environments/toolcalls.py) reads this format, and the demonstrations written
for SFT (generators, rewards) must use exactly the same one; both may import schemas/. Pure string functions only.

A model calls tools by writing, anywhere in its reply, one block per call:

    <tool_call>{"name": "email_reply_email", "arguments": {"email_id": "00000057", "body": "Thanks"}}</tool_call>

Tool results come back as `tool` messages holding the JSON result (`{"error": ...}` on failure). A reply without any
`<tool_call>` block is the final answer and ends the episode.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from schemas.task import ToolSpec

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"

INSTRUCTIONS = (
    "You can use tools. To call a tool, write exactly:\n"
    f'{TOOL_CALL_OPEN}{{"name": "<tool name>", "arguments": {{<JSON arguments>}}}}{TOOL_CALL_CLOSE}\n'
    "You may write several calls in one reply. Each result comes back in a tool message. "
    "Look up ids with the search tools before changing anything. "
    "When the work is done, or when nothing matches the request, reply without any tool call, saying what you did "
    "(or that nothing needed to change)."
)


def _signature(spec: ToolSpec) -> str:
    params = spec.function.parameters or {}
    required = set(params.get("required", []))
    parts = []
    for name, prop in (params.get("properties") or {}).items():
        kind = prop.get("type", "string")
        if "enum" in prop:
            kind = "|".join(str(v) for v in prop["enum"])
        parts.append(f"{name}{'' if name in required else '?'}: {kind}")
    return f"{spec.function.name}({', '.join(parts)}) - {spec.function.description}"


def render_tool_list(tools: Iterable[ToolSpec], style: str = "compact") -> str:
    """The tools as text. `compact`: one signature line per tool (about 700 tokens for the 27 workplace tools, where
    the full JSON schemas take about 3,000, too many for a 135M model's CPU rollouts). `json`: the schemas."""
    tools = list(tools)
    if style == "json":
        return "\n".join(json.dumps(t.model_dump(), ensure_ascii=False) for t in tools)
    if style != "compact":
        raise ValueError(f"tool list style must be 'compact' or 'json', got {style!r}")
    return "\n".join(_signature(t) for t in tools)


def render_system_prompt(tools: Iterable[ToolSpec], context: str = "", style: str = "compact") -> str:
    """The system message: the task's own context (date, rules), the tool-call instructions, then the tools."""
    head = f"{context.strip()}\n\n" if context.strip() else ""
    return f"{head}{INSTRUCTIONS}\n\nTools:\n{render_tool_list(tools, style)}"


def format_tool_call(name: str, arguments: dict[str, Any]) -> str:
    """One call as the model must write it."""
    return f"{TOOL_CALL_OPEN}{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}{TOOL_CALL_CLOSE}"


def format_tool_result(output: Any = None, error: str | None = None) -> str:
    """A tool message's content: the JSON result, or `{"error": ...}`."""
    if error is not None:
        return json.dumps({"error": error}, ensure_ascii=False)
    return json.dumps(output, ensure_ascii=False, default=str)
