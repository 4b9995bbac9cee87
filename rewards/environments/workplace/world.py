"""The workplace world: six toolkits' tables in one in-memory SQLite database per episode.

Why SQLite: the final state a verifier compares is real rows, snapshots are a byte copy (`serialize`), and a replay
inside a SAVEPOINT is undone by one ROLLBACK, which makes verification by replay cheap (see verifier.py).

All cells are TEXT (NULL for missing), as in NeMo Gym's CSV world (read with dtype=str), so values compare the same
way in both. Column names follow NeMo Gym's (including `inbox/outbox` and `sender/recipient`) so its tasks replay here.
"""

from __future__ import annotations

import itertools
import sqlite3
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

from schemas.workplace import CUSTOMER_FIELDS, EMAIL_FIELDS, EVENT_FIELDS, TASK_FIELDS, VISIT_FIELDS


@dataclass(frozen=True)
class TableDef:
    name: str
    key: str | None
    columns: tuple[str, ...]
    mutable: bool


TABLES: dict[str, TableDef] = {
    t.name: t
    for t in (
        TableDef("directory", "email_address", ("email_address", "name", "team"), False),
        TableDef("emails", "email_id", EMAIL_FIELDS, True),
        TableDef("calendar_events", "event_id", EVENT_FIELDS, True),
        TableDef("project_tasks", "task_id", TASK_FIELDS, True),
        TableDef("crm_customers", "customer_id", CUSTOMER_FIELDS, True),
        TableDef("analytics_visits", None, VISIT_FIELDS, False),
        TableDef("analytics_plots", "plot_id", ("plot_id", "file_path"), True),
    )
}
MUTABLE_TABLES = tuple(t.name for t in TABLES.values() if t.mutable)

# Written out in full (not assembled from input) so that no SQL text ever depends on data.
SCHEMA_SQL = """
CREATE TABLE directory (email_address TEXT PRIMARY KEY, name TEXT, team TEXT);
CREATE TABLE emails (email_id TEXT PRIMARY KEY, "inbox/outbox" TEXT, "sender/recipient" TEXT, subject TEXT,
                     sent_datetime TEXT, body TEXT);
CREATE TABLE calendar_events (event_id TEXT PRIMARY KEY, event_name TEXT, participant_email TEXT, event_start TEXT,
                              duration TEXT);
CREATE TABLE project_tasks (task_id TEXT PRIMARY KEY, task_name TEXT, assigned_to_email TEXT, list_name TEXT,
                            due_date TEXT, board TEXT);
CREATE TABLE crm_customers (customer_id TEXT PRIMARY KEY, assigned_to_email TEXT, customer_name TEXT,
                            customer_email TEXT, customer_phone TEXT, last_contact_date TEXT, product_interest TEXT,
                            status TEXT, follow_up_by TEXT, notes TEXT);
CREATE TABLE analytics_visits (date_of_visit TEXT, visitor_id TEXT, page_views TEXT, session_duration_seconds TEXT,
                               traffic_source TEXT, user_engaged TEXT);
CREATE INDEX visits_by_date ON analytics_visits (date_of_visit);
CREATE INDEX visits_by_visitor ON analytics_visits (visitor_id);
CREATE TABLE analytics_plots (plot_id TEXT PRIMARY KEY, file_path TEXT);
"""

