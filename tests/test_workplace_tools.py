"""Every workplace tool's happy path and error path, business rules, and argument limits, on a real SQLite world."""

from __future__ import annotations

import json

import pytest

from rewards.environments.workplace import execute
from rewards.environments.workplace.tools import IMPLEMENTATIONS
from schemas.messages import ToolCall
from schemas.workplace import TOOLS, WRITE_TOOLS, tool_specs
from workplace_testdata import TODAY, small_world


def run(world, tool, /, **args):
    return execute(world, ToolCall(name=tool, arguments=args))


# (tool, happy-path arguments, a check of the output, error-path arguments, a fragment of the error)
CASES = [
    ("company_directory_find_email_address", {"name": "ana"}, lambda o: o == ["ana.lopez@lumen.io"],
     {"name": ""}, "name not provided"),
    ("email_get_email_information_by_id", {"email_id": "00000002", "field": "subject"},
     lambda o: o == {"subject": "Update on Fix login flow"}, {"email_id": "00000099", "field": "subject"}, "not found"),
    ("email_search_emails", {"query": "ana login"}, lambda o: [e["email_id"] for e in o["emails"]] == ["00000002", "00000001"],
     {"query": "x", "date_min": "yesterday"}, "expected YYYY-MM-DD"),
    ("email_send_email", {"recipient": "Ben.Ode@lumen.io", "subject": "Hi", "body": "Hello"},
     lambda o: o == "Email sent successfully.", {"recipient": "not-an-address", "subject": "Hi", "body": "x"}, "invalid email"),
    ("email_delete_email", {"email_id": "00000003"}, lambda o: "deleted" in o, {"email_id": "3"}, "8 digits"),
    ("email_forward_email", {"email_id": "00000001", "recipient": "cara.sun@lumen.io"}, lambda o: "forwarded" in o,
     {"email_id": "00000042", "recipient": "cara.sun@lumen.io"}, "not found"),
    ("email_reply_email", {"email_id": "00000002", "body": "Thanks"}, lambda o: "replied" in o,
     {"email_id": "00000002"}, "body"),
    ("calendar_get_event_information_by_id", {"event_id": "00000001", "field": "duration"}, lambda o: o == {"duration": "30"},
     {"event_id": "00000001", "field": "color"}, "field"),
    ("calendar_search_events", {"time_min": "2026-05-20", "time_max": "2026-05-20"},
     lambda o: [e["event_id"] for e in o["events"]] == ["00000002", "00000001"], {"time_min": "someday"}, "time_min"),
    ("calendar_create_event", {"event_name": "Plan", "participant_email": "ana.lopez@lumen.io",
                               "event_start": "2026-05-21 09:00:00", "duration": "60"}, lambda o: o == "00000003",
     {"event_name": "Plan", "participant_email": "ana.lopez@lumen.io", "event_start": "2026-05-21 17:30:00",
      "duration": "60"}, "end by 18:00"),
    ("calendar_delete_event", {"event_id": "00000002"}, lambda o: "deleted" in o, {"event_id": "00000077"}, "not found"),
    ("calendar_update_event", {"event_id": "00000001", "field": "event_name", "new_value": "Sync"},
     lambda o: "updated" in o, {"event_id": "00000001", "field": "event_start", "new_value": "2026-05-21 07:00:00"},
     "start at or after 09:00"),
    ("analytics_get_visitor_information_by_id", {"visitor_id": "1001"}, lambda o: len(o) == 2,
     {"visitor_id": "9999"}, "not found"),
    ("analytics_create_plot", {"time_min": "2026-05-01", "time_max": "2026-05-02", "value_to_plot": "total_visits",
                               "plot_type": "bar"}, lambda o: o == "plots/2026-05-01_2026-05-02_total_visits_bar.png",
     {"time_min": "2026-05-02", "time_max": "2026-05-01", "value_to_plot": "total_visits", "plot_type": "bar"}, "after"),
    ("analytics_total_visits_count", {"time_min": "2026-05-01", "time_max": "2026-05-02"},
     lambda o: o == {"2026-05-01": 2, "2026-05-02": 1}, {"time_min": "May"}, "YYYY-MM-DD"),
    ("analytics_engaged_users_count", {}, lambda o: o == {"2026-05-01": 1, "2026-05-02": 0}, {"time_max": 5.5},
     "YYYY-MM-DD"),
    ("analytics_traffic_source_count", {"traffic_source": "direct"}, lambda o: o == {"2026-05-01": 1, "2026-05-02": 1},
     {"traffic_source": "email"}, "traffic_source"),
    ("analytics_get_average_session_duration", {"time_min": "2026-05-01", "time_max": "2026-05-01"},
     lambda o: o == {"2026-05-01": 200.0}, {"time_min": ["2026-05-01"]}, "time_min"),
    ("project_management_get_task_information_by_id", {"task_id": "00000002", "field": "board"},
     lambda o: o == {"board": "Design"}, {"task_id": "00000009", "field": "board"}, "not found"),
    ("project_management_search_tasks", {"assigned_to_email": "ANA.lopez@lumen.io"},
     lambda o: [t["task_id"] for t in o] == ["00000001"], {}, "no search parameters"),
    ("project_management_create_task", {"task_name": "Ship it", "assigned_to_email": "ben.ode@lumen.io",
                                        "list_name": "Backlog", "due_date": "2026-06-01", "board": "Front end"},
     lambda o: o == "00000003", {"task_name": "Ship it", "assigned_to_email": "ben.ode@lumen.io",
                                 "list_name": "Backlog", "due_date": "2026-05-01", "board": "Front end"}, "before today"),
    ("project_management_delete_task", {"task_id": "00000001"}, lambda o: "deleted" in o, {"task_id": "abc"}, "8 digits"),
    ("project_management_update_task", {"task_id": "00000001", "field": "list_name", "new_value": "In Review"},
     lambda o: "updated" in o, {"task_id": "00000001", "field": "assigned_to_email", "new_value": "who@else.com"},
     "not in the company directory"),
    ("customer_relationship_manager_search_customers", {"status": "lead"},
     lambda o: [c["customer_id"] for c in o["customers"]] == ["00000001"], {"page": 1}, "no search parameters"),
    ("customer_relationship_manager_update_customer", {"customer_id": "00000002", "field": "status", "new_value": "Won"},
     lambda o: "updated" in o, {"customer_id": "00000002", "field": "status", "new_value": "won"}, "not valid"),
    ("customer_relationship_manager_add_customer", {"customer_name": "New Co", "assigned_to_email": "dev.rao@lumen.io",
                                                    "status": "Lead"}, lambda o: o == "00000003",
     {"customer_name": "New Co", "assigned_to_email": "dev.rao@lumen.io", "status": "Hot"}, "status"),
    ("customer_relationship_manager_delete_customer", {"customer_id": "00000001"}, lambda o: "deleted" in o,
     {"customer_id": "00000003"}, "not found"),
]


