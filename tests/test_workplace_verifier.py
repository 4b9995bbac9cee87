"""The workplace verifier: every reason code from a crafted trajectory, the documented judgements of the known
reward holes (no-op exploit, read spam, failed writes, create-then-delete), shaping dominance, the step limit."""

from __future__ import annotations

import time

import pytest

from rewards.environments.loop import ToolLoop
from rewards.environments.workplace import REASON_CODES, WorkplaceEnv, reason_code, verify_trajectory
from schemas.messages import Message, ToolCall
from schemas.task import TaskRow
from schemas.tool_prompt import format_tool_call
from schemas.trajectory import Trajectory
from workplace_testdata import small_world

WORLD = small_world()


def task(tid: str, calls: list[tuple[str, dict]], answer: str = "Done.") -> TaskRow:
    return TaskRow(id=tid, prompt=[Message(role="user", content=tid)], answer=answer,
                   ground_truth_calls=[ToolCall(name=n, arguments=a) for n, a in calls])


REPLY = task("reply", [("email_search_emails", {"query": "ana login"}),
                       ("email_reply_email", {"email_id": "00000002", "body": "Thanks"})])
REASSIGN = task("reassign", [("customer_relationship_manager_update_customer",
                              {"customer_id": c, "field": "assigned_to_email", "new_value": "dev.rao@lumen.io"})
                             for c in ("00000001", "00000002")])
NOOP = task("noop", [("calendar_search_events", {"query": "cara"})], answer="No meetings with Cara; nothing changed.")


def call(name: str, **args) -> str:
    return format_tool_call(name, args)


def run(t: TaskRow, replies: list[str], **limits) -> tuple[Trajectory, object]:
    """A scripted policy through the real loop (parser, environment), then the verdict."""
    loop = ToolLoop(t, WorkplaceEnv(WORLD), **limits)
    it = iter(replies)
    while not loop.done:
        loop.step(next(it, "Done."))
    traj = loop.trajectory()
    return traj, verify_trajectory(t, traj, WORLD)


R_OK = call("email_reply_email", email_id="00000002", body="Thanks")
U1 = call("customer_relationship_manager_update_customer", customer_id="00000001", field="assigned_to_email",
          new_value="dev.rao@lumen.io")
U2 = call("customer_relationship_manager_update_customer", customer_id="00000002", field="assigned_to_email",
          new_value="dev.rao@lumen.io")

CRAFTED = {
    "pass": (REPLY, [call("email_search_emails", query="ana login"), R_OK, "I replied."]),
    "pass_case": (REPLY, [call("email_reply_email", email_id="00000002", body="THANKS"), "Replied."]),
    "pass_multi": (REASSIGN, [U2 + U1, "Reassigned both."]),
    "pass_noop": (NOOP, [call("calendar_search_events", query="cara"), "No meetings with Cara, nothing to cancel."]),
    "format_error": (REPLY, ['<tool_call>{"name": "email_reply_email", "arguments": {"email_id": </tool_call>', R_OK,
                             "Replied."]),
    "wrong_tool": (REPLY, [call("email_nuke_inbox"), R_OK, "Replied."]),
    "wrong_tool_kind": (REPLY, [call("email_send_email", recipient="ana.lopez@lumen.io", subject="Thanks",
                                     body="Thanks"), "Sent."]),
    "wrong_arguments": (REPLY, [call("email_reply_email", email_id="00000002", body="Thanks a lot"), "Replied."]),
    "missing_action": (REASSIGN, [U1, "Reassigned."]),
    "extra_write": (REASSIGN, [U1 + U2 + call("project_management_delete_task", task_id="00000002"), "Done."]),
    "failed_call": (REASSIGN, [call("customer_relationship_manager_update_customer", customer_id="00000001",
                                    field="assigned_to_email", new_value="nobody@nowhere.com"), U1 + U2, "Done."]),
    "no_answer": (NOOP, [call("calendar_search_events", query="cara"), ""]),
    "step_limit": (REPLY, [call("email_search_emails", query="ana")] * 20),
}


@pytest.fixture(scope="module")
def verdicts():
    return {k: run(t, replies, max_turns=6) for k, (t, replies) in CRAFTED.items()}


def test_every_reason_code_is_produced(verdicts):
    codes = {k: reason_code(r) for k, (_, r) in verdicts.items()}
    for k, code in codes.items():
        expected = "pass" if k.startswith("pass") else k.removesuffix("_kind")
        assert code == expected, (k, verdicts[k][1].reason)
    assert set(REASON_CODES) <= set(codes.values())
    for k, (_, r) in verdicts.items():
        assert r.passed == k.startswith("pass") and r.score == (1.0 if r.passed else 0.0)
        assert r.reason and set(r.components) >= {"required_changes", "wrong_changes", "valid_call_rate",
                                                  "calls_used", "calls_needed", "call_efficiency", "shaped"}


