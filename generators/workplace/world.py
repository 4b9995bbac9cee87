"""The workplace world's seed tables, generated from `world_spec.yaml` by the dataset engine.

Why through the engine: a user regenerates a different but internally consistent company (emails that talk about
real tasks, assignees from the directory, customers owned by the sales team) by changing the spec or its seed.
The tables come back as plain `{table: [row dicts]}` with every cell as text (or None), the form the SQLite world
(`rewards.environments.workplace.WorkplaceWorld.from_tables`) and the task templates both read.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

SPEC_PATH = Path(__file__).with_name("world_spec.yaml")
TODAY = "2026-05-14 17:00:00"
CONTEXT = ("Today is Thursday, 2026-05-14 and the current time is 17:00:00. "
           "Meetings must not start before 9am or end after 6pm.")
RENAMES = {"emails": {"inbox_outbox": "inbox/outbox", "sender_recipient": "sender/recipient"}}
# visible column order per table (as the environment's schema declares them)
COLUMNS = {
    "directory": ("email_address", "name", "team"),
    "emails": ("email_id", "inbox/outbox", "sender/recipient", "subject", "sent_datetime", "body"),
    "calendar_events": ("event_id", "event_name", "participant_email", "event_start", "duration"),
    "project_tasks": ("task_id", "task_name", "assigned_to_email", "list_name", "due_date", "board"),
    "crm_customers": ("customer_id", "assigned_to_email", "customer_name", "customer_email", "customer_phone",
                      "last_contact_date", "product_interest", "status", "follow_up_by", "notes"),
    "analytics_visits": ("date_of_visit", "visitor_id", "page_views", "session_duration_seconds", "traffic_source",
                         "user_engaged"),
}


def meeting_start(frame: pl.DataFrame, rng: np.random.Generator) -> list[str]:
    """Custom column: a start on the half hour between 09:00 and 16:30 of the row's `day` (so that every seeded
    meeting of up to 90 minutes respects the 09:00-18:00 rule)."""
    slots = rng.integers(0, 16, frame.height)  # 09:00 + 30 min * slot
    out = []
    for day, slot in zip(frame["day"].to_list(), slots.tolist()):
        start = dt.datetime.combine(day.date() if isinstance(day, dt.datetime) else day, dt.time(9, 0))
        out.append((start + dt.timedelta(minutes=30 * slot)).strftime("%Y-%m-%d %H:%M:%S"))
    return out


def _text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, dt.datetime):
        return v.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def generate_world_tables(seed: int | None = None, spec_path: str | Path = SPEC_PATH) -> dict[str, list[dict]]:
    """The seed world as `{table: rows}` (text cells), deterministic for a given spec and seed."""
    from generators.spec_io import load_spec
    from generators.writer import generate_frames

    spec = load_spec(spec_path)
    if seed is not None:
        spec = spec.model_copy(update={"seed": int(seed)})
    frames = generate_frames(spec, 1)
    tables: dict[str, list[dict]] = {}
    for name, cols in COLUMNS.items():
        frame = frames[name].rename(RENAMES.get(name, {}))
        missing = [c for c in cols if c not in frame.columns]
        if missing:
            raise ValueError(f"{spec_path}: table {name} lacks column(s) {missing} that the workplace world needs")
        tables[name] = [{c: _text(r[c]) for c in cols} for r in frame.select(list(cols)).iter_rows(named=True)]
    return tables