def test_at_least_26_tools_each_covered_here():
    assert len(TOOLS) >= 26
    assert {c[0] for c in CASES} == set(IMPLEMENTATIONS) == {t.name for t in TOOLS}
    specs = tool_specs()
    assert all(s.function.parameters["additionalProperties"] is False for s in specs)


@pytest.mark.parametrize("name,args,check,bad,fragment", CASES, ids=[c[0] for c in CASES])
def test_tool_happy_and_error_path(name, args, check, bad, fragment):
    w = small_world()
    ok = run(w, name, **args)
    assert ok.error is None, ok.error
    assert check(ok.output), ok.output
    assert bool(ok.writes) == (name in WRITE_TOOLS)
    before = w.tables()
    err = run(w, name, **bad)
    assert err.error is not None and fragment.lower() in err.error.lower(), err.error
    assert err.writes == [] and w.tables() == before  # a failed call changes nothing


def test_write_effects_are_real_rows():
    w = small_world()
    run(w, "email_reply_email", email_id="00000002", body="Thanks")
    row = w.row("emails", "00000004")
    assert row[1:4] == ("outbox", "ana.lopez@lumen.io", "RE: Update on Fix login flow")
    assert row[4] == TODAY and row[5] == "Thanks"
    run(w, "customer_relationship_manager_update_customer", customer_id="00000001", field="assigned_to_email",
        new_value="DEV.RAO@lumen.io")
    assert w.row("crm_customers", "00000001")[1] == "dev.rao@lumen.io"


