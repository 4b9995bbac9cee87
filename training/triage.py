"""Triage: production failures -> re-verified, bucketed by failure mode -> regression tasks + the lightest fix.

Pipeline (`triage`):
1. `read_traces` imports a JSONL of failed traces in any of three shapes: our `Trajectory`, OpenAI
   chat-completions messages (tool calls with JSON-string arguments, optionally `request`/`response` pairs), and
   NeMo Gym rollouts. Every line becomes a `Trajectory`; a bad line names its number and what was expected.
2. Where a verifier applies (the trace's task is known: by id, else by its user message) the trace is re-verified
   with the environment's verifier, so the bucket reflects what the trace *did*, not what production logged.
   A trace that passes re-verification is reported apart (the production alarm was wrong, or the task changed).
3. Bucketing: the verifier's reason code first (`wrong_tool`, `extra_write`, ...), then a reason code reported by
   production, then error text: tool errors and logged errors are normalised (ids, numbers, dates, quoted values,
   e-mails replaced by placeholders) and similar signatures merged by token overlap.
4. Each bucket is written as regression tasks (split `regression`, category `regression/<bucket>`) that evaluation
   reports separately, and gets a recommendation: the lightest intervention the evidence supports, in the order
   prompt/tool-description change < SFT on corrected demonstrations < DPO on pairs < RLVR, with the numbers behind
   it.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from schemas.messages import Message, ToolCall
from schemas.rewards import RewardResult
from schemas.task import TaskRow, ToolSpec
from schemas.trajectory import Trajectory
from schemas.triage import Bucket, Recommendation, TriageReport
from training.signatures import error_signature, jaccard

KNOWN_REASONS = ("format_error", "wrong_tool", "wrong_arguments", "missing_action", "extra_write", "failed_call",
                 "no_answer", "step_limit")
SIMILARITY = 0.6  # token Jaccard above which two error signatures are one failure mode
SYSTEMATIC = 0.5  # share of a bucket one cause must explain before a prompt/tool-description fix is recommended


class TriageError(ValueError):
    """A trace file could not be read; the message names the file, the line and the field."""


@dataclass
class Trace:
    line: int
    fmt: str
    trajectory: Trajectory
    tools: list[ToolSpec] | None = None
    task_id: str | None = None
    reported_reason: str | None = None
    error_text: str = ""
    arg_errors: list[str] = field(default_factory=list)
    result: RewardResult | None = None
    task: TaskRow | None = None


# ------------------------------------------------------------------------------------------------------ reading

def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content)


def _openai_message(m: dict[str, Any], where: str, arg_errors: list[str]) -> Message:
    role = m.get("role")
    if role not in ("system", "user", "assistant", "tool"):
        raise TriageError(f"{where}: message role {role!r}; expected system, user, assistant or tool")
    calls = None
    if m.get("tool_calls"):
        calls = []
        for j, tc in enumerate(m["tool_calls"]):
            fn = tc.get("function") or tc
            name = fn.get("name")
            if not name:
                raise TriageError(f"{where}: tool_calls[{j}] has no function name")
            raw = fn.get("arguments", {})
            if isinstance(raw, str):
                try:
                    args = json.loads(raw) if raw.strip() else {}
                except ValueError:
                    arg_errors.append(f"invalid JSON arguments for {name}: {raw[:80]}")
                    args = {}
            else:
                args = raw
            if not isinstance(args, dict):
                arg_errors.append(f"arguments of {name} are not a JSON object")
                args = {}
            calls.append(ToolCall(name=name, arguments=args, id=tc.get("id")))
    return Message(role=role, content=_text(m.get("content")), tool_calls=calls or None,
                   tool_call_id=m.get("tool_call_id"), name=m.get("name"))


def _tools(raw: Any) -> list[ToolSpec] | None:
    if not raw:
        return None
    out = []
    for t in raw:
        try:
            out.append(ToolSpec.model_validate(t if "function" in t else {"type": "function", "function": t}))
        except ValueError:
            continue
    return out or None


def _reported(rec: dict[str, Any]) -> tuple[str | None, str]:
    """(reason code or label production logged, error text production logged)."""
    reason = rec.get("reason") or rec.get("failure_reason") or rec.get("failure")
    reward = rec.get("reward")
    if isinstance(reward, dict):
        reason = reason or reward.get("reason")
    err = rec.get("error") or rec.get("error_message") or ""
    if isinstance(err, dict):
        err = err.get("message") or json.dumps(err)
    return (str(reason) if reason else None), str(err)


def parse_trace(rec: dict[str, Any], line: int, where: str) -> Trace:
    """One JSONL record as a Trace, whatever of the three shapes it has."""
    if not isinstance(rec, dict):
        raise TriageError(f"{where}: expected a JSON object per line")
    reason, err = _reported(rec)
    arg_errors: list[str] = []
    md = rec.get("metadata") if isinstance(rec.get("metadata"), dict) else {}
    if "responses_create_params" in rec or isinstance(rec.get("response"), dict) and "output" in rec["response"]:
        from rewards.environments.workplace.nemo_gym import trajectory_from_rollout

        try:
            traj = trajectory_from_rollout(rec, where)
        except Exception as exc:  # noqa: BLE001 - their format error names the field
            raise TriageError(str(exc)) from exc
        tools = _tools((rec.get("responses_create_params") or {}).get("tools"))
        fmt, task_id = "nemo_gym", str(rec["id"]) if "id" in rec else None
        if rec.get("reward") is not None and not isinstance(rec.get("reward"), dict):
            reason = reason or ("passed" if float(rec["reward"]) >= 1 else None)
    elif "task_id" in rec and "messages" in rec and all(
            not isinstance((m.get("tool_calls") or [{}])[0].get("function"), dict) for m in rec["messages"]
            if isinstance(m, dict)):
        known = {k: v for k, v in rec.items() if k in Trajectory.model_fields}
        try:
            traj = Trajectory.model_validate(known)
        except ValueError as exc:
            raise TriageError(f"{where}: not a valid trajectory ({str(exc).splitlines()[0]})") from exc
        if traj.reward is not None and traj.reward.reason:
            reason = reason or traj.reward.reason
        fmt, task_id, tools = "trajectory", traj.task_id, _tools(rec.get("tools"))
    else:
        msgs = rec.get("messages")
        if msgs is None and isinstance(rec.get("request"), dict):
            msgs = list(rec["request"].get("messages") or [])
            choice = ((rec.get("response") or {}).get("choices") or [{}])[0].get("message")
            if choice:
                msgs.append(choice)
        if not isinstance(msgs, list) or not msgs:
            raise TriageError(f"{where}: no 'messages' list (expected a trajectory, OpenAI chat messages with tool "
                              "calls, a request/response pair or a NeMo Gym rollout)")
        messages = [_openai_message(m, f"{where}: messages[{i}]", arg_errors) for i, m in enumerate(msgs)]
        task_id = rec.get("task_id") or rec.get("id") or md.get("task_id")
        final = next((m.content for m in reversed(messages) if m.role == "assistant" and not m.tool_calls
                      and m.content.strip()), None)
        traj = Trajectory(task_id=str(task_id or f"line-{line}"), messages=messages, final_answer=final,
                          turns=sum(1 for m in messages if m.role == "assistant"),
                          stopped=str(rec.get("stopped") or "answer"), metadata=dict(md))
        fmt, tools = "openai", _tools(rec.get("tools") or (rec.get("request") or {}).get("tools"))
        task_id = str(task_id) if task_id else None
    tool_errors = [_tool_error(m.content) for m in traj.messages if m.role == "tool"]
    text = "; ".join([e for e in [err, *arg_errors, *[t for t in tool_errors if t]] if e])
    return Trace(line=line, fmt=fmt, trajectory=traj, tools=tools, task_id=task_id, reported_reason=reason,
                 error_text=text, arg_errors=arg_errors)


def _tool_error(content: str) -> str | None:
    s = content.strip()
    if not s.startswith("{"):
        return s[:300] if s.lower().startswith(("error", "format error")) else None
    try:
        obj = json.loads(s)
    except ValueError:
        return None
    return str(obj["error"])[:300] if isinstance(obj, dict) and obj.get("error") else None


def read_traces(path: str | Path) -> list[Trace]:
    from generators.task_io import iter_jsonl

    traces = [parse_trace(rec, i, f"{path}: line {i}") for i, rec in iter_jsonl(path, TriageError, "trace file")]
    if not traces:
        raise TriageError(f"{path}: holds no traces")
    return traces


# ------------------------------------------------------------------------------------------------- verification

def _user_text(messages: list[Message]) -> str:
    return next((m.content.strip() for m in messages if m.role == "user"), "")


Verifier = Callable[[TaskRow, Trajectory], RewardResult]


def workplace_verifier(world_resolver: Callable[[TaskRow], Any] | None = None) -> Verifier:
    """The workplace verifier over the task's world (the seed world unless the task names another)."""
    from rewards.environments.workplace import verify_trajectory
    from training.eval_environment import default_world_resolver

    resolve = world_resolver or default_world_resolver()
    return lambda task, traj: verify_trajectory(task, traj, resolve(task))


