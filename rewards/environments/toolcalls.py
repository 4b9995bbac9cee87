"""THE parser from model text to tool calls, and the system prompt that teaches the format.

Every path that turns model output into tool calls (the tool loop, evaluation, imported traces) goes through
`parse_reply`, so a format error means the same thing everywhere. The format itself lives in
`schemas.tool_prompt` (shared with the demonstrations written for SFT).

Rules:
- each `<tool_call>{"name": str, "arguments": {...}}</tool_call>` block is one call; `arguments` may also be a JSON
  string holding an object (as OpenAI sends it);
- an unclosed block, invalid JSON, a missing/empty name, non-object arguments, a block over `MAX_CALL_CHARS`,
  JSON nested deeper than `MAX_DEPTH`, or more than `MAX_CALLS_PER_REPLY` blocks is a format error (never a crash);
- a reply that is a bare `{"name": ..., "arguments": ...}` object without tags is a format error that says so;
- a reply with no block at all is the final answer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from schemas.messages import ToolCall
from schemas.task import ToolSpec
from schemas.tool_prompt import TOOL_CALL_CLOSE, TOOL_CALL_OPEN, render_system_prompt

MAX_CALL_CHARS = 16_000
MAX_DEPTH = 8
MAX_CALLS_PER_REPLY = 16

_BLOCK = re.compile(re.escape(TOOL_CALL_OPEN) + r"(.*?)" + re.escape(TOOL_CALL_CLOSE), re.DOTALL)


@dataclass
class ParsedReply:
    """What one model reply holds: calls, format errors (one message each), and the final answer if any."""

    calls: list[ToolCall] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    final_answer: str | None = None
    text: str = ""

    @property
    def is_final(self) -> bool:
        return not self.calls and not self.errors


def _depth(value: Any, limit: int) -> int:
    """Nesting depth, stopping early once past `limit` (so a hostile payload costs little)."""
    stack = [(value, 1)]
    deepest = 0
    while stack:
        v, d = stack.pop()
        deepest = max(deepest, d)
        if deepest > limit:
            return deepest
        if isinstance(v, dict):
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, d + 1) for x in v)
    return deepest


def _loads(raw: str) -> Any:
    # json.loads recurses, so a string of 100k '[' would hit RecursionError: check the nesting first. Counting
    # brackets bounds the depth from above, so the exact scan only runs when there are many of them.
    if raw.count("[") + raw.count("{") <= MAX_DEPTH + 1:
        return json.loads(raw)
    depth = best = 0
    in_str = esc = False
    for ch in raw:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            best = max(best, depth)
            if best > MAX_DEPTH + 1:
                raise ValueError(f"arguments nested deeper than {MAX_DEPTH} levels")
        elif ch in "]}":
            depth -= 1
    return json.loads(raw)


def parse_call(raw: str, index: int = 0) -> tuple[ToolCall | None, str | None]:
    """One block's inside as a ToolCall, or the format error to show the model."""
    if len(raw) > MAX_CALL_CHARS:
        return None, f"tool call {index + 1} is {len(raw)} characters long (limit {MAX_CALL_CHARS})"
    try:
        obj = _loads(raw.strip())
    except (ValueError, RecursionError) as exc:
        return None, f"tool call {index + 1} is not valid JSON ({str(exc)[:120]})"
    if not isinstance(obj, dict):
        return None, f'tool call {index + 1} must be a JSON object {{"name": ..., "arguments": {{...}}}}'
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return None, f"tool call {index + 1} has no tool name (a string \"name\" is required)"
    extra = set(obj) - {"name", "arguments", "id"}
    if extra:
        return None, f"tool call {index + 1} has unexpected keys {sorted(extra)}; only name and arguments are allowed"
    args = obj.get("arguments", {})
    if isinstance(args, str):
        try:
            args = _loads(args) if args.strip() else {}
        except (ValueError, RecursionError) as exc:
            return None, f"tool call {index + 1} ({name}): arguments string is not valid JSON ({str(exc)[:120]})"
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return None, f"tool call {index + 1} ({name}): arguments must be a JSON object, got {type(args).__name__}"
    if _depth(args, MAX_DEPTH) > MAX_DEPTH:
        return None, f"tool call {index + 1} ({name}): arguments nested deeper than {MAX_DEPTH} levels"
    return ToolCall(name=name.strip(), arguments=args), None


def parse_reply(text: str) -> ParsedReply:
    """A model reply as calls, format errors and/or a final answer (see the module docstring for the rules)."""
    text = text or ""
    out = ParsedReply(text=text)
    blocks = _BLOCK.findall(text)
    rest = _BLOCK.sub("", text)
    if TOOL_CALL_OPEN in rest:
        out.errors.append(f"a {TOOL_CALL_OPEN} block is not closed with {TOOL_CALL_CLOSE}")
    elif TOOL_CALL_CLOSE in rest:
        out.errors.append(f"{TOOL_CALL_CLOSE} without a matching {TOOL_CALL_OPEN}")
    if len(blocks) > MAX_CALLS_PER_REPLY:
        out.errors.append(f"{len(blocks)} tool calls in one reply (limit {MAX_CALLS_PER_REPLY}); none were run")
        return out
    for i, raw in enumerate(blocks):
        call, err = parse_call(raw, i)
        if err:
            out.errors.append(err)
        else:
            out.calls.append(call)
    if not blocks and not out.errors:
        stripped = text.strip()
        if stripped.startswith("{") and '"name"' in stripped and ('"arguments"' in stripped or '"parameters"' in stripped):
            out.errors.append(f"tool calls must be wrapped in {TOOL_CALL_OPEN}...{TOOL_CALL_CLOSE}")
        else:
            out.final_answer = stripped
    return out


def system_prompt(tools: Iterable[ToolSpec], context: str = "", style: str = "compact") -> str:
    """The system prompt (task context + tool-call instructions + tool list) that pairs with `parse_reply`."""
    return render_system_prompt(tools, context=context, style=style)
