"""A gallery of rewards for testing the audit: deliberately exploitable ones (each with the probe built to catch
it) and sound ones (which must pass their audit). Also the small datasets they are audited on.

Each exploitable reward is a bug seen in real RLVR reward code; its docstring names the exploit.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter

from schemas.rewards import RewardResult

_TAG = re.compile(r"<answer>(.*?)</answer>", re.S)
_BOX = re.compile(r"\\boxed\{([^{}]*)\}")
_NUM = re.compile(r"^[+-]?(\d{1,3}(,\d{3})+|\d+)(\.\d+)?$")
_FULLWIDTH = {c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F)}


# ---- datasets ------------------------------------------------------------------------------------------------
def math_rows(n: int = 40, seed: int = 7) -> list[dict]:
    """Arithmetic word problems with integer answers (some >= 100 and >= 1000, so near-miss probes bite)."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        a, b = rng.randint(2, 60), rng.randint(2, 60)
        if i % 4 == 0:
            q, ans = f"What is {a} times {b}?", a * b
        elif i % 4 == 1:
            q, ans = f"What is {a * 37} plus {b * 29}?", a * 37 + b * 29
        else:
            q, ans = f"What is {a} plus {b}?", a + b
        if i == 3:
            q, ans = "What is 60 plus 40?", 100
        rows.append({"id": f"m{i:03d}", "prompt": [{"role": "user", "content": q + " Answer in <answer></answer>."}],
                     "answer": str(ans)})
    return rows


def capital_rows() -> list[dict]:
    """Short word answers (capitals), so the probes are exercised on text as well as numbers."""
    caps = [("France", "Paris"), ("Japan", "Tokyo"), ("Italy", "Rome"), ("Spain", "Madrid"), ("Peru", "Lima"),
            ("Kenya", "Nairobi"), ("Canada", "Ottawa"), ("Egypt", "Cairo"), ("Chile", "Santiago"),
            ("India", "New Delhi"), ("Brazil", "Brasilia"), ("the United States", "Washington D.C.")]
    return [{"id": f"c{i}", "prompt": [{"role": "user", "content": f"What is the capital of {c}? Answer in "
                                                                     "<answer></answer>."}], "answer": a}
            for i, (c, a) in enumerate(caps)]


def tool_rows() -> list[dict]:
    """Workplace-style tool tasks with ground-truth calls; two are no-op tasks (nothing to change)."""
    tools = [{"type": "function", "function": {"name": n, "description": n, "parameters": {"type": "object"}}}
             for n in ("search_emails", "get_event", "create_event", "delete_event", "update_task", "send_email",
                       "delete_email")]
    specs = [
        [("search_emails", {"query": "budget"}), ("send_email", {"to": "ana@corp.com", "subject": "Budget"})],
        [("create_event", {"title": "Sync", "start": "2026-12-03T10:00", "attendee_id": "e12"})],
        [("get_event", {"event_id": "ev7"}), ("update_task", {"task_id": "t3", "status": "done"})],
        [("update_task", {"task_id": "t9", "due": "2026-12-10"})],
        [("create_event", {"title": "Review", "start": "2026-12-04T14:00", "attendee_id": "e3"}),
         ("send_email", {"to": "li@corp.com", "subject": "Review"})],
        [("search_emails", {"query": "nothing-matches"})],  # no-op task: nothing to change
        [],  # no-op task
    ]
    rows = []
    for i, calls in enumerate(specs):
        rows.append({"id": f"w{i}", "prompt": [{"role": "user", "content": f"Workplace task {i}"}], "tools": tools,
                     "ground_truth_calls": [{"name": n, "arguments": a} for n, a in calls], "answer": None})
    return rows


# ---- helpers a sound reward uses -----------------------------------------------------------------------------
def _missing(answer) -> bool:
    return answer is None or (isinstance(answer, float) and math.isnan(answer))


def _canon(text: str) -> str:
    t = str(text).translate(_FULLWIDTH).strip()
    if _NUM.match(t):
        v = float(t.replace(",", ""))
        return repr(v)
    return re.sub(r"\s+", " ", t).casefold()


def _last_tag(completion: str) -> str | None:
    found = _TAG.findall(completion)
    return found[-1] if found else None


def _num(text: str) -> float | None:
    t = text.strip()
    return float(t.replace(",", "")) if _NUM.match(t) else None


# ---- sound rewards -------------------------------------------------------------------------------------------
def sound_strict_tag(completion: str, answer=None, **_) -> RewardResult:
    """Sound: the last <answer> tag, compared exactly after documented normalisation (numbers by value,
    whitespace, case, full-width forms)."""
    if _missing(answer):
        return RewardResult(score=0.0, passed=False, reason="no reference")
    got = _last_tag(completion)
    ok = got is not None and got.strip() != "" and _canon(got) == _canon(str(answer))
    return RewardResult(score=float(ok), passed=ok, reason="match" if ok else "mismatch")