def reverify(traces: list[Trace], tasks: list[TaskRow] | None, verifier: Verifier | None) -> None:
    """Attach the task (by id, else by user message) and, with a verifier, the fresh verdict to each trace."""
    if not tasks:
        return
    by_id = {t.id: t for t in tasks}
    by_user = {_user_text(t.prompt): t for t in tasks}
    for tr in traces:
        task = by_id.get(tr.task_id or "") or by_user.get(_user_text(tr.trajectory.messages))
        if task is None:
            continue
        tr.task = task
        if verifier is not None and task.ground_truth_calls is not None:
            try:
                tr.result = verifier(task, tr.trajectory)
            except Exception as exc:  # noqa: BLE001 - a verifier crash is shown, not hidden
                tr.result = RewardResult(score=None, error=f"verifier raised {type(exc).__name__}: {exc}")


# ---------------------------------------------------------------------------------------------------- bucketing

def cluster_signatures(sigs: list[str], threshold: float = SIMILARITY) -> dict[str, str]:
    """Map each signature to its cluster's representative (the most frequent member), merging by token overlap."""
    counts = Counter(sigs)
    reps: list[str] = []
    out: dict[str, str] = {}
    for sig, _ in counts.most_common():
        best = max(reps, key=lambda r: jaccard(sig, r), default=None)
        if best is not None and jaccard(sig, best) >= threshold:
            out[sig] = best
        else:
            reps.append(sig)
            out[sig] = sig
    return out


