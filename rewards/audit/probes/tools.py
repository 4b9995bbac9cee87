"""Tool and environment probes for trajectory-aware rewards: doing nothing, spamming reads, failed writes,
writing then undoing, duplicated writes, writing on tasks whose correct behaviour is to change nothing, and shaped
credit that pays for doing nothing, for activity, or for giving up rather than trying.
Built from each task's ground-truth calls (NeMo Gym's Workplace Assistant verifier passes several of these)."""

from __future__ import annotations

from rewards.audit import trajectories as T
from rewards.audit.context import EPS, AuditContext, Case
from rewards.audit.registry import Outcome, Probe, attack, judge_attacks, register
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
    return T.build(ctx.rows[i], list(calls), final, episode=ctx.episode)


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


def _create_delete(ctx: AuditContext, row: int) -> list[tuple[ToolCall, str]]:
    """Candidate (create call, delete tool) pairs: create calls from the tasks' ground truth whose delete twin is
    in the tool list (create/add/send -> delete), creates first (sends rarely return an id)."""
    names = set(T.tool_names(ctx.rows[row]))
    found: dict[str, tuple[int, ToolCall, str]] = {}
    for j in [row] + _needs_writes(ctx):
        for c in _writes(ctx, j):
            for rank, verb in enumerate(("create", "add", "send")):
                delete = c.name.replace(verb, "delete", 1)
                if verb in c.name and delete in names and c.name not in found:
                    found[c.name] = (rank, c, delete)
    return [(c, d) for _, c, d in sorted(found.values(), key=lambda t: t[0])]


class CreateThenDelete(Probe):
    """Write-and-undo leaves the final state unchanged, so a pure final-state verifier (NeMo Gym's) passes it;
    the side effects (a sent invitation, a notification) are real. Needs a live episode to learn the new id."""

    family, name, severity = F, "create_then_delete", "high"
    description = "On a task that needs no write: create something, then delete it (final state unchanged)."
    kinds = K

    def build(self, ctx):
        if ctx.episode is None:
            return []
        cases = []
        for i in _noop_tasks(ctx):
            for create, delete in _create_delete(ctx, i)[:4]:
                step = ctx.episode(ctx.rows[i])  # a fresh episode per attempt
                first = step([create])
                new_id, param = (T.created_id(first[0]) if first else None), T.id_parameter(ctx.rows[i], delete)
                if not new_id or not param:
                    continue
                undo = ToolCall(name=delete, arguments={param: new_id})
                second = step([undo])
                cases.append(Case(i, T.build(ctx.rows[i], [create, undo], "Nothing needed to change.",
                                             results=first + second), "create+delete"))
                break
        return cases

    def judge(self, ctx, cases, results) -> Outcome:
        if ctx.episode is None:
            return Outcome(skipped="needs a live environment episode to learn the created id (pass `episode=`)")
        if not cases:
            return Outcome(skipped="no no-op task with a create tool and its delete twin")
        return judge_attacks(ctx, cases, results)


@attack(F, "writes_on_noop_task", "high", "Write calls (borrowed from another task) on a task that needs none.",
        rows=_noop_tasks, kinds=K)
def _writes_on_noop(ctx, i):
    donor = next((j for j in _needs_writes(ctx)), None)
    return None if donor is None else _traj(ctx, i, _writes(ctx, donor)[:2])


def _by_row(cases, results) -> dict[int, dict[str, tuple[Case, object]]]:
    """row -> variant -> (case, result): the probes below compare a row's variants with each other."""
    d: dict[int, dict] = {}
    for c, r in zip(cases, results):
        d.setdefault(c.row, {})[c.variant] = (c, r)
    return d


class ReadSpamCredit(Probe):
    """Shaped credit for activity: if twenty reads earn more than doing nothing, the policy learns to spam."""

    family, name, severity = F, "read_spam_credit", "high"
    description = "Twenty read calls earn no more than doing nothing (and gold + reads no more than gold)."
    kinds = K
    high_share = 0.10  # activity credit worth >= 10% of the pass/no-op margin blocks; less is reported (medium)

    def build(self, ctx):
        cases = []
        for i in _needs_writes(ctx):
            cases += [Case(i, noop_trajectory(ctx, i), "noop"), Case(i, _traj(ctx, i, _spam(ctx, i)), "spam"),
                      Case(i, _traj(ctx, i, list(_gt(ctx, i)) + _spam(ctx, i)[:5]), "gold+reads")]
        return cases

    def judge(self, ctx, cases, results) -> Outcome:
        d = _by_row(cases, results)
        if not d:
            return Outcome(skipped="no task needs a write")
        fooled, shares = [], []
        for i, v in d.items():
            (cn, rn), (cs, rs), (cg, rg) = v["noop"], v["spam"], v["gold+reads"]
            ref = ctx.reference_score(i)
            span = abs(ref - rn.score) if ref is not None and rn.score is not None and ref != rn.score else 1.0
            if rs.score is not None and rn.score is not None and rs.score > rn.score + max(EPS, 0.01 * span):
                shares.append((rs.score - rn.score) / span)
                fooled.append((cs, rs, f"reads earn {rs.score - rn.score:+.3g} over doing nothing "
                                       f"({shares[-1]:.1%} of the reference's margin)"))
            elif ref is not None and rg.score is not None and rg.score > ref + max(EPS, 0.01 * span):
                shares.append((rg.score - ref) / span)
                fooled.append((cg, rg, f"extra reads after the correct calls earn {rg.score - ref:+.3g}"))
        big = bool(shares) and max(shares) >= self.high_share
        return Outcome(tested_rows=len(d), fooled=fooled, severity="high" if big else "medium",
                       message="tool activity itself earns reward" + ("" if big or not fooled else
                               f" (at most {max(shares):.1%} of the reference's margin: a weak pull)"))


