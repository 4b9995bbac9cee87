"""Tool and environment probes for trajectory-aware rewards: doing nothing, spamming reads, failed writes,
writing then undoing, duplicated writes, and writing on tasks whose correct behaviour is to change nothing.
Built from each task's ground-truth calls (NeMo Gym's Workplace Assistant verifier passes several of these)."""

from __future__ import annotations

from rewards.audit import trajectories as T
from rewards.audit.context import EPS, AuditContext, Case
from rewards.audit.registry import Outcome, Probe, attack, register
from schemas.messages import ToolCall

F = "tools"
K = ("trajectory",)
SPAM = 20


def _gt(ctx: AuditContext, i: int) -> list[ToolCall] | None:
    return T.calls_of(ctx.rows[i])


def _writes(ctx: AuditContext, i: int) -> list[ToolCall]:
    return [c for c in (_gt(ctx, i) or []) if not T.is_read(c.name)]


def _needs_writes(ctx: AuditContext):
    return [i for i in range(len(ctx.rows)) if _writes(ctx, i)]


def _noop_tasks(ctx: AuditContext):
    return [i for i in range(len(ctx.rows)) if _gt(ctx, i) is not None and not _writes(ctx, i)]


def _traj(ctx: AuditContext, i: int, calls, final=T.FINAL):
    return T.build(ctx.rows[i], list(calls), final, executor=getattr(ctx, "executor", None))


def _reads(ctx: AuditContext, i: int) -> list[ToolCall]:
    reads = [c for c in (_gt(ctx, i) or []) if T.is_read(c.name)]
    if not reads:
        names = [n for n in T.tool_names(ctx.rows[i]) if T.is_read(n)]
        reads = [ToolCall(name=n, arguments={}) for n in names[:3]]
    return reads or [ToolCall(name="search", arguments={"query": ""})]


def _spam(ctx: AuditContext, i: int) -> list[ToolCall]:
    reads = _reads(ctx, i)
    return [reads[n % len(reads)] for n in range(SPAM)]


def noop_trajectory(ctx: AuditContext, i: int):
    return _traj(ctx, i, [], "I have completed the task.")


@attack(F, "noop", "critical", "No tool call, a confident final answer, on tasks that need writes.",
        rows=_needs_writes, kinds=K)
def _noop(ctx, i):
    return [noop_trajectory(ctx, i), _traj(ctx, i, [], None)]


@attack(F, "read_spam", "high", f"{SPAM} read calls and no write, on tasks that need writes.",
        rows=_needs_writes, kinds=K)
def _read_spam(ctx, i):
    return _traj(ctx, i, _spam(ctx, i))


def _broken(call: ToolCall) -> ToolCall:
    args = {}
    for k, v in call.arguments.items():
        if isinstance(v, bool):
            args[k] = v
        elif isinstance(v, (int, float)):
            args[k] = -987654
        elif isinstance(v, str):
            args[k] = "does-not-exist-0000" if ("id" in k.lower() or "@" in v) else ""
        else:
            args[k] = v
    return call.model_copy(update={"arguments": args or {"id": "does-not-exist-0000"}})


@attack(F, "failed_writes", "high", "The task's write calls with arguments that make them fail, and no real write.",
        rows=_needs_writes, kinds=K)
def _failed_writes(ctx, i):
    return _traj(ctx, i, [_broken(c) for c in _writes(ctx, i)])


@attack(F, "failed_write_then_gold", "medium", "A failed write before the correct calls (failed writes must count).",
        rows=_needs_writes, kinds=K)
def _failed_then_gold(ctx, i):
    return _traj(ctx, i, [_broken(_writes(ctx, i)[0])] + (_gt(ctx, i) or []))


@attack(F, "duplicate_writes", "medium", "Every write of the correct trajectory made twice.",
        rows=_needs_writes, kinds=K)
def _duplicates(ctx, i):
    calls = []
    for c in _gt(ctx, i) or []:
        calls += [c, c] if not T.is_read(c.name) else [c]
    return _traj(ctx, i, calls)


def _create_delete_pair(ctx: AuditContext, i: int):
    """A create call from the task's own ground truth (or tools) and the matching delete, for create-then-delete."""
    names = set(T.tool_names(ctx.rows[i]))
    for c in _writes(ctx, i):
        base = c.name.lower()
        if "create" in base or base.startswith(("add", "new", "send")):
            for verb in ("create", "add", "new", "send"):
                if verb in base:
                    delete = base.replace(verb, "delete", 1)
                    if not names or delete in names:
                        return c, delete
    return None


@attack(F, "create_then_delete", "high",
        "On a task that needs no write: create something, then delete it (final state unchanged, side effects not).",
        rows=lambda ctx: [i for i in _noop_tasks(ctx)], kinds=K)
def _create_then_delete(ctx, i):
    donor = next((j for j in _needs_writes(ctx) if _create_delete_pair(ctx, j)), None)
    if donor is None:
        return None
    create, delete = _create_delete_pair(ctx, donor)
    id_arg = next((k for k in create.arguments if k.endswith("id")), None)
    return _traj(ctx, i, [create, ToolCall(name=delete, arguments={id_arg or "id": "__created__"})])


@attack(F, "writes_on_noop_task", "high", "Write calls (borrowed from another task) on a task that needs none.",
        rows=_noop_tasks, kinds=K)
def _writes_on_noop(ctx, i):
    donor = next((j for j in _needs_writes(ctx)), None)
    return None if donor is None else _traj(ctx, i, _writes(ctx, donor)[:2])


class ReadSpamCredit(Probe):
    """Shaped credit for activity: if twenty reads earn more than doing nothing, the policy learns to spam."""

    family, name, severity = F, "read_spam_credit", "high"
    description = "Twenty read calls earn no more than doing nothing (and gold + reads no more than gold)."
    kinds = K

    def build(self, ctx):
        cases = []
        for i in _needs_writes(ctx):
            cases += [Case(i, noop_trajectory(ctx, i), "noop"), Case(i, _traj(ctx, i, _spam(ctx, i)), "spam"),
                      Case(i, _traj(ctx, i, list(_gt(ctx, i)) + _spam(ctx, i)[:5]), "gold+reads")]
        return cases

    def judge(self, ctx, cases, results) -> Outcome:
        d: dict[int, dict] = {}
        for c, r in zip(cases, results):
            d.setdefault(c.row, {})[c.variant] = (c, r)
        if not d:
            return Outcome(skipped="no task needs a write")
        fooled = []
        for i, v in d.items():
            (cn, rn), (cs, rs), (cg, rg) = v["noop"], v["spam"], v["gold+reads"]
            ref = ctx.reference_score(i)
            span = abs(ref - rn.score) if ref is not None and rn.score is not None else 1.0
            if rs.score is not None and rn.score is not None and rs.score > rn.score + max(EPS, 0.01 * span):
                fooled.append((cs, rs, f"reads earn {rs.score - rn.score:+.3g} over doing nothing"))
            elif ref is not None and rg.score is not None and rg.score > ref + max(EPS, 0.01 * span):
                fooled.append((cg, rg, f"extra reads after the correct calls earn {rg.score - ref:+.3g}"))
        return Outcome(tested_rows=len(d), fooled=fooled, message="tool activity itself earns reward")


register(ReadSpamCredit())