def test_shaped_score_keeps_dominance(verdicts):
    passing = [r.components["shaped"] for _, r in verdicts.values() if r.passed]
    failing = [r.components["shaped"] for _, r in verdicts.values() if not r.passed]
    assert min(passing) > max(failing)
    missing = verdicts["missing_action"][1].components
    assert missing["required_changes"] == 0.5 and missing["wrong_changes"] == 0


def test_noop_exploit_is_judged_as_documented():
    # doing nothing on a task that needs changes: NeMo Gym's hole does not apply, it fails as missing_action
    _, r = run(REASSIGN, ["Done, all reassigned!"])
    assert not r.passed and reason_code(r) == "missing_action" and r.components["required_changes"] == 0.0
    # on a no-op task, doing nothing passes only with a final answer (NeMo Gym scores 1 even without one)
    _, r = run(NOOP, ["Nothing matched, so I changed nothing."])
    assert r.passed
    _, r = run(NOOP, [""])
    assert reason_code(r) == "no_answer"
    # and any write on a no-op task fails
    _, r = run(NOOP, [call("calendar_delete_event", event_id="00000001"), "Cleaned up."])
    assert reason_code(r) == "extra_write" and "nothing needed to change" in r.reason


def test_read_call_spam_passes_but_costs_efficiency():
    spam = [call("email_search_emails", query="ana")] * 5 + [R_OK, "Replied."]
    _, spammy = run(REPLY, spam, max_turns=10)
    _, clean = run(REPLY, CRAFTED["pass"][1])
    assert spammy.passed and clean.passed
    assert spammy.components["call_efficiency"] < clean.components["call_efficiency"]
    assert spammy.components["shaped"] < clean.components["shaped"]


def test_failed_write_fails_even_when_the_final_state_is_right():
    _, r = run(REPLY, [call("email_reply_email", email_id="2", body="Thanks"), R_OK, "Replied."])
    assert reason_code(r) == "failed_call" and r.components["required_changes"] == 1.0


def test_create_then_delete_is_an_extra_write():
    replies = [call("calendar_create_event", event_name="tmp", participant_email="ana.lopez@lumen.io",
                    event_start="2026-05-21 10:00:00", duration="30"),
               call("calendar_delete_event", event_id="00000003"), R_OK, "Replied."]
    _, r = run(REPLY, replies)
    assert reason_code(r) == "extra_write" and "created then deleted" in r.reason
    assert r.components["wrong_changes"] == 1.0


def test_verifier_leaves_the_world_unchanged_and_is_deterministic():
    before = WORLD.tables()
    traj, r1 = run(REASSIGN, [U1 + U2, "Done."])
    r2 = verify_trajectory(REASSIGN, traj, WORLD)
    assert WORLD.tables() == before and r1 == r2 and r1.passed


def test_ten_thousand_call_trajectory_stops_at_the_step_limit():
    # a policy that would call tools forever: the loop stops it
    loop = ToolLoop(REPLY, WorkplaceEnv(WORLD), max_turns=10_000, max_calls=32)
    t0 = time.time()
    burst = "\n".join([call("email_search_emails", query="ana")] * 16)
    while not loop.done:
        loop.step(burst)
    assert loop.stopped == "step_limit" and loop.calls == 32
    # an imported trajectory that carries 10,000 calls is judged step_limit without replaying them all
    calls = [ToolCall(name="email_search_emails", arguments={"query": "x"}) for _ in range(10_000)]
    traj = Trajectory(task_id="reply", messages=[Message(role="assistant", content="", tool_calls=calls)],
                      final_answer="done")
    r = verify_trajectory(REPLY, traj, WORLD)
    assert reason_code(r) == "step_limit" and not r.passed
    assert time.time() - t0 < 5.0


def test_ground_truth_that_does_not_replay_is_an_error_not_a_zero():
    broken = task("broken", [("email_delete_email", {"email_id": "00000099"})])
    traj, _ = run(REPLY, ["Done."])
    r = verify_trajectory(broken, traj, WORLD)
    assert r.is_error and r.score is None and "00000099" not in r.reason and "not found" in r.error


def test_caches_follow_direct_changes_to_the_world():
    from rewards.environments.workplace import execute
    from workplace_testdata import small_world as fresh

    w = fresh()
    t = task("cache", [("project_management_delete_task", {"task_id": "00000002"})])
    ok = Trajectory(task_id="cache", messages=[Message(role="assistant", content="", tool_calls=[
        ToolCall(name="project_management_delete_task", arguments={"task_id": "00000002"})])], final_answer="ok")
    assert verify_trajectory(t, ok, w).passed
    execute(w, ToolCall(name="project_management_delete_task", arguments={"task_id": "00000002"}))
    r = verify_trajectory(t, ok, w)  # the world changed underneath: ground truth no longer replays
    assert r.is_error and "not found" in r.error
