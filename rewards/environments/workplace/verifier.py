"""The workplace verifier: binary final-state match, a reason code for every failure, and shaping signals.

How a trajectory is judged (`verify_trajectory`):
1. Its tool calls are re-read from the assistant messages with THE parser (`parse_reply`), so a trajectory is judged
   on what the model wrote, not on what a loop recorded. Calls are replayed on the task's world inside a SAVEPOINT
   that is rolled back afterwards (cheap: no copy). Recorded tool outputs are never trusted for state.
2. The ground-truth calls are replayed the same way (once per task; cached) to get the expected rows.
3. Only rows written by either side can differ (both start from the same world), so the comparison is over the
   union of written keys: expected row = ground truth's final row if it wrote that key, else the world's row.
   Rows are normalised before comparing: text lowercased and stripped except enumerations (`status`, `list_name`,
   `board`), as NeMo Gym does; NULL and "" are distinct.

Binary pass = final state equal AND no format error AND no failed write AND no write outside the rows the ground
truth writes (so create-then-delete or change-then-revert fail even though the final state matches) AND not stopped
by the step limit AND, for a no-op task (ground truth changes nothing), nothing written and a final answer given.

Reason codes, in the order they are checked (the first that applies is reported):
`step_limit`, `format_error`, `wrong_tool` (a tool that does not exist), `failed_call` (a write that returned an
error), `extra_write`, `wrong_tool` (a write tool the ground truth does not use, with a wrong state), `missing_action`, `wrong_arguments`, `no_answer`. Passing gives `pass`.

Documented judgements: extra READ calls never fail a trajectory (they change nothing) but lower `call_efficiency`;
a failed READ lowers `valid_call_rate` only. Where NeMo Gym's verdict differs (failed writes, create-then-delete,
no-op without an answer, its row-index artefacts, number-vs-string arguments) the reason says so (see
`NEMO_GYM_DIFFERENCES`).

Shaping signals (`components`, all floats): `passed`, `required_changes` (fraction of the rows the task must change
that are right), `wrong_changes` (rows changed wrongly, incl. reverted extra writes), `valid_call_rate`,
`calls_used`, `calls_needed`, `call_efficiency` (min(1, needed/used)), `failed_writes`, `format_errors`,
`answered`, `write_tools_tried` (share of the task's write tools called at all, failed calls included; on a task
that needs no write, 1 when none was called), and `shaped`: a default composition in [0, 1] where every pass
(>= 0.75) scores above every failure (< 0.5), so it keeps the dominance invariant, and where a failure earns credit
only for progress (rows changed right, the needed write tools tried), never for stopping early (see `_shaped`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from schemas.messages import ToolCall
from schemas.rewards import RewardResult
from schemas.task import TaskRow
from schemas.tool_prompt import TOOL_CALL_OPEN
from schemas.trajectory import Trajectory
from schemas.workplace import CASE_SENSITIVE_COLUMNS, TOOLS_BY_NAME, WRITE_TOOLS
from rewards.environments.toolcalls import parse_reply
from rewards.environments.workplace.tools import ToolResult, execute, validate_call
from rewards.environments.workplace.world import TABLES, WorkplaceWorld

REASON_CODES = ("format_error", "wrong_tool", "wrong_arguments", "missing_action", "extra_write", "failed_call",
                "no_answer", "step_limit")
DEFAULT_MAX_CALLS = 64

NEMO_GYM_DIFFERENCES = {
    "failed_call": "differs from NeMo Gym on purpose: it skips failed calls, we fail a trajectory whose write failed",
    "extra_write_revert": "differs from NeMo Gym on purpose: it cannot see a create-then-delete or change-then-revert "
                          "(final state equal), we count every write outside the rows the task changes",
    "no_answer": "differs from NeMo Gym on purpose: it scores a no-op 1 without any answer, we require the final answer",
}


def _normalise_table(table: str) -> tuple[int, ...]:
    cols = TABLES[table].columns
    return tuple(i for i, c in enumerate(cols) if c not in CASE_SENSITIVE_COLUMNS)


_LOWER_COLS = {t: set(_normalise_table(t)) for t in TABLES}


def normalise_row(table: str, row: tuple | None) -> tuple | None:
    if row is None:
        return None
    lower = _LOWER_COLS[table]
    return tuple((v.strip().lower() if isinstance(v, str) and i in lower else v) for i, v in enumerate(row))


@dataclass
class CallRecord:
    call: ToolCall | None
    result: ToolResult | None
    format_error: str | None = None


@dataclass
class Replay:
    """What a sequence of calls did to a world: per-call results, written keys in order, final normalised rows."""

    records: list[CallRecord] = field(default_factory=list)
    written: list[tuple[str, str]] = field(default_factory=list)
    final: dict[tuple[str, str], tuple | None] = field(default_factory=dict)

    @property
    def written_set(self) -> set[tuple[str, str]]:
        return set(self.written)


def replay(world: WorkplaceWorld, calls: Iterable[ToolCall], *, run_reads: bool = True) -> Replay:
    """Replay calls in a scratch savepoint of `world` (undone afterwards) and capture the written rows' final values.

    `run_reads=False` skips executing read tools (they cannot change state); their arguments are still validated.
    """
    out = Replay()
    with world.scratch():
        for call in calls:
            tool = TOOLS_BY_NAME.get(call.name)
            if tool is not None and not tool.writes and not run_reads:
                _, err = validate_call(call)
                out.records.append(CallRecord(call, ToolResult(call.name, error=err)))
                continue
            res = execute(world, call)
            out.records.append(CallRecord(call, res))
            out.written.extend(res.writes)
        for key in dict.fromkeys(out.written):
            out.final[key] = normalise_row(key[0], world.row(*key))
    return out


@dataclass
class Expected:
    """The ground truth's effect on a world (cached per task and world)."""

    replay: Replay
    failed: list[str]
    calls_needed: int

    @property
    def changes(self) -> dict[tuple[str, str], tuple | None]:
        return self.replay.final


