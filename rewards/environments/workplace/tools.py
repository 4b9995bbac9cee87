"""The 27 workplace tools over a `WorkplaceWorld`, with their business rules. Parameterised SQL only.

`execute(world, call)` never raises for anything the model can send: invalid arguments (pydantic), unknown ids,
unknown tools and business-rule violations come back as a `ToolResult` with `error` set, which the loop shows to
the model and the verifier counts. A bug in a tool (anything other than `ToolError`/`ValidationError`) is re-raised
as `ToolCrash`, never disguised as a model mistake.

Business rules (beyond NeMo Gym's): meetings start at or after 09:00 and end by 18:00 on the same day; durations are
1-540 minutes; task due dates are not before today; task and customer assignees must be in the company directory;
ids are 8 digits. Enumerations (status, list, board, ...) are case-sensitive, as in NeMo Gym.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Callable

from pydantic import BaseModel, ValidationError

from schemas.messages import ToolCall
from schemas.workplace import (
    CUSTOMER_FIELDS, CUSTOMER_STATUSES, EMAIL_FIELDS, EVENT_FIELDS, PRODUCT_INTERESTS, TASK_BOARDS, TASK_FIELDS,
    TASK_LISTS, TOOLS_BY_NAME, VISIT_FIELDS,
)
from rewards.environments.workplace.world import WorkplaceWorld


class ToolError(Exception):
    """A mistake of the caller (unknown id, rule violated): shown to the model as the tool's error."""


class ToolCrash(RuntimeError):
    """A bug in a tool implementation: reported as such, never as a model error."""


@dataclass
class ToolResult:
    name: str
    output: Any = None
    error: str | None = None
    writes: list[tuple[str, str]] = field(default_factory=list)  # (table, key) of every row created/changed/deleted
    is_write: bool = False
    known: bool = True

    @property
    def ok(self) -> bool:
        return self.error is None


# --- value checks ------------------------------------------------------------------------------------------------
def _id(value: str, what: str) -> str:
    if not (len(value) == 8 and value.isdigit()):
        raise ToolError(f"invalid {what} id {value!r}: expected 8 digits, e.g. '00000042'")
    return value


def _date(value: str, what: str) -> dt.date:
    try:
        return dt.date.fromisoformat(value[:10]) if len(value) >= 10 else dt.date.fromisoformat(value)
    except ValueError:
        raise ToolError(f"invalid {what} {value!r}: expected YYYY-MM-DD") from None


def _datetime(value: str, what: str) -> dt.datetime:
    try:
        parsed = dt.datetime.fromisoformat(value.replace("T", " "))
    except ValueError:
        raise ToolError(f"invalid {what} {value!r}: expected YYYY-MM-DD HH:MM:SS") from None
    return parsed.replace(tzinfo=None)