def test_unknown_tool_and_injection_text_stay_data():
    w = small_world()
    r = run(w, "email_drop_everything")
    assert not r.known and "unknown tool" in r.error
    evil = "x'); DROP TABLE emails; --"
    r = run(w, "email_send_email", recipient="ben.ode@lumen.io", subject=evil, body=evil)
    assert r.ok and len(w.rows("emails")) == 4
    assert w.rows("emails")[-1]["subject"] == evil
    found = run(w, "email_search_emails", query="' OR 1=1 --")
    assert found.output == "No emails found."


def test_oversized_and_nested_arguments_are_rejected_cleanly():
    w = small_world()
    big = run(w, "email_send_email", recipient="ben.ode@lumen.io", subject="s", body="x" * 100_000)
    assert big.error and "body" in big.error
    nested = run(w, "email_send_email", recipient="ben.ode@lumen.io", subject={"a": {"b": [1, [2, [3]]]}}, body="b")
    assert nested.error and "subject" in nested.error
    extra = run(w, "email_delete_email", email_id="00000001", force=True)
    assert extra.error and "force" in extra.error
    assert len(w.rows("emails")) == 3


def test_numbers_for_string_fields_are_coerced():
    w = small_world()
    r = run(w, "calendar_update_event", event_id="00000001", field="duration", new_value=45)
    assert r.ok and w.row("calendar_events", "00000001")[4] == "45"


def test_snapshot_restore_and_scratch_rollback():
    w = small_world()
    snap = w.snapshot()
    with w.scratch():
        run(w, "project_management_delete_task", task_id="00000001")
        assert w.row("project_tasks", "00000001") is None
    assert w.row("project_tasks", "00000001") is not None
    run(w, "project_management_delete_task", task_id="00000001")
    w.restore(snap)
    assert w.row("project_tasks", "00000001") is not None
    fork = w.fork()
    run(fork, "project_management_delete_task", task_id="00000001")
    assert w.row("project_tasks", "00000001") is not None


def test_world_seeds_from_polars_frames_like_from_dicts():
    import polars as pl

    from rewards.environments.workplace import WorkplaceWorld
    from workplace_testdata import SMALL_TABLES

    frames = {k: pl.DataFrame(v, schema={c: pl.Utf8 for c in v[0]}) for k, v in SMALL_TABLES.items()}
    assert WorkplaceWorld.from_tables(frames, today=TODAY).tables() == small_world().tables()


def test_bad_seed_tables_are_named():
    from rewards.environments.workplace import WorkplaceWorld, WorldError

    with pytest.raises(WorldError, match="emails: row 0 has unknown column"):
        WorkplaceWorld.from_tables({"emails": [{"email_id": "00000001", "colour": "red"}]}, today=TODAY)
    with pytest.raises(WorldError, match="not an 8-digit id"):
        WorkplaceWorld.from_tables({"emails": [{"email_id": "42"}]}, today=TODAY)
    with pytest.raises(WorldError, match="unknown table"):
        WorkplaceWorld.from_tables({"mail": []}, today=TODAY)


def test_tool_results_render_as_json():
    from rewards.environments.workplace import WorkplaceEnv
    from schemas.task import TaskRow

    env = WorkplaceEnv(small_world())
    env.reset(TaskRow(id="t", prompt=[{"role": "user", "content": "hi"}]))
    msgs = env.step([ToolCall(name="calendar_get_event_information_by_id",
                              arguments={"event_id": "00000001", "field": "event_name"}),
                     ToolCall(name="calendar_delete_event", arguments={"event_id": "1"})])
    assert json.loads(msgs[0].content) == {"event_name": "sync up"}
    assert "error" in json.loads(msgs[1].content)
    assert env.state()["failed_calls"] == 1