def trace_passed(tr: Trace) -> bool:
    return tr.result is not None and not tr.result.is_error and bool(tr.result.passed)


def bucket_key(tr: Trace) -> tuple[str, str]:
    """(kind, reason): the verifier's code, else a production-reported code, else error text, else unknown."""
    if tr.result is not None and not tr.result.is_error:
        return "verifier", tr.result.reason.split(":", 1)[0].strip() or "failed"
    rep = (tr.reported_reason or "").split(":", 1)[0].strip()
    if rep in KNOWN_REASONS:
        return "reported", rep
    if tr.error_text:
        return "error_text", error_signature(tr.error_text)
    if tr.trajectory.stopped in KNOWN_REASONS:
        return "reported", tr.trajectory.stopped
    return "unknown", "unclassified"


def _called_tools(tr: Trace) -> list[str]:
    from rewards.environments.toolcalls import parse_reply

    names = []
    for m in tr.trajectory.messages:
        if m.role != "assistant":
            continue
        calls = m.tool_calls or parse_reply(m.content).calls
        names.extend(c.name for c in calls)
    return names


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:40] or "bucket"


def bucket_traces(traces: list[Trace]) -> list[Bucket]:
    failing = [(i, tr) for i, tr in enumerate(traces) if not trace_passed(tr)]
    keys = {i: bucket_key(tr) for i, tr in failing}
    text_sigs = [r for k, r in keys.values() if k == "error_text"]
    reps = cluster_signatures(text_sigs)
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, (kind, reason) in keys.items():
        groups[(kind, reps.get(reason, reason) if kind == "error_text" else reason)].append(i)
    buckets = []
    for (kind, reason), idx in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        trs = [traces[i] for i in idx]
        examples = []
        for tr in trs:
            ex = (tr.result.reason if tr.result is not None and tr.result.reason else "") or tr.error_text
            if ex and ex not in examples:
                examples.append(ex[:240])
            if len(examples) >= 3:
                break
        name = reason if kind in ("verifier", "reported", "unknown") else "error:" + _slug(reason)
        buckets.append(Bucket(
            name=name, key_kind=kind, reason=reason, count=len(idx), trace_indices=[traces[i].line for i in idx],
            task_ids=sorted({tr.task.id if tr.task else (tr.task_id or "") for tr in trs} - {""}),
            signature=reason if kind == "error_text" else "", examples=examples,
            tools=dict(Counter(n for tr in trs for n in _called_tools(tr)).most_common(8)),
        ))
    # two buckets may share a name (a reported and a verified code): keep names unique
    seen: Counter[str] = Counter()
    for b in buckets:
        seen[b.name] += 1
        if seen[b.name] > 1:
            b.name = f"{b.name}_{b.key_kind}"
    return buckets