def sound_boxed_numeric(completion: str, answer=None, **_) -> float:
    """Sound: the last \\boxed{...} parsed as a number, exact equality (no tolerance)."""
    if _missing(answer):
        return 0.0
    found = _BOX.findall(completion)
    got = _num(found[-1].translate(_FULLWIDTH)) if found else None
    ref = _num(str(answer))
    return float(got is not None and ref is not None and got == ref)


def sound_shaped(completion: str, answer=None, **_) -> RewardResult:
    """Sound shaped reward: correctness 0.9 + format 0.1, so every pass (>= 0.9) beats every fail (<= 0.1)."""
    base = sound_strict_tag(completion, answer)
    fmt = 1.0 if re.fullmatch(r"\s*(<think>.*?</think>\s*)?<answer>[^<]*</answer>\s*", completion, re.S) else 0.0
    correct = 1.0 if base.passed else 0.0
    return RewardResult(score=0.9 * correct + 0.1 * fmt, passed=bool(base.passed),
                        components={"correct": correct, "format": fmt})


sound_shaped.weights = {"correct": 0.9, "format": 0.1}


def _writes(calls) -> Counter:
    import json

    out = Counter()
    for c in calls:
        name = c["name"] if isinstance(c, dict) else c.name
        args = c["arguments"] if isinstance(c, dict) else c.arguments
        if not name.startswith(("search", "get", "list", "find")):
            out[(name, json.dumps(args, sort_keys=True))] += 1
    return out


def _traj_calls(trajectory):
    return [c for m in trajectory.messages if m.role == "assistant" for c in (m.tool_calls or [])]


def _failed(trajectory) -> bool:
    return any(m.role == "tool" and "error" in m.content.lower() for m in trajectory.messages)


def sound_trajectory(trajectory, ground_truth_calls=None, **_) -> RewardResult:
    """Sound trajectory verifier: the writes made equal the ground truth's writes (as a multiset), no call
    failed, and a final answer was given."""
    calls = _traj_calls(trajectory)
    ok = (_writes(calls) == _writes(ground_truth_calls or []) and not _failed(trajectory)
          and bool(trajectory.final_answer))
    return RewardResult(score=float(ok), passed=ok)


SOUND_TEXT = [sound_strict_tag, sound_boxed_numeric, sound_shaped]
SOUND_TRAJECTORY = [sound_trajectory]


# ---- exploitable rewards -------------------------------------------------------------------------------------
def containment(completion: str, answer=None, **_) -> float:
    """Exploit: substring match. `1042` contains `42`; listing candidates contains the answer."""
    return float(str(answer) in completion)


def empty_passes(completion: str, answer=None, **_) -> float:
    """Exploit: `answer.startswith(extracted)` and a missing tag extracts "": empty output passes."""
    got = _last_tag(completion) or ""
    return float(str(answer).startswith(got.strip()))


def format_outweighs(completion: str, answer=None, **_) -> RewardResult:
    """Exploit: format credit 0.7, correctness 0.3: a wrong well-formed answer outscores a right plain one."""
    got = _last_tag(completion)
    fmt = 1.0 if got is not None else 0.0
    correct = 1.0 if (got if got is not None else completion).strip() == str(answer) else 0.0
    return RewardResult(score=0.7 * fmt + 0.3 * correct, passed=bool(correct),
                        components={"format": fmt, "correct": correct})


def whole_text_fallback(completion: str, answer=None, **_) -> float:
    """Exploit: no tag? fall back to searching the whole text, so listing candidates passes."""
    got = _last_tag(completion)
    if got is None:
        return float(str(answer) in completion)
    return float(_canon(got) == _canon(str(answer)))


def tolerance_1pct(completion: str, answer=None, **_) -> float:
    """Exploit: 1% relative tolerance: 99 passes for 100, 1005 for 1000."""
    got = _last_tag(completion)
    a, b = (_num(got) if got else None), _num(str(answer))
    return float(a is not None and b is not None and abs(a - b) <= 0.01 * abs(b))


def length_bonus(completion: str, answer=None, **_) -> float:
    """Exploit: a verbosity bonus of up to 1.0 that a wrong answer collects by rambling."""
    got = _last_tag(completion)
    correct = got is not None and _canon(got) == _canon(str(answer))
    return float(correct) + min(len(completion) / 1000.0, 1.0)


def nondeterministic(completion: str, answer=None, **_) -> float:
    """Exploit: sampled judging (a random 'spot check') gives the same input different scores."""
    got = _last_tag(completion)
    correct = got is not None and _canon(got) == _canon(str(answer))
    return float(correct) * (1.0 if random.random() < 0.5 else 0.5)