INSERT_SQL = {
    "directory": "INSERT INTO directory VALUES (?, ?, ?)",
    "emails": "INSERT INTO emails VALUES (?, ?, ?, ?, ?, ?)",
    "calendar_events": "INSERT INTO calendar_events VALUES (?, ?, ?, ?, ?)",
    "project_tasks": "INSERT INTO project_tasks VALUES (?, ?, ?, ?, ?, ?)",
    "crm_customers": "INSERT INTO crm_customers VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    "analytics_visits": "INSERT INTO analytics_visits VALUES (?, ?, ?, ?, ?, ?)",
    "analytics_plots": "INSERT INTO analytics_plots VALUES (?, ?)",
}
SELECT_ALL_SQL = {
    "directory": "SELECT * FROM directory ORDER BY email_address",
    "emails": "SELECT * FROM emails ORDER BY email_id",
    "calendar_events": "SELECT * FROM calendar_events ORDER BY event_id",
    "project_tasks": "SELECT * FROM project_tasks ORDER BY task_id",
    "crm_customers": "SELECT * FROM crm_customers ORDER BY customer_id",
    "analytics_visits": "SELECT * FROM analytics_visits ORDER BY rowid",
    "analytics_plots": "SELECT * FROM analytics_plots ORDER BY plot_id",
}
SELECT_ONE_SQL = {
    "emails": "SELECT * FROM emails WHERE email_id = ?",
    "calendar_events": "SELECT * FROM calendar_events WHERE event_id = ?",
    "project_tasks": "SELECT * FROM project_tasks WHERE task_id = ?",
    "crm_customers": "SELECT * FROM crm_customers WHERE customer_id = ?",
    "analytics_plots": "SELECT * FROM analytics_plots WHERE plot_id = ?",
    "directory": "SELECT * FROM directory WHERE email_address = ?",
}
# Ids are 8-digit zero-padded text (checked when seeding), so the text maximum is the numeric one and the primary
# key index answers it without a scan.
NEXT_ID_SQL = {
    "emails": "SELECT MAX(email_id) FROM emails",
    "calendar_events": "SELECT MAX(event_id) FROM calendar_events",
    "project_tasks": "SELECT MAX(task_id) FROM project_tasks",
    "crm_customers": "SELECT MAX(customer_id) FROM crm_customers",
    "analytics_plots": "SELECT MAX(plot_id) FROM analytics_plots",
}

DEFAULT_CONTEXT = "Meetings must not start before 9am or end after 6pm."
_SERIALS = itertools.count(1)


class WorldError(ValueError):
    """Seed tables do not fit the world's schema; the message names the table, row and column."""


def _cell(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, float) and v != v:  # NaN from a CSV/pandas frame means missing
        return None
    if isinstance(v, bool):
        return "True" if v else "False"
    return str(v)


def _words_all_in(query: str | None, text: str | None) -> int:
    """SQL function: 1 when every whitespace-separated word of `query` occurs in `text` (case-insensitive)."""
    if not query:
        return 1
    hay = (text or "").lower()
    return int(all(w in hay for w in query.lower().split()))


def _connect() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    conn.create_function("words_all_in", 2, _words_all_in, deterministic=True)
    return conn