# ----------------------------------------------------------------------------------------------- recommendation

_TOOL_JSON = re.compile(r"\{\s*\"name\"\s*:")
_INFRA = re.compile(r"time(d)?[ -]?out|connection (refused|reset|error)|\b5\d\d\b|rate limit|unavailable", re.I)


def _near_miss_format(tr: Trace) -> bool:
    """The model tried to call a tool (a JSON object with a name, or a broken tag), only the wrapper is wrong."""
    for m in tr.trajectory.messages:
        if m.role == "assistant" and (_TOOL_JSON.search(m.content) or "tool_call" in m.content):
            return True
    return bool(tr.arg_errors)


def recommend(bucket: Bucket, traces: list[Trace], all_traces: list[Trace]) -> Recommendation:
    """The lightest intervention the evidence supports, with the numbers; feasible heavier ones as alternatives."""
    n = len(traces)
    known_tools = {t.function.name for tr in traces for t in (tr.tools or (tr.task.tools if tr.task else None) or [])}
    with_truth = sum(1 for tr in traces if tr.task is not None and tr.task.ground_truth_calls is not None)
    passing_tasks = {tr.task.id for tr in all_traces if tr.task is not None and trace_passed(tr)}
    with_pairs = sum(1 for tr in traces if tr.task is not None and tr.task.id in passing_tasks)
    verifiable = sum(1 for tr in traces if tr.result is not None)
    sigs = Counter(error_signature(e) for tr in traces for e in tr.error_text.split("; ") if e)
    top_sig, top_n = (sigs.most_common(1)[0] if sigs else ("", 0))
    evidence: dict[str, Any] = {"traces": n, "with_ground_truth": with_truth, "with_passing_pair": with_pairs,
                                "re_verified": verifiable}
    if top_sig:
        evidence["top_error"] = {"signature": top_sig, "traces": top_n}
    feasible = []
    if with_truth:
        feasible.append("sft_corrected_demonstrations")
    if with_pairs:
        feasible.append("dpo_pairs")
    if verifiable or with_truth:
        feasible.append("rlvr")
    reason = bucket.reason

    def rec(kind: str, why: str) -> Recommendation:
        return Recommendation(intervention=kind, why=why, evidence=evidence,
                              alternatives=[f for f in feasible if f != kind])

    # 1. a systematic, instruction-shaped cause: fix the prompt or the tool description, no training
    if reason == "format_error":
        near = sum(1 for tr in traces if _near_miss_format(tr))
        evidence["near_miss_tool_calls"] = near
        if near / n >= SYSTEMATIC:
            return rec("prompt_or_tool_description",
                       f"{near}/{n} failing traces do try to call a tool but get the call syntax wrong: show the exact "
                       "call format with an example in the system prompt before training anything")
    if reason == "wrong_tool" and known_tools:
        called = [c for tr in traces for c in _called_tools(tr)]
        unknown = [c for c in called if c not in known_tools]
        evidence["calls_to_unknown_tools"] = len(unknown)
        if called and len(unknown) / len(called) >= SYSTEMATIC:
            common = Counter(unknown).most_common(3)
            return rec("prompt_or_tool_description",
                       f"{len(unknown)}/{len(called)} calls name tools that do not exist (most often "
                       f"{', '.join(f'{k} x{v}' for k, v in common)}): rename or describe the real tools so the "
                       "model finds them")
    infra = sum(1 for tr in traces if _INFRA.search(tr.error_text))
    if infra / n >= SYSTEMATIC:
        evidence["infrastructure_errors"] = infra
        return rec("prompt_or_tool_description",
                   f"{infra}/{n} traces fail in the tool or service itself (timeouts, connection or server errors): "
                   "fix or retry in the tool; no model training fixes these")
    if reason in ("wrong_arguments", "failed_call") or bucket.key_kind == "error_text":
        if top_n >= 2 and top_n / n >= SYSTEMATIC:
            return rec("prompt_or_tool_description",
                       f"{top_n}/{n} traces hit the same error ({top_sig[:100]}): document the expected argument "
                       "format in the tool description (or the prompt)")
    # 2. the model does not know how: corrected demonstrations (ground truth replayed)
    if reason in ("extra_write", "step_limit") and with_pairs:
        return rec("dpo_pairs",
                   f"{with_pairs}/{n} of these tasks also have a passing trace: the model can do them but also "
                   "does the wrong thing; prefer passing over failing traces of the same task with DPO")
    if with_truth and with_truth / n >= SYSTEMATIC:
        return rec("sft_corrected_demonstrations",
                   f"ground-truth calls are known for {with_truth}/{n} failing traces: replay them as corrected "
                   "demonstrations and fine-tune on them (SFT)")
    if with_pairs:
        return rec("dpo_pairs", f"{with_pairs}/{n} tasks have both a passing and a failing trace: train DPO on the pairs")
    if verifiable:
        return rec("rlvr", f"no demonstrations or pairs, but a verifier judges {verifiable}/{n} of these tasks: "
                           "add them to the RLVR training set")
    return Recommendation(intervention="prompt_or_tool_description",
                          why=f"no verifier, demonstrations or pairs for these {n} traces: start with the prompt and "
                              "tool descriptions, and record the expected calls so that the next triage can verify",
                          evidence=evidence, alternatives=feasible)