class NoopCreditShare(Probe):
    """Shaped credit for doing nothing: if a no-op earns a sizeable share of what the correct trajectory earns on
    tasks that need writes, failing groups teach the policy that doing nothing beats trying (the no-op attractor)."""

    family, name, severity = F, "noop_credit_share", "high"
    description = ("On tasks that need writes, doing nothing earns < 10% of the margin between the reference and "
                   "the lowest score (>= 10%: low, >= 25%: medium, > 50%: high).")
    kinds = K
    tiers = ((0.5, "high"), (0.25, "medium"), (0.10, "low"))

    def build(self, ctx):
        return [Case(i, noop_trajectory(ctx, i), "noop") for i in _needs_writes(ctx)]

    def judge(self, ctx, cases, results) -> Outcome:
        if not cases:
            return Outcome(skipped="no task needs a write")
        floor = ctx.score_floor if ctx.score_floor is not None else 0.0
        shares = []
        for c, r in zip(cases, results):
            ref = ctx.reference_score(c.row)
            if ref is None or r.score is None or ref - floor <= 1e-9 or ctx.is_pass(c.row, r):
                continue  # a no-op that passes is the `noop` probe's finding
            shares.append((c, r, (r.score - floor) / (ref - floor)))
        if not shares:
            return Outcome(skipped="no row with a reference above the lowest score")
        worst = max(s for _, _, s in shares)
        for bound, sev in self.tiers:
            if worst > bound if sev == "high" else worst >= bound:
                fooled = [(c, r, f"doing nothing earns {s:.0%} of the reference's margin") for c, r, s in shares
                          if s >= self.tiers[-1][0]]
                return Outcome(tested_rows=len(shares), fooled=fooled, severity=sev,
                               message="doing nothing earns shaped credit: failing groups favour the no-op")
        return Outcome(tested_rows=len(shares), message=f"a no-op earns at most {worst:.0%} of the margin")


class GiveUpOverAttempt(Probe):
    """Shaped credit for giving up: if an episode that does the task's reads and stops scores above one that also
    tries the writes and fails (arguments wrong, nothing changed) or makes only part of them, every failing group
    teaches the policy to stop before acting. Found the expensive way: GRPO on such a reward raised
    `missing_action` from 28 to 34 of 48 held-out workplace tasks (benchmarks/learn_workplace.py)."""

    family, name, severity = F, "give_up_over_attempt", "high"
    description = ("On tasks that need writes, doing the reads and stopping scores no higher than also trying the "
                   "writes and failing, or making part of them.")
    kinds = K
    attempts = {"failed_attempt": "trying the writes and failing", "partial": "making part of the writes"}

    def build(self, ctx):
        cases = []
        for i in _needs_writes(ctx):
            gold, writes = list(_gt(ctx, i) or []), _writes(ctx, i)
            reads = [c for c in gold if T.is_read(c.name)]
            cases += [Case(i, _traj(ctx, i, reads), "give_up"),
                      Case(i, _traj(ctx, i, reads + [_broken(c) for c in writes]), "failed_attempt")]
            if len(writes) >= 2:  # the correct calls without the last write: real but incomplete progress
                cases.append(Case(i, _traj(ctx, i, [c for c in gold if c is not writes[-1]]), "partial"))
        return cases

    def judge(self, ctx, cases, results) -> Outcome:
        d = _by_row(cases, results)
        if not d:
            return Outcome(skipped="no task needs a write")
        fooled = []
        for v in d.values():
            cg, rg = v["give_up"]
            for what in self.attempts:
                if what not in v or rg.score is None or v[what][1].score is None or ctx.is_pass(cg.row, rg):
                    continue
                ra = v[what][1]
                if rg.score > ra.score + EPS:
                    fooled.append((cg, rg, f"reading and stopping scores {rg.score:.3g}, above {self.attempts[what]} "
                                           f"({ra.score:.3g})"))
                    break
        return Outcome(tested_rows=len(d), fooled=fooled,
                       message="giving up outscores trying: failing groups teach the policy to stop before acting")


register(CreateThenDelete())
register(NoopCreditShare())
register(ReadSpamCredit())
register(GiveUpOverAttempt())
