"""Interoperability with NeMo Gym's Workplace Assistant: its CSV world, its JSONL tasks, its rollouts.

- `read_csv_world(folder)`: `csv_data/processed/*.csv` + `csv_data/raw/email_addresses.csv` as a WorkplaceWorld
  (today = 2023-11-30 23:59:00, the date its tasks are written for).
- `read_tasks(path)`: `data/example.jsonl`-format lines as TaskRows (system + user message, ground truth calls).
- `export_tasks(tasks, path)`: our TaskRows in that format (write calls only in `ground_truth`, as NeMo Gym's are).
- `read_rollouts(path)`: lines with `responses_create_params` + `response.output` (function_call /
  function_call_output / message items) as Trajectories, plus the recorded `reward`.
- `verify_rollouts(rollouts, tasks, world)`: our verdict per rollout, in input order, joined to its task by `id`
  when the rollout carries one, else by its user message. Where our verdict differs from the recorded NeMo Gym reward
  on purpose, `reason` says so.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Iterable

from schemas.messages import Message, ToolCall
from schemas.task import FunctionSpec, TaskRow, ToolSpec
from schemas.tool_prompt import TOOL_CALL_CLOSE, TOOL_CALL_OPEN
from schemas.trajectory import Trajectory
from schemas.workplace import WRITE_TOOLS, tool_specs
from rewards.environments.workplace.verifier import NEMO_GYM_DIFFERENCES, reason_code, verify_trajectory
from rewards.atomic_write import atomic_write_text
from rewards.environments.workplace.world import WorkplaceWorld

NEMO_TODAY = "2023-11-30 23:59:00"
NEMO_CONTEXT = ("Today's date is Thursday, 2023-11-30 and the current time is 23:59:00. Remember the current date "
                "and time when answering queries. Meetings must not start before 9am or end after 6pm.")
CSV_FILES = {
    "emails": "processed/emails.csv",
    "calendar_events": "processed/calendar_events.csv",
    "project_tasks": "processed/project_tasks.csv",
    "crm_customers": "processed/customer_relationship_manager_data.csv",
    "analytics_visits": "processed/analytics_data.csv",
}


class NemoGymFormatError(ValueError):
    """A NeMo Gym file does not have the expected shape; the message names file, line and field."""


def _csv_root(folder: str | Path) -> Path:
    folder = Path(folder)
    for cand in (folder / "csv_data", folder):
        if (cand / "processed").is_dir():
            return cand
    raise NemoGymFormatError(f"{folder}: no csv_data/processed folder (expected NeMo Gym's workplace_assistant data)")


def read_csv_world(folder: str | Path) -> WorkplaceWorld:
    root = _csv_root(folder)
    tables: dict[str, list[dict[str, Any]]] = {}
    for table, rel in CSV_FILES.items():
        path = root / rel
        if not path.exists():
            raise NemoGymFormatError(f"{path}: missing (needed for table {table})")
        with open(path, newline="", encoding="utf-8") as f:
            tables[table] = [{k: (v if v != "" else None) for k, v in row.items()} for row in csv.DictReader(f)]
    with open(root / "raw" / "email_addresses.csv", encoding="utf-8") as f:
        addresses = [line.strip() for line in f if line.strip()]
    tables["directory"] = [{"email_address": a.lower(), "name": a.split("@")[0].replace(".", " ")} for a in addresses]
    # NeMo Gym's directory lists people; task assignees must be in it, so add any assignee it lacks.
    known = {a.lower() for a in addresses}
    for t in ("project_tasks", "crm_customers"):
        for row in tables[t]:
            a = (row.get("assigned_to_email") or "").lower()
            if a and a not in known:
                known.add(a)
                tables["directory"].append({"email_address": a, "name": a.split("@")[0].replace(".", " ")})
    return WorkplaceWorld.from_tables(tables, today=NEMO_TODAY, context=NEMO_CONTEXT, name="nemo_gym")


def _spec_from_responses(tool: dict[str, Any]) -> ToolSpec:
    if "function" in tool:
        return ToolSpec.model_validate(tool)
    return ToolSpec(function=FunctionSpec(name=tool["name"], description=tool.get("description", ""),
                                          parameters=tool.get("parameters") or {"type": "object", "properties": {}}))


def _args(raw: Any, where: str) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        val = json.loads(raw) if raw else {}
    except (TypeError, ValueError) as exc:
        raise NemoGymFormatError(f"{where}: arguments are not JSON ({exc})") from exc
    if not isinstance(val, dict):
        raise NemoGymFormatError(f"{where}: arguments must be a JSON object")
    return val


def _read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    path = Path(path)
    if not path.exists():
        raise NemoGymFormatError(f"{path}: no such file")
    rows = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except ValueError as exc:
                    raise NemoGymFormatError(f"{path}: line {i} is not valid JSON ({exc})") from exc
    return rows


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def task_from_record(rec: dict[str, Any], where: str = "") -> TaskRow:
    params = rec.get("responses_create_params")
    if not isinstance(params, dict) or "input" not in params:
        raise NemoGymFormatError(f"{where}: field responses_create_params.input is missing")
    prompt = [Message(role=m["role"], content=_content_text(m.get("content")))
              for m in params["input"] if m.get("role") in ("system", "user", "assistant")]
    gt = [ToolCall(name=c["name"], arguments=_args(c.get("arguments"), f"{where}: ground_truth[{j}]"))
          for j, c in enumerate(rec.get("ground_truth") or [])]
    tools = [_spec_from_responses(t) for t in params.get("tools") or []] or None
    category = str(rec.get("category", "")).removeprefix("workplace_assistant_")
    return TaskRow(id=str(rec.get("id", where)), split="test", prompt=prompt, tools=tools, ground_truth_calls=gt,
                   metadata={"source": "nemo_gym", "category": category, "noop": not gt,
                             "environment_name": rec.get("environment_name", "workplace_assistant")})


def read_tasks(path: str | Path) -> list[TaskRow]:
    return [task_from_record(r, f"{path}: line {i + 1}") for i, r in enumerate(_read_jsonl(path))]


def _responses_tool(spec: ToolSpec) -> dict[str, Any]:
    return {"type": "function", "name": spec.function.name, "description": spec.function.description,
            "parameters": spec.function.parameters, "strict": False}


def task_to_record(task: TaskRow, index: int | None = None) -> dict[str, Any]:
    """One of our tasks as a NeMo Gym `example.jsonl` line (system context + user message; write calls only)."""
    system = [m for m in task.prompt if m.role == "system"]
    inp = [{"role": m.role, "content": m.content} for m in system]
    if not system:
        ctx = task.metadata.get("context") or ""
        if ctx:
            inp.append({"role": "system", "content": ctx})
    inp += [{"role": m.role, "content": m.content} for m in task.prompt if m.role != "system"]
    tools = task.tools or tool_specs()
    return {
        "id": task.id if index is None else index,
        "responses_create_params": {"input": inp, "tools": [_responses_tool(t) for t in tools],
                                    "parallel_tool_calls": False, "temperature": 1.0},
        "ground_truth": [{"name": c.name, "arguments": json.dumps(c.arguments)}
                         for c in (task.ground_truth_calls or []) if c.name in WRITE_TOOLS],
        "category": f"workplace_assistant_{task.metadata.get('category', 'task')}",
        "environment_name": "workplace_assistant",
    }


def export_tasks(tasks: Iterable[TaskRow], path: str | Path) -> Path:
    """Write tasks as a NeMo Gym JSONL file, atomically (a temp file renamed into place)."""
    text = "".join(json.dumps(task_to_record(t), ensure_ascii=False) + "\n" for t in tasks)
    return atomic_write_text(path, text)


def user_text(messages: Iterable[Message | dict[str, Any]]) -> str:
    for m in messages:
        role = m.role if isinstance(m, Message) else m.get("role")
        if role == "user":
            return (m.content if isinstance(m, Message) else _content_text(m.get("content"))).strip()
    return ""


def trajectory_from_rollout(rec: dict[str, Any], where: str = "") -> Trajectory:
    params = rec.get("responses_create_params") or {}
    response = rec.get("response") or {}
    output = response.get("output")
    if not isinstance(output, list):
        raise NemoGymFormatError(f"{where}: field response.output is missing or not a list")
    msgs = [Message(role=m["role"], content=_content_text(m.get("content")))
            for m in params.get("input", []) if m.get("role") in ("system", "user")]
    final = None
    for j, item in enumerate(output):
        kind = item.get("type")
        if kind == "function_call":
            name, raw = item.get("name") or "?", item.get("arguments")
            try:
                call = ToolCall(name=name, id=item.get("call_id"), arguments=_args(raw, f"{where}: output[{j}]"))
                msgs.append(Message(role="assistant", content="", tool_calls=[call]))
            except NemoGymFormatError:
                # the model wrote arguments that are not a JSON object: keep its text so THE parser judges it
                text = json.dumps({"name": name, "arguments": raw if isinstance(raw, str) else json.dumps(raw)})
                msgs.append(Message(role="assistant", content=f"{TOOL_CALL_OPEN}{text}{TOOL_CALL_CLOSE}"))
            final = None
        elif kind == "function_call_output":
            out = item.get("output", "")
            text = out if isinstance(out, str) else json.dumps(out)
            msgs.append(Message(role="tool", content=text, tool_call_id=item.get("call_id")))
        elif kind == "message" and item.get("role", "assistant") == "assistant":
            text = _content_text(item.get("content")).strip()
            if text:
                msgs.append(Message(role="assistant", content=text))
                final = text
    return Trajectory(task_id=str(rec.get("id", "")), messages=msgs, final_answer=final,
                      turns=sum(1 for m in msgs if m.role == "assistant"), stopped="answer",
                      metadata={"source": "nemo_gym", "nemo_gym_reward": rec.get("reward")})


def verify_rollouts(rollouts_path: str | Path, tasks: list[TaskRow], world: WorkplaceWorld) -> list[dict[str, Any]]:
    """One verdict dict per rollout line, in input order (see the module docstring)."""
    by_id = {t.id: t for t in tasks}
    by_user = {user_text(t.prompt): t for t in tasks}
    out = []
    for i, rec in enumerate(_read_jsonl(rollouts_path)):
        where = f"{rollouts_path}: line {i + 1}"
        traj = trajectory_from_rollout(rec, where)
        task = by_id.get(str(rec["id"])) if "id" in rec else None
        if task is None:
            task = by_user.get(user_text((rec.get("responses_create_params") or {}).get("input", [])))
        row: dict[str, Any] = {"index": i}
        if task is None:
            row.update(task_id=None, reward=None, reason="error: no task matches this rollout's id or user message")
            out.append(row)
            continue
        res = verify_trajectory(task, traj, world)
        code = reason_code(res)
        row.update(task_id=task.id, reward=res.score, passed=res.passed, reason=res.reason)
        nemo = rec.get("reward")
        if nemo is not None:
            row["nemo_gym_reward"] = nemo
            row["agrees_with_nemo_gym"] = (res.score == float(nemo))
            if not row["agrees_with_nemo_gym"]:
                note = _difference_note(code, res.reason, task)
                if note:
                    row["reason"] = f"{res.reason} [{note}]"
        row["components"] = res.components
        out.append(row)
    return out


def _difference_note(code: str, reason: str, task: TaskRow) -> str | None:
    if code == "failed_call":
        return NEMO_GYM_DIFFERENCES["failed_call"]
    if code == "extra_write" and "reverted" in reason:
        return NEMO_GYM_DIFFERENCES["extra_write_revert"]
    if code == "no_answer":
        return NEMO_GYM_DIFFERENCES["no_answer"]
    if code == "pass":
        return ("differs from NeMo Gym on purpose: its comparison includes the pandas row index and exact types, so "
                "renumbered rows or a number sent for a string score 0 there; we compare rows by key and value")
    return None