class WorkplaceWorld:
    """One company's state. `today` anchors business rules ("due date before today") and new emails' timestamps.

    Build with `from_tables` (dicts/lists or polars frames), `from_nemo_gym` (its CSV world) or `from_snapshot`.
    `fork()` gives an independent copy for an episode; `scratch()` runs code whose writes are rolled back.
    """

    def __init__(self, conn: sqlite3.Connection, today: str, context: str = DEFAULT_CONTEXT, name: str = "world"):
        self.conn = conn
        self.today = today
        self.context = context
        self.name = name
        self._base_rows: dict[tuple[str, str], tuple | None] = {}
        self._scratch_depth = 0
        # (serial, version) identifies this world's committed content for caches: the serial is unique per object
        # (never reused, unlike id()), the version moves whenever a write lands outside a scratch savepoint.
        self.serial = next(_SERIALS)
        self.version = 0

    # --- construction --------------------------------------------------------------------------------------------
    @classmethod
    def from_tables(cls, tables: Mapping[str, Any], *, today: str, context: str = DEFAULT_CONTEXT,
                    name: str = "world") -> "WorkplaceWorld":
        """Seed from `{table: rows}` where rows is a list of dicts or anything with `.to_dicts()` (polars)."""
        unknown = set(tables) - set(TABLES)
        if unknown:
            raise WorldError(f"unknown table(s) {sorted(unknown)}; expected some of {sorted(TABLES)}")
        conn = _connect()
        conn.executescript(SCHEMA_SQL)
        conn.execute("BEGIN")
        for tname, rows in tables.items():
            tdef = TABLES[tname]
            if hasattr(rows, "to_dicts"):
                rows = rows.to_dicts()
            values = []
            for i, row in enumerate(rows):
                if not isinstance(row, Mapping):
                    raise WorldError(f"table {tname}: row {i} is {type(row).__name__}, expected a dict")
                extra = set(row) - set(tdef.columns)
                if extra:
                    raise WorldError(f"table {tname}: row {i} has unknown column(s) {sorted(extra)}; "
                                     f"expected {list(tdef.columns)}")
                if tdef.key and not row.get(tdef.key):
                    raise WorldError(f"table {tname}: row {i} has no {tdef.key}")
                if tname in NEXT_ID_SQL:
                    key = _cell(row.get(tdef.key))
                    if not (len(key) == 8 and key.isdigit()):
                        raise WorldError(f"table {tname}: row {i}: {tdef.key} {key!r} is not an 8-digit id "
                                         "such as '00000042'")
                values.append(tuple(_cell(row.get(c)) for c in tdef.columns))
            try:
                conn.executemany(INSERT_SQL[tname], values)
            except sqlite3.IntegrityError as exc:
                conn.execute("ROLLBACK")
                raise WorldError(f"table {tname}: duplicate {tdef.key} ({exc})") from exc
        conn.execute("COMMIT")
        return cls(conn, today=today, context=context, name=name)

    @classmethod
    def from_nemo_gym(cls, folder: str | Path) -> "WorkplaceWorld":
        """NeMo Gym's Workplace Assistant CSV world (`csv_data/processed/*.csv`, `csv_data/raw/email_addresses.csv`)."""
        from rewards.environments.workplace.nemo_gym import read_csv_world

        return read_csv_world(folder)

    @classmethod
    def from_snapshot(cls, data: bytes, *, today: str, context: str = DEFAULT_CONTEXT,
                      name: str = "world") -> "WorkplaceWorld":
        conn = _connect()
        conn.deserialize(data)
        return cls(conn, today=today, context=context, name=name)

    def snapshot(self) -> bytes:
        """The whole database as bytes; `from_snapshot`/`restore` bring it back exactly."""
        return self.conn.serialize()

    def restore(self, data: bytes) -> None:
        self.conn.deserialize(data)
        self.mark_changed()

    def mark_changed(self) -> None:
        """The committed content changed (a write outside `scratch`, a restore): drop what caches hold."""
        self.version += 1
        self._base_rows.clear()

    @property
    def in_scratch(self) -> bool:
        return self._scratch_depth > 0

    def fork(self) -> "WorkplaceWorld":
        """An independent copy (for one episode)."""
        return WorkplaceWorld.from_snapshot(self.snapshot(), today=self.today, context=self.context, name=self.name)

    @contextmanager
    def scratch(self) -> Iterator["WorkplaceWorld"]:
        """Run writes that are undone on exit (a SAVEPOINT rolled back): replays for verification cost no copy."""
        self.conn.execute("SAVEPOINT scratch")
        self._scratch_depth += 1
        try:
            yield self
        finally:
            self._scratch_depth -= 1
            self.conn.execute("ROLLBACK TO scratch")
            self.conn.execute("RELEASE scratch")

    # --- reading -------------------------------------------------------------------------------------------------
    def rows(self, table: str) -> list[dict[str, str | None]]:
        cols = TABLES[table].columns
        return [dict(zip(cols, r)) for r in self.conn.execute(SELECT_ALL_SQL[table])]

    def tables(self) -> dict[str, list[dict[str, str | None]]]:
        return {t: self.rows(t) for t in TABLES}

    def row(self, table: str, key: str) -> tuple | None:
        return self.conn.execute(SELECT_ONE_SQL[table], (key,)).fetchone()

    def base_row(self, table: str, key: str) -> tuple | None:
        """A row as it is in the world's committed state (cached: the verifier asks for the same rows often)."""
        k = (table, key)
        if self.in_scratch:
            raise RuntimeError("base_row() inside scratch() would read uncommitted rows")
        if k not in self._base_rows:
            self._base_rows[k] = self.row(table, key)
        return self._base_rows[k]

    def next_id(self, table: str) -> str:
        top = self.conn.execute(NEXT_ID_SQL[table]).fetchone()[0]
        return str(int(top or 0) + 1).zfill(8)

    def counts(self) -> dict[str, int]:
        return {t: len(self.rows(t)) for t in TABLES}