def _fmt(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S")


def _email_address(value: str) -> str:
    # NeMo Gym's rule ("@" and "." somewhere): its CRM holds customer addresses such as name.surname@company
    if "@" not in value or "." not in value or " " in value.strip():
        raise ToolError(f"invalid email address {value!r}")
    return value.strip().lower()


def _duration(value: str) -> int:
    try:
        minutes = int(value)
    except ValueError:
        raise ToolError(f"invalid duration {value!r}: expected a whole number of minutes") from None
    if not 1 <= minutes <= 540:
        raise ToolError(f"duration must be between 1 and 540 minutes, got {minutes}")
    return minutes


def _meeting_hours(start: dt.datetime, minutes: int) -> None:
    end = start + dt.timedelta(minutes=minutes)
    if start.time() < dt.time(9, 0) or end.date() != start.date() or end.time() > dt.time(18, 0):
        raise ToolError(f"meetings must start at or after 09:00 and end by 18:00; this one runs "
                        f"{start:%H:%M}-{end:%H:%M}")


def _not_past(world: WorkplaceWorld, value: str, what: str) -> str:
    day = _date(value, what)
    today = _date(world.today, "today")
    if day < today:
        raise ToolError(f"{what} {value} is before today ({today.isoformat()})")
    return day.isoformat()


def _employee(world: WorkplaceWorld, value: str) -> str:
    value = value.lower()
    if world.row("directory", value) is None:
        raise ToolError(f"{value!r} is not in the company directory; look it up with company_directory_find_email_address")
    return value


def _enum(value: str, allowed: tuple[str, ...], what: str) -> str:
    if value not in allowed:
        raise ToolError(f"{what} {value!r} is not valid; choose one of {', '.join(repr(a) for a in allowed)}")
    return value


def _page(items: list, page: int, page_size: int, key: str) -> Any:
    if not items:
        return f"No {key} found."
    pages = (len(items) + page_size - 1) // page_size
    page = max(1, min(page, pages))
    start = (page - 1) * page_size
    return {key: items[start:start + page_size],
            "pagination": {f"total_{key}": len(items), "page": page, "page_size": page_size, "total_pages": pages}}


def _records(cur, columns: tuple[str, ...]) -> list[dict]:
    return [dict(zip(columns, r)) for r in cur]


# --- company directory -------------------------------------------------------------------------------------------
def find_email_address(w: WorkplaceWorld, a) -> Any:
    if not a.name:
        raise ToolError("name not provided")
    return [r[0] for r in w.conn.execute(
        "SELECT email_address FROM directory WHERE instr(lower(email_address), lower(?)) > 0 "
        "OR instr(lower(COALESCE(name, '')), lower(?)) > 0 ORDER BY email_address", (a.name, a.name))]


# --- email -------------------------------------------------------------------------------------------------------
def _email(w: WorkplaceWorld, email_id: str) -> tuple:
    row = w.row("emails", _id(email_id, "email"))
    if row is None:
        raise ToolError(f"email {email_id} not found")
    return row


def get_email_information(w: WorkplaceWorld, a) -> Any:
    row = _email(w, a.email_id)
    return {a.field: row[EMAIL_FIELDS.index(a.field)]}


def search_emails(w: WorkplaceWorld, a) -> Any:
    lo = _date(a.date_min, "date_min").isoformat() if a.date_min else None
    hi = _date(a.date_max, "date_max").isoformat() if a.date_max else None
    cur = w.conn.execute(
        'SELECT * FROM emails WHERE words_all_in(?, subject || \' \' || body || \' \' || "sender/recipient") '
        "AND (? IS NULL OR substr(sent_datetime, 1, 10) >= ?) AND (? IS NULL OR substr(sent_datetime, 1, 10) <= ?) "
        "ORDER BY sent_datetime DESC, email_id DESC", (a.query, lo, lo, hi, hi))
    return _page(_records(cur, EMAIL_FIELDS), a.page, a.page_size, "emails")


def _insert_email(w: WorkplaceWorld, recipient: str, subject: str, body: str) -> str:
    new_id = w.next_id("emails")
    w.conn.execute("INSERT INTO emails VALUES (?, 'outbox', ?, ?, ?, ?)",
                   (new_id, recipient, subject, _fmt(_datetime(w.today, "today")), body))
    return new_id


def send_email(w: WorkplaceWorld, a, writes: list) -> Any:
    new_id = _insert_email(w, _email_address(a.recipient), a.subject, a.body)
    writes.append(("emails", new_id))
    return "Email sent successfully."


def delete_email(w: WorkplaceWorld, a, writes: list) -> Any:
    _email(w, a.email_id)
    w.conn.execute("DELETE FROM emails WHERE email_id = ?", (a.email_id,))
    writes.append(("emails", a.email_id))
    return "Email deleted successfully."


def forward_email(w: WorkplaceWorld, a, writes: list) -> Any:
    row = _email(w, a.email_id)
    new_id = _insert_email(w, _email_address(a.recipient), f"FW: {row[3]}", row[5])
    writes.append(("emails", new_id))
    return "Email forwarded successfully."


def reply_email(w: WorkplaceWorld, a, writes: list) -> Any:
    row = _email(w, a.email_id)
    new_id = _insert_email(w, row[2], f"RE: {row[3]}", a.body)
    writes.append(("emails", new_id))
    return "Email replied successfully."


# --- calendar ----------------------------------------------------------------------------------------------------
def _event(w: WorkplaceWorld, event_id: str) -> tuple:
    row = w.row("calendar_events", _id(event_id, "event"))
    if row is None:
        raise ToolError(f"event {event_id} not found")
    return row


def get_event_information(w: WorkplaceWorld, a) -> Any:
    return {a.field: _event(w, a.event_id)[EVENT_FIELDS.index(a.field)]}


def search_events(w: WorkplaceWorld, a) -> Any:
    lo = _fmt(_datetime(a.time_min, "time_min")) if a.time_min else None
    hi = None
    if a.time_max:
        t = _datetime(a.time_max, "time_max")
        if len(a.time_max.strip()) <= 10:  # a bare date means the whole day
            t = t.replace(hour=23, minute=59, second=59)
        hi = _fmt(t)
    cur = w.conn.execute(
        "SELECT * FROM calendar_events WHERE (instr(lower(event_name), lower(?)) > 0 "
        "OR instr(lower(participant_email), lower(?)) > 0) AND (? IS NULL OR event_start >= ?) "
        "AND (? IS NULL OR event_start <= ?) ORDER BY event_start DESC, event_id DESC",
        (a.query, a.query, lo, lo, hi, hi))
    return _page(_records(cur, EVENT_FIELDS), a.page, a.page_size, "events")


def create_event(w: WorkplaceWorld, a, writes: list) -> Any:
    start = _datetime(a.event_start, "event_start")
    minutes = _duration(a.duration)
    _meeting_hours(start, minutes)
    new_id = w.next_id("calendar_events")
    w.conn.execute("INSERT INTO calendar_events VALUES (?, ?, ?, ?, ?)",
                   (new_id, a.event_name, _email_address(a.participant_email), _fmt(start), str(minutes)))
    writes.append(("calendar_events", new_id))
    return new_id


def delete_event(w: WorkplaceWorld, a, writes: list) -> Any:
    _event(w, a.event_id)
    w.conn.execute("DELETE FROM calendar_events WHERE event_id = ?", (a.event_id,))
    writes.append(("calendar_events", a.event_id))
    return "Event deleted successfully."


EVENT_UPDATE_SQL = {
    "event_name": "UPDATE calendar_events SET event_name = ? WHERE event_id = ?",
    "participant_email": "UPDATE calendar_events SET participant_email = ? WHERE event_id = ?",
    "event_start": "UPDATE calendar_events SET event_start = ? WHERE event_id = ?",
    "duration": "UPDATE calendar_events SET duration = ? WHERE event_id = ?",
}


def update_event(w: WorkplaceWorld, a, writes: list) -> Any:
    row = _event(w, a.event_id)
    value = a.new_value
    if a.field == "participant_email":
        value = _email_address(value)
    elif a.field == "event_start":
        start = _datetime(value, "event_start")
        _meeting_hours(start, _duration(row[4] or "30"))
        value = _fmt(start)
    elif a.field == "duration":
        minutes = _duration(value)
        _meeting_hours(_datetime(row[3], "event_start"), minutes)
        value = str(minutes)
    w.conn.execute(EVENT_UPDATE_SQL[a.field], (value, a.event_id))
    writes.append(("calendar_events", a.event_id))
    return "Event updated successfully."


# --- analytics ---------------------------------------------------------------------------------------------------
def _range(a) -> tuple[str | None, str | None]:
    lo = _date(a.time_min, "time_min").isoformat() if a.time_min else None
    hi = _date(a.time_max, "time_max").isoformat() if a.time_max else None
    return lo, hi




def get_visitor_information(w: WorkplaceWorld, a) -> Any:
    rows = _records(w.conn.execute("SELECT * FROM analytics_visits WHERE visitor_id = ? ORDER BY date_of_visit",
                                   (a.visitor_id,)), VISIT_FIELDS)
    if not rows:
        raise ToolError(f"visitor {a.visitor_id} not found")
    return rows


def create_plot(w: WorkplaceWorld, a, writes: list) -> Any:
    lo, hi = _date(a.time_min, "time_min"), _date(a.time_max, "time_max")
    if lo > hi:
        raise ToolError(f"time_min {lo} is after time_max {hi}")
    path = f"plots/{lo.isoformat()}_{hi.isoformat()}_{a.value_to_plot}_{a.plot_type}.png"
    new_id = w.next_id("analytics_plots")
    w.conn.execute("INSERT INTO analytics_plots VALUES (?, ?)", (new_id, path))
    writes.append(("analytics_plots", new_id))
    return path


def total_visits_count(w: WorkplaceWorld, a) -> Any:
    lo, hi = _range(a)
    return dict(w.conn.execute("SELECT date_of_visit, COUNT(*) FROM analytics_visits WHERE (? IS NULL OR date_of_visit >= ?) AND (? IS NULL OR date_of_visit <= ?)"
                               " GROUP BY date_of_visit ORDER BY date_of_visit", (lo, lo, hi, hi)).fetchall())


def engaged_users_count(w: WorkplaceWorld, a) -> Any:
    lo, hi = _range(a)
    return dict(w.conn.execute(
        "SELECT date_of_visit, SUM(CASE WHEN lower(user_engaged) = 'true' THEN 1 ELSE 0 END) FROM analytics_visits "
        "WHERE (? IS NULL OR date_of_visit >= ?) AND (? IS NULL OR date_of_visit <= ?) GROUP BY date_of_visit ORDER BY date_of_visit", (lo, lo, hi, hi)).fetchall())


def traffic_source_count(w: WorkplaceWorld, a) -> Any:
    lo, hi = _range(a)
    return dict(w.conn.execute(
        "SELECT date_of_visit, SUM(CASE WHEN ? IS NULL OR traffic_source = ? THEN 1 ELSE 0 END) FROM analytics_visits "
        "WHERE (? IS NULL OR date_of_visit >= ?) AND (? IS NULL OR date_of_visit <= ?) GROUP BY date_of_visit ORDER BY date_of_visit",
        (a.traffic_source, a.traffic_source, lo, lo, hi, hi)).fetchall())


def average_session_duration(w: WorkplaceWorld, a) -> Any:
    lo, hi = _range(a)
    return {d: round(v, 2) for d, v in w.conn.execute(
        "SELECT date_of_visit, AVG(CAST(session_duration_seconds AS REAL)) FROM analytics_visits WHERE (? IS NULL OR date_of_visit >= ?) AND (? IS NULL OR date_of_visit <= ?)"
        " GROUP BY date_of_visit ORDER BY date_of_visit", (lo, lo, hi, hi))}


# --- project management ------------------------------------------------------------------------------------------
def _task(w: WorkplaceWorld, task_id: str) -> tuple:
    row = w.row("project_tasks", _id(task_id, "task"))
    if row is None:
        raise ToolError(f"task {task_id} not found")
    return row


def get_task_information(w: WorkplaceWorld, a) -> Any:
    return {a.field: _task(w, a.task_id)[TASK_FIELDS.index(a.field)]}


def search_tasks(w: WorkplaceWorld, a) -> Any:
    if not any([a.task_name, a.assigned_to_email, a.list_name, a.due_date, a.board]):
        raise ToolError("no search parameters provided; give at least one")
    cur = w.conn.execute(
        "SELECT * FROM project_tasks WHERE (? IS NULL OR instr(lower(task_name), lower(?)) > 0) "
        "AND (? IS NULL OR lower(assigned_to_email) = lower(?)) AND (? IS NULL OR instr(lower(list_name), lower(?)) > 0) "
        "AND (? IS NULL OR instr(due_date, ?) > 0) AND (? IS NULL OR instr(lower(board), lower(?)) > 0) "
        "ORDER BY task_id",
        (a.task_name, a.task_name, a.assigned_to_email, a.assigned_to_email, a.list_name, a.list_name,
         a.due_date, a.due_date, a.board, a.board))
    rows = _records(cur, TASK_FIELDS)
    return rows if rows else "No tasks found."


def create_task(w: WorkplaceWorld, a, writes: list) -> Any:
    assignee = _employee(w, a.assigned_to_email)
    due = _not_past(w, a.due_date, "due date")
    new_id = w.next_id("project_tasks")
    w.conn.execute("INSERT INTO project_tasks VALUES (?, ?, ?, ?, ?, ?)",
                   (new_id, a.task_name, assignee, a.list_name, due, a.board))
    writes.append(("project_tasks", new_id))
    return new_id


def delete_task(w: WorkplaceWorld, a, writes: list) -> Any:
    _task(w, a.task_id)
    w.conn.execute("DELETE FROM project_tasks WHERE task_id = ?", (a.task_id,))
    writes.append(("project_tasks", a.task_id))
    return "Task deleted successfully."


TASK_UPDATE_SQL = {
    "task_name": "UPDATE project_tasks SET task_name = ? WHERE task_id = ?",
    "assigned_to_email": "UPDATE project_tasks SET assigned_to_email = ? WHERE task_id = ?",
    "list_name": "UPDATE project_tasks SET list_name = ? WHERE task_id = ?",
    "due_date": "UPDATE project_tasks SET due_date = ? WHERE task_id = ?",
    "board": "UPDATE project_tasks SET board = ? WHERE task_id = ?",
}


def update_task(w: WorkplaceWorld, a, writes: list) -> Any:
    _task(w, a.task_id)
    value = a.new_value
    if a.field == "assigned_to_email":
        value = _employee(w, value)
    elif a.field == "list_name":
        value = _enum(value, TASK_LISTS, "list")
    elif a.field == "board":
        value = _enum(value, TASK_BOARDS, "board")
    elif a.field == "due_date":
        value = _not_past(w, value, "due date")
    w.conn.execute(TASK_UPDATE_SQL[a.field], (value, a.task_id))
    writes.append(("project_tasks", a.task_id))
    return "Task updated successfully."


# --- CRM ---------------------------------------------------------------------------------------------------------
def _customer(w: WorkplaceWorld, customer_id: str) -> tuple:
    row = w.row("crm_customers", _id(customer_id, "customer"))
    if row is None:
        raise ToolError(f"customer {customer_id} not found")
    return row


def search_customers(w: WorkplaceWorld, a) -> Any:
    filters = [a.customer_name, a.customer_email, a.product_interest, a.status, a.assigned_to_email,
               a.last_contact_date_min, a.last_contact_date_max, a.follow_up_by_min, a.follow_up_by_max]
    if not any(filters):
        raise ToolError("no search parameters provided; give at least one")
    d = [(_date(v, "date").isoformat() if v else None) for v in filters[5:]]
    cur = w.conn.execute(
        "SELECT * FROM crm_customers WHERE (? IS NULL OR instr(lower(customer_name), lower(?)) > 0) "
        "AND (? IS NULL OR instr(lower(customer_email), lower(?)) > 0) "
        "AND (? IS NULL OR instr(lower(product_interest), lower(?)) > 0) "
        "AND (? IS NULL OR instr(lower(status), lower(?)) > 0) "
        "AND (? IS NULL OR instr(lower(assigned_to_email), lower(?)) > 0) "
        "AND (? IS NULL OR substr(last_contact_date, 1, 10) >= ?) AND (? IS NULL OR substr(last_contact_date, 1, 10) <= ?) "
        "AND (? IS NULL OR substr(follow_up_by, 1, 10) >= ?) AND (? IS NULL OR substr(follow_up_by, 1, 10) <= ?) "
        "ORDER BY customer_id",
        (a.customer_name, a.customer_name, a.customer_email, a.customer_email, a.product_interest, a.product_interest,
         a.status, a.status, a.assigned_to_email, a.assigned_to_email, d[0], d[0], d[1], d[1], d[2], d[2], d[3], d[3]))
    return _page(_records(cur, CUSTOMER_FIELDS), a.page, a.page_size, "customers")


CUSTOMER_UPDATE_SQL = {
    "customer_name": "UPDATE crm_customers SET customer_name = ? WHERE customer_id = ?",
    "assigned_to_email": "UPDATE crm_customers SET assigned_to_email = ? WHERE customer_id = ?",
    "customer_email": "UPDATE crm_customers SET customer_email = ? WHERE customer_id = ?",
    "customer_phone": "UPDATE crm_customers SET customer_phone = ? WHERE customer_id = ?",
    "last_contact_date": "UPDATE crm_customers SET last_contact_date = ? WHERE customer_id = ?",
    "product_interest": "UPDATE crm_customers SET product_interest = ? WHERE customer_id = ?",
    "status": "UPDATE crm_customers SET status = ? WHERE customer_id = ?",
    "notes": "UPDATE crm_customers SET notes = ? WHERE customer_id = ?",
    "follow_up_by": "UPDATE crm_customers SET follow_up_by = ? WHERE customer_id = ?",
}


def update_customer(w: WorkplaceWorld, a, writes: list) -> Any:
    _customer(w, a.customer_id)
    value = a.new_value
    if a.field == "status":
        value = _enum(value, CUSTOMER_STATUSES, "status")
    elif a.field == "product_interest":
        value = _enum(value, PRODUCT_INTERESTS, "product interest")
    elif a.field == "assigned_to_email":
        value = _employee(w, value)
    elif a.field == "customer_email":
        value = _email_address(value)
    elif a.field in ("last_contact_date", "follow_up_by"):
        _date(value, a.field)
    w.conn.execute(CUSTOMER_UPDATE_SQL[a.field], (value, a.customer_id))
    writes.append(("crm_customers", a.customer_id))
    return "Customer updated successfully."


def add_customer(w: WorkplaceWorld, a, writes: list) -> Any:
    assignee = _employee(w, a.assigned_to_email)
    email = _email_address(a.customer_email) if a.customer_email else None
    for name in ("last_contact_date", "follow_up_by"):
        if getattr(a, name):
            _date(getattr(a, name), name)
    new_id = w.next_id("crm_customers")
    w.conn.execute("INSERT INTO crm_customers VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (new_id, assignee, a.customer_name, email, a.customer_phone, a.last_contact_date,
                    a.product_interest, a.status, a.follow_up_by, a.notes))
    writes.append(("crm_customers", new_id))
    return new_id


