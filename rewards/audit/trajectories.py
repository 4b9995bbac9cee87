"""Building trajectories for trajectory-aware rewards from a task's ground-truth calls.

Why: a tool-using policy games a verifier with trajectories, not strings (do nothing, spam reads, write and undo).
The probes construct those from each task's own `ground_truth_calls` and the task's tool list, so they exercise
the verifier on the dataset's real tools and arguments.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from schemas.messages import Message, ToolCall
from schemas.trajectory import Trajectory

READ_PREFIXES = ("get", "search", "list", "find", "count", "read", "lookup", "query", "show", "view", "check",
                 "fetch", "analytics_get", "company_directory_find")
FINAL = "Done."
# Optional hook for a real environment: `episode(row)` starts a fresh episode of the row's task and returns a
# `step(calls) -> [tool result texts]` function. With it, probe trajectories carry real tool results, and the
# create-then-delete probe learns the id the create call returned.
Step = Callable[[list[ToolCall]], list[str]]
Episode = Callable[[dict[str, Any]], Step]


def is_read(name: str) -> bool:
    """A read-only tool by naming convention (`search_emails`, `get_event`, `email.search`, ...)."""
    base = name.rsplit(".", 1)[-1].rsplit("__", 1)[-1].lower()
    return base.startswith(READ_PREFIXES) or any(f"_{p}" in base for p in ("search", "get_", "find_", "count"))


def calls_of(row: dict[str, Any], field: str = "ground_truth_calls") -> list[ToolCall] | None:
    raw = row.get(field)
    if raw is None:
        return None
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return None
    out = []
    for c in raw:
        if isinstance(c, ToolCall):
            out.append(c)
        elif isinstance(c, dict):
            args = c.get("arguments", {})
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except ValueError:
                    args = {}
            out.append(ToolCall(name=c.get("name") or c.get("function", {}).get("name", "?"), arguments=args or {}))
    return out


def tool_names(row: dict[str, Any]) -> list[str]:
    names = []
    for t in row.get("tools") or []:
        fn = t.get("function", t) if isinstance(t, dict) else getattr(getattr(t, "function", None), "name", None)
        name = fn.get("name") if isinstance(fn, dict) else fn
        if name:
            names.append(str(name))
    return names


def prompt_messages(row: dict[str, Any]) -> list[Message]:
    p = row.get("prompt")
    if isinstance(p, str):
        return [Message(role="user", content=p)]
    out = []
    for m in p or []:
        out.append(m if isinstance(m, Message) else Message.model_validate(
            {k: v for k, v in m.items() if k in Message.model_fields}))
    return out


def build(row: dict[str, Any], calls: list[ToolCall], final: str | None = FINAL,
          episode: Episode | None = None, results: list[str] | None = None) -> Trajectory:
    """A trajectory that makes `calls` one per turn, then answers `final` (None: no final answer). Tool results
    come from `results`, else a fresh `episode` of the task, else a placeholder "ok"."""
    if results is None:
        results = episode(row)(calls) if episode and calls else ["ok"] * len(calls)
    messages = prompt_messages(row)
    for n, (call, result) in enumerate(zip(calls, results)):
        cid = f"call_{n}"
        messages.append(Message(role="assistant", content="", tool_calls=[call.model_copy(update={"id": cid})]))
        messages.append(Message(role="tool", content=str(result), tool_call_id=cid, name=call.name))
    if final is not None:
        messages.append(Message(role="assistant", content=final))
    return Trajectory(task_id=str(row.get("id", "")), messages=messages, final_answer=final,
                      turns=len(calls) + (1 if final is not None else 0),
                      stopped="answer" if final is not None else "step_limit")


def created_id(result: str) -> str | None:
    """The id a create call returned: a bare JSON string/number, or a dict's `id`/`*_id` field."""
    try:
        value = json.loads(result)
    except (TypeError, ValueError):
        value = result
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        text = str(value).strip()
        looks_like_id = 0 < len(text) <= 64 and " " not in text and any(ch.isdigit() for ch in text)
        return text if looks_like_id else None
    if isinstance(value, dict) and "error" not in value:
        for k, v in value.items():
            if k == "id" or k.endswith("_id"):
                return str(v)
    return None


def id_parameter(row: dict[str, Any], tool: str) -> str | None:
    """The id parameter of `tool` in the row's tool specs (the first required parameter named like an id)."""
    for t in row.get("tools") or []:
        fn = t.get("function", t) if isinstance(t, dict) else None
        if isinstance(fn, dict) and fn.get("name") == tool:
            params = fn.get("parameters") or {}
            names = list(params.get("required") or []) + list((params.get("properties") or {}).keys())
            return next((n for n in names if n == "id" or n.endswith("_id")), None)
    return None