_EXPECTED_CACHE: dict[tuple[int, int, str, str], Expected] = {}


def expected_effect(task: TaskRow, world: WorkplaceWorld) -> Expected:
    calls = list(task.ground_truth_calls or [])
    sig = repr([(c.name, sorted(c.arguments.items())) for c in calls])
    key = (world.serial, world.version, task.id, sig)
    hit = _EXPECTED_CACHE.get(key)
    if hit is None:
        rep = replay(world, [c for c in calls if c.name in WRITE_TOOLS], run_reads=False)
        failed = [f"{r.call.name}: {r.result.error}" for r in rep.records if r.result and r.result.error]
        hit = Expected(rep, failed, len(calls))
        if len(_EXPECTED_CACHE) > 200_000:
            _EXPECTED_CACHE.clear()
        _EXPECTED_CACHE[key] = hit
    return hit


@dataclass
class Attempt:
    """A trajectory reduced to what the verifier needs."""

    calls: list[ToolCall]
    format_errors: list[str]
    final_answer: str | None
    stopped: str
    recorded_errors: dict[int, bool]  # call index -> the recorded tool result was an error (reads only)


def attempt_from_trajectory(trajectory: Trajectory) -> Attempt:
    """Calls and format errors re-read with THE parser from the assistant messages; the final answer."""
    calls: list[ToolCall] = []
    errors: list[str] = []
    recorded: dict[int, bool] = {}
    final: str | None = None
    id_to_index: dict[str, int] = {}
    msgs = trajectory.messages
    for i, m in enumerate(msgs):
        if m.role == "assistant":
            if TOOL_CALL_OPEN in m.content or (not m.tool_calls and m.content):
                parsed = parse_reply(m.content)
                these = parsed.calls
                errors.extend(parsed.errors)
                if parsed.final_answer:
                    final = parsed.final_answer
            else:
                these = list(m.tool_calls or [])
            if these:
                final = None
            for c in these:
                if c.id:
                    id_to_index[c.id] = len(calls)
                calls.append(c)
        elif m.role == "tool" and m.tool_call_id in id_to_index:
            recorded[id_to_index[m.tool_call_id]] = m.content.lstrip().startswith('{"error"')
    if trajectory.final_answer is not None:
        final = trajectory.final_answer.strip() or None
    return Attempt(calls, errors, final, trajectory.stopped, recorded)