# ----------------------------------------------------------------------------------------------- regression set

def regression_tasks(buckets: list[Bucket], traces: list[Trace]) -> list[TaskRow]:
    """One regression task per distinct failing task (or prompt) per bucket, split `regression`."""
    by_line = {tr.line: tr for tr in traces}
    out: list[TaskRow] = []
    seen: set[str] = set()
    for b in buckets:
        for line in b.trace_indices:
            tr = by_line[line]
            base_id = tr.task.id if tr.task else (tr.task_id or f"line{line}")
            tid = f"reg-{_slug(b.name)}-{base_id}"
            if tid in seen:
                continue
            seen.add(tid)
            md = {"category": f"regression/{b.name}", "bucket": b.name, "failure_reason": b.reason,
                  "source_line": line, "source_format": tr.fmt, "original_task_id": base_id,
                  "failure_text": (tr.error_text or (tr.result.reason if tr.result else ""))[:300]}
            if tr.task is not None:
                t = tr.task
                out.append(t.model_copy(update={"id": tid, "split": "regression",
                                                 "metadata": {**t.metadata, **md,
                                                              "original_category": t.metadata.get("category")}}))
            else:
                first_assistant = next((i for i, m in enumerate(tr.trajectory.messages) if m.role == "assistant"),
                                       len(tr.trajectory.messages))
                prompt = [m for m in tr.trajectory.messages[:first_assistant] if m.role in ("system", "user")]
                if not prompt:
                    continue
                out.append(TaskRow(id=tid, split="regression", prompt=prompt, tools=tr.tools,
                                   metadata={**md, "needs_reference": True}))
    return out