def delete_customer(w: WorkplaceWorld, a, writes: list) -> Any:
    _customer(w, a.customer_id)
    w.conn.execute("DELETE FROM crm_customers WHERE customer_id = ?", (a.customer_id,))
    writes.append(("crm_customers", a.customer_id))
    return "Customer deleted successfully."


IMPLEMENTATIONS: dict[str, Callable[..., Any]] = {
    "company_directory_find_email_address": find_email_address,
    "email_get_email_information_by_id": get_email_information,
    "email_search_emails": search_emails,
    "email_send_email": send_email,
    "email_delete_email": delete_email,
    "email_forward_email": forward_email,
    "email_reply_email": reply_email,
    "calendar_get_event_information_by_id": get_event_information,
    "calendar_search_events": search_events,
    "calendar_create_event": create_event,
    "calendar_delete_event": delete_event,
    "calendar_update_event": update_event,
    "analytics_get_visitor_information_by_id": get_visitor_information,
    "analytics_create_plot": create_plot,
    "analytics_total_visits_count": total_visits_count,
    "analytics_engaged_users_count": engaged_users_count,
    "analytics_traffic_source_count": traffic_source_count,
    "analytics_get_average_session_duration": average_session_duration,
    "project_management_get_task_information_by_id": get_task_information,
    "project_management_search_tasks": search_tasks,
    "project_management_create_task": create_task,
    "project_management_delete_task": delete_task,
    "project_management_update_task": update_task,
    "customer_relationship_manager_search_customers": search_customers,
    "customer_relationship_manager_update_customer": update_customer,
    "customer_relationship_manager_add_customer": add_customer,
    "customer_relationship_manager_delete_customer": delete_customer,
}
assert set(IMPLEMENTATIONS) == set(TOOLS_BY_NAME), "every declared tool needs an implementation"