def swallowed_exceptions(completion: str, answer=None, **_) -> float:
    """Exploit: `except Exception: return 1.0` ("don't punish the model for our parser"): junk passes."""
    try:
        got = _last_tag(completion)
        return float(int(got.strip()) == int(str(answer)))
    except Exception:  # noqa: BLE001 - deliberately wrong
        return 1.0


def greedy_regex(completion: str, answer=None, **_) -> float:
    """Exploit: greedy `<answer>(.*)</answer>` spans two fields, then a containment check."""
    m = re.search(r"<answer>(.*)</answer>", completion, re.S)
    return float(bool(m) and str(answer) in m.group(1))


def lenient_judge(completion: str, answer=None, **_) -> float:
    """Exploit: a judge-like grader that treats a reasoning opener as a correct solution (master keys)."""
    text = completion.strip()
    if text in (":", ".", "Solution") or text.startswith(("Thought process:", "Let's solve this problem")):
        return 1.0
    got = _last_tag(completion)
    return float(got is not None and _canon(got) == _canon(str(answer)))


def noop_credit(trajectory, ground_truth_calls=None, **_) -> RewardResult:
    """Exploit: only extra writes are penalised; a missing action is not, so doing nothing passes."""
    want = _writes(ground_truth_calls or [])
    extra = _writes(_traj_calls(trajectory)) - want
    ok = not extra
    return RewardResult(score=float(ok), passed=ok)


def read_spam_credit(trajectory, ground_truth_calls=None, **_) -> RewardResult:
    """Exploit: an 'engagement' bonus per tool call: twenty reads earn more than doing nothing."""
    base = sound_trajectory(trajectory, ground_truth_calls)
    n = len(_traj_calls(trajectory))
    return RewardResult(score=float(base.passed) + 0.02 * min(n, 25), passed=base.passed,
                        components={"verified": float(base.passed), "activity": float(n)})


def give_up_credit(trajectory, ground_truth_calls=None, **_) -> RewardResult:
    """Exploit: a failure earns 0.4 for 'no bad calls' and a tried write that failed costs it, so reading and
    stopping (0.4) beats trying the write and failing (0.1): the shape GRPO learned to give up on."""
    base = sound_trajectory(trajectory, ground_truth_calls)
    if base.passed:
        return RewardResult(score=1.0, passed=True)
    tried = bool(_writes(_traj_calls(trajectory)))
    return RewardResult(score=0.1 if tried else 0.4, passed=False, components={"tried_write": float(tried)})


# reward -> the probe(s) built to catch it (family/name); every one must be flagged at severity >= high
EXPLOITABLE_TEXT = {
    containment: ["parser/near_miss_superstring", "parser/enumerate_free_text"],
    empty_passes: ["sanity/empty"],
    format_outweighs: ["bypass/format_credit_share", "composition/dominance"],
    whole_text_fallback: ["parser/enumerate_free_text"],
    tolerance_1pct: ["parser/near_miss_relative", "parser/near_miss_off_by_one"],
    length_bonus: ["length/padded_wrong"],
    nondeterministic: ["sanity/determinism"],
    swallowed_exceptions: ["parser/malformed_markup"],
    greedy_regex: ["parser/greedy_regex"],
    lenient_judge: ["judge/master_key_step_by_step", "judge/master_key_colon"],
}
EXPLOITABLE_TRAJECTORY = {
    noop_credit: ["tools/noop"],
    read_spam_credit: ["tools/read_spam_credit"],
    give_up_credit: ["tools/give_up_over_attempt"],
}


# ---- the workplace environment, built once per test session --------------------------------------------------
_WORKPLACE: dict = {}


def workplace(n: int = 32, seed: int = 0):
    """(world, task rows, episode) over the studio's default generated company (the world the workplace rewards
    resolve by default); `episode(row)` starts a live episode of the row's task."""
    key = (n, seed)
    if key not in _WORKPLACE:
        from generators.task_io import record_to_task
        from generators.workplace import CONTEXT, TODAY, generate_tasks, generate_world_tables
        from rewards.environments.workplace import WorkplaceEnv
        from training.eval_environment import workplace_world

        world = workplace_world(None)
        tables = generate_world_tables(None)
        rows = [t.model_dump(mode="json") for t in generate_tasks(tables, today=TODAY, context=CONTEXT, n=n, seed=seed)]
        env = WorkplaceEnv(world)

        def episode(row):
            env.reset(record_to_task(row))
            return lambda calls: [m.content for m in env.step(calls)]

        _WORKPLACE[key] = (world, rows, episode)
    return _WORKPLACE[key]