def _shaped(c: dict[str, float]) -> float:
    """Passes in [0.75, 1] (fewer calls score higher); failures in [0, 0.49], credited for progress only.

    Why failures earn nothing for activity or for stopping early: the first composition paid a read-only episode
    (valid calls, few of them) 0.245 and a tried-but-failed write about 0.18, so GRPO from SFT learned to stop
    before acting (`missing_action` 28 -> 34 of 48 held-out tasks in learn_workplace). Credit now comes from the
    rows changed right and from trying the write tools the task needs; a failed write changes nothing and costs
    nothing beyond that, a wrong change is penalised."""
    if c["passed"]:
        return 0.75 + 0.25 * c["call_efficiency"]
    tried = c["write_tools_tried"]
    progress = 0.6 * c["required_changes"] + 0.3 * tried + 0.1 * tried * c["valid_call_rate"]
    penalty = 0.15 * min(c["wrong_changes"], 3.0)
    return max(0.0, min(0.49, 0.49 * progress - penalty))


def verify_attempt(task: TaskRow, attempt: Attempt, world: WorkplaceWorld, *,
                   max_calls: int = DEFAULT_MAX_CALLS) -> RewardResult:
    exp = expected_effect(task, world)
    if exp.failed:
        return RewardResult(score=None, passed=None, reason="ground truth does not replay",
                            error=f"task {task.id}: ground-truth call failed: {exp.failed[0]}")
    noop = not exp.changes
    over_limit = len(attempt.calls) > max_calls
    calls = attempt.calls[:max_calls]
    rep = replay(world, calls, run_reads=False)
    # rows to compare: everything either side wrote
    keys = list(dict.fromkeys(list(exp.changes) + rep.written))
    base = {k: normalise_row(k[0], world.base_row(*k)) for k in keys}
    expected = {k: exp.changes.get(k, base[k]) for k in keys}
    got = {k: rep.final.get(k, base[k]) for k in keys}
    must_change = [k for k in keys if expected[k] != base[k]]
    made = [k for k in must_change if got[k] == expected[k]]
    wrong_keys = [k for k in keys if got[k] != expected[k] and got[k] != base[k]]
    reverted = [k for k in rep.written_set - exp.replay.written_set if got[k] == base[k]]
    state_ok = all(got[k] == expected[k] for k in keys)

    unknown = [r for r in rep.records if r.result and not r.result.known]
    failed_writes = [r for r in rep.records if r.result and r.result.is_write and r.result.error]
    failed_reads = [i for i, r in enumerate(rep.records)
                    if r.result and r.result.known and not r.result.is_write
                    and (r.result.error or attempt.recorded_errors.get(i, False))]
    n_calls = len(calls) + len(attempt.format_errors)
    n_bad = len(attempt.format_errors) + len(unknown) + len(failed_writes) + len(failed_reads)
    gt_tools = {c.name for c in (task.ground_truth_calls or []) if c.name in WRITE_TOOLS}
    used_tools = {r.call.name for r in rep.records if r.result and r.result.is_write and r.result.ok}
    tried_tools = {r.call.name for r in rep.records if r.result and r.result.is_write}
    extra = sorted(rep.written_set - exp.replay.written_set)

    comps: dict[str, float] = {
        "required_changes": (len(made) / len(must_change)) if must_change else (1.0 if not wrong_keys else 0.0),
        "wrong_changes": float(len(wrong_keys) + len(reverted)),
        "valid_call_rate": (1.0 - n_bad / n_calls) if n_calls else 1.0,
        "calls_used": float(len(attempt.calls)),
        "calls_needed": float(exp.calls_needed),
        "call_efficiency": (min(1.0, exp.calls_needed / len(attempt.calls)) if attempt.calls
                            else (1.0 if exp.calls_needed == 0 else 0.0)),
        "failed_writes": float(len(failed_writes)),
        "format_errors": float(len(attempt.format_errors)),
        "answered": 1.0 if attempt.final_answer else 0.0,
        "noop_task": 1.0 if noop else 0.0,
        "write_tools_tried": (len(gt_tools & tried_tools) / len(gt_tools)) if gt_tools else float(not tried_tools),
    }

    def fmt(r: CallRecord) -> str:
        return f"{r.call.name}({', '.join(f'{k}={v!r}' for k, v in list(r.call.arguments.items())[:3])})"

    reason = "pass"
    if attempt.stopped == "step_limit" or over_limit:
        reason = f"step_limit: stopped after {len(attempt.calls)} calls without finishing (limit {max_calls})"
    elif attempt.format_errors:
        reason = f"format_error: {attempt.format_errors[0]}"
    elif unknown:
        reason = f"wrong_tool: {unknown[0].result.error}"
    elif failed_writes:
        r = failed_writes[0]
        reason = f"failed_call: {fmt(r)} -> {r.result.error}"
    elif extra:
        table, key = extra[0]
        what = "created then deleted/reverted" if (table, key) in reverted else "changed"
        reason = f"extra_write: {table} row {key} {what}, which the task does not ask for"
        if noop:
            reason += " (nothing needed to change)"
    elif not state_ok and used_tools - gt_tools:
        reason = (f"wrong_tool: used {sorted(used_tools - gt_tools)} where the task needs "
                  f"{sorted(gt_tools) or 'no write at all'}")
    elif len(made) < len(must_change) and any(got[k] == base[k] for k in must_change):
        missing = [k for k in must_change if got[k] == base[k]]
        reason = f"missing_action: {len(missing)} of {len(must_change)} required changes not made (first: {missing[0][0]} {missing[0][1]})"
    elif not state_ok:
        k = next(k for k in keys if got[k] != expected[k])
        cols = TABLES[k[0]].columns
        diff = [c for i, c in enumerate(cols) if (got[k] or ())[i:i + 1] != (expected[k] or ())[i:i + 1]]
        reason = f"wrong_arguments: {k[0]} row {k[1]} differs from the expected state in {diff or 'existence'}"
    elif noop and not attempt.final_answer:
        reason = "no_answer: nothing needed to change, but no final answer says so"
    passed = reason == "pass"
    comps["passed"] = 1.0 if passed else 0.0
    comps["shaped"] = _shaped(comps)
    return RewardResult(score=1.0 if passed else 0.0, passed=passed, components=comps, reason=reason)


def verify_trajectory(task: TaskRow, trajectory: Trajectory, world: WorkplaceWorld, *,
                      max_calls: int = DEFAULT_MAX_CALLS) -> RewardResult:
    """Judge one trajectory on `world` (the task's initial state, left unchanged). See the module docstring."""
    return verify_attempt(task, attempt_from_trajectory(trajectory), world, max_calls=max_calls)


def verify_calls(task: TaskRow, calls: list[ToolCall], world: WorkplaceWorld, *, final_answer: str | None = "done",
                 max_calls: int = DEFAULT_MAX_CALLS) -> RewardResult:
    """Judge a bare call list (as NeMo Gym does), with an optional final answer."""
    return verify_attempt(task, Attempt(list(calls), [], final_answer, "answer", {}), world, max_calls=max_calls)


def reason_code(result: RewardResult) -> str:
    """The reason code of a result (`pass` or one of REASON_CODES)."""
    return result.reason.split(":", 1)[0].strip()


def shaped_signals(result: RewardResult) -> dict[str, float]:
    """The intermediate signals for a shaped reward (all components except the verdict itself)."""
    return {k: v for k, v in result.components.items() if k not in ("passed",)}