def _validation_message(name: str, exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(x) for x in err["loc"]) or "(arguments)"
        parts.append(f"{loc}: {err['msg']}")
    more = f" (+{len(exc.errors()) - 3} more)" if len(exc.errors()) > 3 else ""
    return f"invalid arguments for {name}: " + "; ".join(parts) + more


def validate_call(call: ToolCall) -> tuple[BaseModel | None, str | None]:
    """The call's arguments as the tool's model, or the error to show the model."""
    tool = TOOLS_BY_NAME.get(call.name)
    if tool is None:
        return None, f"unknown tool {call.name!r}"
    try:
        return tool.args.model_validate(call.arguments), None
    except ValidationError as exc:
        return None, _validation_message(call.name, exc)


def execute(world: WorkplaceWorld, call: ToolCall) -> ToolResult:
    """Run one call. A failed write changes nothing (its statements run inside a SAVEPOINT that is rolled back)."""
    tool = TOOLS_BY_NAME.get(call.name)
    if tool is None:
        return ToolResult(call.name, error=f"unknown tool {call.name!r}", known=False)
    args, err = validate_call(call)
    if err:
        return ToolResult(call.name, error=err, is_write=tool.writes)
    impl = IMPLEMENTATIONS[call.name]
    if not tool.writes:
        try:
            return ToolResult(call.name, output=impl(world, args))
        except ToolError as exc:
            return ToolResult(call.name, error=str(exc))
        except Exception as exc:  # noqa: BLE001 - a bug in a tool must surface as a crash, not a model error
            raise ToolCrash(f"tool {call.name} crashed on {call.arguments!r}: {exc!r}") from exc
    writes: list[tuple[str, str]] = []
    conn = world.conn
    conn.execute("SAVEPOINT tool_call")
    try:
        output = impl(world, args, writes)
    except ToolError as exc:
        conn.execute("ROLLBACK TO tool_call")
        conn.execute("RELEASE tool_call")
        return ToolResult(call.name, error=str(exc), is_write=True)
    except Exception as exc:  # noqa: BLE001
        conn.execute("ROLLBACK TO tool_call")
        conn.execute("RELEASE tool_call")
        raise ToolCrash(f"tool {call.name} crashed on {call.arguments!r}: {exc!r}") from exc
    conn.execute("RELEASE tool_call")
    if writes and not world.in_scratch:
        world.mark_changed()
    return ToolResult(call.name, output=output, writes=writes, is_write=True)
