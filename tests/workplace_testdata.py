"""Shared, cached inputs for the workplace tests (a small hand-made world; the generated default world and tasks)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NEMO = ROOT.parent / "shared" / "external" / "nemo_gym_workplace_assistant"

TODAY = "2026-05-14 17:00:00"

SMALL_TABLES = {
    "directory": [
        {"email_address": "ana.lopez@lumen.io", "name": "Ana Lopez", "team": "engineering"},
        {"email_address": "ben.ode@lumen.io", "name": "Ben Ode", "team": "engineering"},
        {"email_address": "cara.sun@lumen.io", "name": "Cara Sun", "team": "sales"},
        {"email_address": "dev.rao@lumen.io", "name": "Dev Rao", "team": "sales"},
    ],
    "emails": [
        {"email_id": "00000001", "inbox/outbox": "inbox", "sender/recipient": "ana.lopez@lumen.io",
         "subject": "Update on Fix login flow", "sent_datetime": "2026-05-10 10:00:00", "body": "Hi, progress on login."},
        {"email_id": "00000002", "inbox/outbox": "inbox", "sender/recipient": "ana.lopez@lumen.io",
         "subject": "Update on Fix login flow", "sent_datetime": "2026-05-12 09:00:00", "body": "Hi, done with login."},
        {"email_id": "00000003", "inbox/outbox": "outbox", "sender/recipient": "ben.ode@lumen.io",
         "subject": "Budget", "sent_datetime": "2026-05-11 15:00:00", "body": "Numbers attached."},
    ],
    "calendar_events": [
        {"event_id": "00000001", "event_name": "sync up", "participant_email": "ana.lopez@lumen.io",
         "event_start": "2026-05-20 10:00:00", "duration": "30"},
        {"event_id": "00000002", "event_name": "design review", "participant_email": "ben.ode@lumen.io",
         "event_start": "2026-05-20 15:00:00", "duration": "60"},
    ],
    "project_tasks": [
        {"task_id": "00000001", "task_name": "Fix login flow", "assigned_to_email": "ana.lopez@lumen.io",
         "list_name": "In Progress", "due_date": "2026-05-30", "board": "Back end"},
        {"task_id": "00000002", "task_name": "Design pricing page", "assigned_to_email": "ben.ode@lumen.io",
         "list_name": "Backlog", "due_date": "2026-06-10", "board": "Design"},
    ],
    "crm_customers": [
        {"customer_id": "00000001", "assigned_to_email": "cara.sun@lumen.io", "customer_name": "Ivy Hart",
         "customer_email": "ivy@hart.example.com", "customer_phone": "555-100-2000", "last_contact_date": "2026-05-01",
         "product_interest": "Software", "status": "Lead", "follow_up_by": "2026-05-30", "notes": "Had a call."},
        {"customer_id": "00000002", "assigned_to_email": "cara.sun@lumen.io", "customer_name": "Max Kent",
         "customer_email": "max@kent.example.com", "customer_phone": None, "last_contact_date": "2026-04-01",
         "product_interest": "Hardware", "status": "Proposal", "follow_up_by": "2026-05-20", "notes": ""},
    ],
    "analytics_visits": [
        {"date_of_visit": "2026-05-01", "visitor_id": "1001", "page_views": "3", "session_duration_seconds": "100",
         "traffic_source": "direct", "user_engaged": "True"},
        {"date_of_visit": "2026-05-01", "visitor_id": "1002", "page_views": "5", "session_duration_seconds": "300",
         "traffic_source": "search engine", "user_engaged": "False"},
        {"date_of_visit": "2026-05-02", "visitor_id": "1001", "page_views": "1", "session_duration_seconds": "50",
         "traffic_source": "direct", "user_engaged": "False"},
    ],
}


def small_world():
    from rewards.environments.workplace import WorkplaceWorld

    return WorkplaceWorld.from_tables(SMALL_TABLES, today=TODAY)


@lru_cache(maxsize=1)
def default_world_and_tasks():
    """The default generated world (through the dataset engine) and its default 1,200-task set."""
    from generators.workplace import CONTEXT, TODAY as WTODAY, generate_tasks, generate_world_tables
    from rewards.environments.workplace import WorkplaceWorld

    tables = generate_world_tables()
    tasks = generate_tasks(tables, today=WTODAY, context=CONTEXT)
    return tables, WorkplaceWorld.from_tables(tables, today=WTODAY, context=CONTEXT), tasks


@lru_cache(maxsize=1)
def nemo_world():
    from rewards.environments.workplace.nemo_gym import read_csv_world

    return read_csv_world(NEMO)