def write_regression(tasks: list[TaskRow], path: str | Path, into: str | Path | None = None) -> Path:
    """Write regression tasks (Parquet/JSONL). With `into`, merge them into that dataset (same ids replaced)."""
    from generators.task_io import read_tasks, write_tasks

    if into is not None:
        existing = [t for t in read_tasks(into) if t.id not in {x.id for x in tasks}]
        return write_tasks(existing + tasks, into)
    return write_tasks(tasks, path)


def pairs_from_traces(traces: list[Trace], max_pairs_per_prompt: int = 4) -> list[dict[str, Any]]:
    """DPO pairs: a passing and a failing trace of the same task; prompt = messages before the first reply."""
    groups: dict[str, dict[str, list[Trace]]] = defaultdict(lambda: {"pass": [], "fail": []})
    for tr in traces:
        if tr.task is None or tr.result is None or tr.result.is_error:
            continue
        groups[tr.task.id]["pass" if trace_passed(tr) else "fail"].append(tr)
    pairs = []
    for tid, g in groups.items():
        for j, (good, bad) in enumerate(zip(g["pass"] * len(g["fail"]), g["fail"] * len(g["pass"]))):
            if j >= max_pairs_per_prompt:
                break
            msgs_g, msgs_b = good.trajectory.messages, bad.trajectory.messages
            cut_g = next(i for i, m in enumerate(msgs_g) if m.role == "assistant")
            cut_b = next(i for i, m in enumerate(msgs_b) if m.role == "assistant")
            as_chat = lambda ms: [{"role": m.role, "content": m.content or _render_calls(m)} for m in ms]  # noqa: E731
            pairs.append({"prompt": as_chat(msgs_g[:cut_g]), "chosen": as_chat(msgs_g[cut_g:]),
                          "rejected": as_chat(msgs_b[cut_b:]), "task_id": tid})
    return pairs


def _render_calls(m: Message) -> str:
    """Structured tool calls written back in the studio's text format (what the model must learn to emit)."""
    from schemas.tool_prompt import TOOL_CALL_CLOSE, TOOL_CALL_OPEN

    return "".join(f"{TOOL_CALL_OPEN}{json.dumps({'name': c.name, 'arguments': c.arguments})}{TOOL_CALL_CLOSE}"
                   for c in (m.tool_calls or []))


# ---------------------------------------------------------------------------------------------------- top level

def triage(path: str | Path, *, tasks: list[TaskRow] | None = None, verifier: Verifier | None = None,
           out: str | Path | None = None, into: str | Path | None = None) -> TriageReport:
    """Read, re-verify, bucket, recommend, and write the regression tasks. Returns the report."""
    path = Path(path)
    traces = read_traces(path)
    reverify(traces, tasks, verifier)
    buckets = bucket_traces(traces)
    by_line = {tr.line: tr for tr in traces}
    for b in buckets:
        b.recommendation = recommend(b, [by_line[i] for i in b.trace_indices], traces)
    reg = regression_tasks(buckets, traces)
    target = Path(out) if out else path.with_name(path.stem + ".regression.parquet")
    written = None
    if reg:
        written = write_regression(reg, target, into)
    return TriageReport(
        source=str(path), traces=len(traces), formats=dict(Counter(tr.fmt for tr in traces)),
        reverified=sum(1 for tr in traces if tr.result is not None),
        passed_on_reverification=[tr.line for tr in traces if trace_passed(tr)],
        unverifiable=sum(1 for tr in traces if tr.result is None), buckets=buckets,
        regression_path=str(written) if written else None, regression_tasks=len(reg), created_at=time.time(),
    )
