"""The workplace environment's tool contract: one pydantic argument model per tool, exported as OpenAI function schemas.

Why here (in schemas/): the environment (rewards/environments/workplace) validates calls with these models and the
task generator (generators/workplace) writes ground-truth calls against them; both may import schemas/ only.

The 27 tools keep NeMo Gym's Workplace Assistant names and argument names (a WorkBench port), so its tasks and
rollouts replay here unchanged. Differences, on purpose:
- enumerations (`field`, `status`, `plot_type`, ...) are declared as JSON Schema enums, not described in prose;
- every string has a length limit and every model forbids unknown arguments, so oversized or nested arguments are
  rejected with a validation error instead of reaching SQL;
- a JSON number sent for a string argument (`"duration": 30`) is accepted as its decimal text ("type coercion");
  NeMo Gym compares such a value as a number and scores the rollout 0.
"""

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from schemas.task import FunctionSpec, ToolSpec


def _number_as_text(v: Any) -> Any:
    """JSON numbers become their decimal text; booleans, lists and dicts are left for validation to reject."""
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, float):
        return repr(v)
    return v


def Text(max_length: int = 200, description: str = "") -> Any:  # noqa: N802 - reads as a type in field declarations
    return Annotated[str, BeforeValidator(_number_as_text), Field(max_length=max_length, description=description)]


Id = Text(32, "8-digit id, e.g. '00000042'")
Date = Text(32, "date, format YYYY-MM-DD")
DateTime = Text(32, "date and time, format YYYY-MM-DD HH:MM:SS")
Email = Text(120, "email address")
Name = Text(200)
Body = Text(4000, "free text")

EMAIL_FIELDS = ("email_id", "inbox/outbox", "sender/recipient", "subject", "sent_datetime", "body")
EVENT_FIELDS = ("event_id", "event_name", "participant_email", "event_start", "duration")
EVENT_UPDATE_FIELDS = ("event_name", "participant_email", "event_start", "duration")
TASK_FIELDS = ("task_id", "task_name", "assigned_to_email", "list_name", "due_date", "board")
TASK_UPDATE_FIELDS = ("task_name", "assigned_to_email", "list_name", "due_date", "board")
CUSTOMER_FIELDS = ("customer_id", "assigned_to_email", "customer_name", "customer_email", "customer_phone",
                   "last_contact_date", "product_interest", "status", "follow_up_by", "notes")
CUSTOMER_UPDATE_FIELDS = ("customer_name", "assigned_to_email", "customer_email", "customer_phone",
                          "last_contact_date", "product_interest", "status", "notes", "follow_up_by")
VISIT_FIELDS = ("date_of_visit", "visitor_id", "page_views", "session_duration_seconds", "traffic_source", "user_engaged")

CUSTOMER_STATUSES = ("Qualified", "Won", "Lost", "Lead", "Proposal")
PRODUCT_INTERESTS = ("Software", "Hardware", "Services", "Consulting", "Training")
TASK_LISTS = ("Backlog", "In Progress", "In Review", "Completed")
TASK_BOARDS = ("Back end", "Front end", "Design")
TRAFFIC_SOURCES = ("direct", "referral", "search engine", "social media")
PLOT_VALUES = ("total_visits", "session_duration_seconds", "user_engaged", "visits_direct", "visits_referral",
               "visits_search_engine", "visits_social_media")
PLOT_TYPES = ("bar", "line", "scatter", "histogram")

# Text columns compared case-sensitively by the verifier (enumerations), as NeMo Gym does.
CASE_SENSITIVE_COLUMNS = frozenset({"status", "list_name", "board"})


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


Page = Annotated[int, Field(ge=1, le=10_000, description="page number, from 1")]
PageSize = Annotated[int, Field(ge=1, le=50, description="results per page (at most 50)")]


# --- company directory -------------------------------------------------------------------------------------------
class FindEmailAddress(_Args):
    name: Text(100, "name or part of a name") = ""  # type: ignore[valid-type]


# --- email -------------------------------------------------------------------------------------------------------
class GetEmailInformation(_Args):
    email_id: Id  # type: ignore[valid-type]
    field: Literal[EMAIL_FIELDS]  # type: ignore[valid-type]


class SearchEmails(_Args):
    query: Text(200, "words that must all appear in subject, body or sender/recipient") = ""  # type: ignore[valid-type]
    date_min: Date | None = None  # type: ignore[valid-type]
    date_max: Date | None = None  # type: ignore[valid-type]
    page: Page = 1
    page_size: PageSize = 5


class SendEmail(_Args):
    recipient: Email  # type: ignore[valid-type]
    subject: Name  # type: ignore[valid-type]
    body: Body  # type: ignore[valid-type]


class DeleteEmail(_Args):
    email_id: Id  # type: ignore[valid-type]


class ForwardEmail(_Args):
    email_id: Id  # type: ignore[valid-type]
    recipient: Email  # type: ignore[valid-type]


class ReplyEmail(_Args):
    email_id: Id  # type: ignore[valid-type]
    body: Body  # type: ignore[valid-type]


# --- calendar ----------------------------------------------------------------------------------------------------
class GetEventInformation(_Args):
    event_id: Id  # type: ignore[valid-type]
    field: Literal[EVENT_FIELDS]  # type: ignore[valid-type]


class SearchEvents(_Args):
    query: Text(200, "matched in event name and participant email") = ""  # type: ignore[valid-type]
    time_min: DateTime | None = None  # type: ignore[valid-type]
    time_max: DateTime | None = None  # type: ignore[valid-type]
    page: Page = 1
    page_size: PageSize = 5


class CreateEvent(_Args):
    event_name: Name  # type: ignore[valid-type]
    participant_email: Email  # type: ignore[valid-type]
    event_start: DateTime  # type: ignore[valid-type]
    duration: Text(8, "duration in minutes")  # type: ignore[valid-type]


class DeleteEvent(_Args):
    event_id: Id  # type: ignore[valid-type]


class UpdateEvent(_Args):
    event_id: Id  # type: ignore[valid-type]
    field: Literal[EVENT_UPDATE_FIELDS]  # type: ignore[valid-type]
    new_value: Name  # type: ignore[valid-type]


# --- analytics ---------------------------------------------------------------------------------------------------
class GetVisitorInformation(_Args):
    visitor_id: Text(32, "visitor id")  # type: ignore[valid-type]


class CreatePlot(_Args):
    time_min: Date  # type: ignore[valid-type]
    time_max: Date  # type: ignore[valid-type]
    value_to_plot: Literal[PLOT_VALUES]  # type: ignore[valid-type]
    plot_type: Literal[PLOT_TYPES]  # type: ignore[valid-type]


class DateRange(_Args):
    time_min: Date | None = None  # type: ignore[valid-type]
    time_max: Date | None = None  # type: ignore[valid-type]


class TrafficSourceCount(DateRange):
    traffic_source: Literal[TRAFFIC_SOURCES] | None = None  # type: ignore[valid-type]


# --- project management ------------------------------------------------------------------------------------------
class GetTaskInformation(_Args):
    task_id: Id  # type: ignore[valid-type]
    field: Literal[TASK_FIELDS]  # type: ignore[valid-type]


class SearchTasks(_Args):
    task_name: Name | None = None  # type: ignore[valid-type]
    assigned_to_email: Email | None = None  # type: ignore[valid-type]
    list_name: Name | None = None  # type: ignore[valid-type]
    due_date: Date | None = None  # type: ignore[valid-type]
    board: Name | None = None  # type: ignore[valid-type]


class CreateTask(_Args):
    task_name: Name  # type: ignore[valid-type]
    assigned_to_email: Email  # type: ignore[valid-type]
    list_name: Literal[TASK_LISTS]  # type: ignore[valid-type]
    due_date: Date  # type: ignore[valid-type]
    board: Literal[TASK_BOARDS]  # type: ignore[valid-type]


class DeleteTask(_Args):
    task_id: Id  # type: ignore[valid-type]


class UpdateTask(_Args):
    task_id: Id  # type: ignore[valid-type]
    field: Literal[TASK_UPDATE_FIELDS]  # type: ignore[valid-type]
    new_value: Name  # type: ignore[valid-type]


# --- CRM ---------------------------------------------------------------------------------------------------------
class SearchCustomers(_Args):
    customer_name: Name | None = None  # type: ignore[valid-type]
    customer_email: Email | None = None  # type: ignore[valid-type]
    product_interest: Name | None = None  # type: ignore[valid-type]
    status: Name | None = None  # type: ignore[valid-type]
    assigned_to_email: Email | None = None  # type: ignore[valid-type]
    last_contact_date_min: Date | None = None  # type: ignore[valid-type]
    last_contact_date_max: Date | None = None  # type: ignore[valid-type]
    follow_up_by_min: Date | None = None  # type: ignore[valid-type]
    follow_up_by_max: Date | None = None  # type: ignore[valid-type]
    page: Page = 1
    page_size: PageSize = 5


class UpdateCustomer(_Args):
    customer_id: Id  # type: ignore[valid-type]
    field: Literal[CUSTOMER_UPDATE_FIELDS]  # type: ignore[valid-type]
    new_value: Body  # type: ignore[valid-type]


class AddCustomer(_Args):
    customer_name: Name  # type: ignore[valid-type]
    assigned_to_email: Email  # type: ignore[valid-type]
    status: Literal[CUSTOMER_STATUSES]  # type: ignore[valid-type]
    customer_email: Email | None = None  # type: ignore[valid-type]
    customer_phone: Text(32) | None = None  # type: ignore[valid-type]
    last_contact_date: Date | None = None  # type: ignore[valid-type]
    product_interest: Literal[PRODUCT_INTERESTS] | None = None  # type: ignore[valid-type]
    notes: Body = ""  # type: ignore[valid-type]
    follow_up_by: Date | None = None  # type: ignore[valid-type]


class DeleteCustomer(_Args):
    customer_id: Id  # type: ignore[valid-type]


class ToolDef(BaseModel):
    """A tool's contract: name, one-line purpose, argument model, toolkit, and whether it changes the world."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)
    name: str
    description: str
    args: type[BaseModel]
    toolkit: str
    writes: bool


def _t(name: str, description: str, args: type[BaseModel], writes: bool = False) -> ToolDef:
    toolkit = next(k for k in TOOLKITS if name.startswith(k + "_"))
    return ToolDef(name=name, description=description, args=args, toolkit=toolkit, writes=writes)


TOOLKITS = ("company_directory", "email", "calendar", "analytics", "project_management", "customer_relationship_manager")

TOOLS: tuple[ToolDef, ...] = (
    _t("company_directory_find_email_address", "Finds all company email addresses containing the given name.",
       FindEmailAddress),
    _t("email_get_email_information_by_id", "Returns one field of an email.", GetEmailInformation),
    _t("email_search_emails", "Searches emails (newest first); every query word must appear in subject, body or "
       "sender/recipient.", SearchEmails),
    _t("email_send_email", "Sends an email.", SendEmail, True),
    _t("email_delete_email", "Deletes an email by id.", DeleteEmail, True),
    _t("email_forward_email", "Forwards an email to a recipient.", ForwardEmail, True),
    _t("email_reply_email", "Replies to an email by id.", ReplyEmail, True),
    _t("calendar_get_event_information_by_id", "Returns one field of a calendar event.", GetEventInformation),
    _t("calendar_search_events", "Searches calendar events (latest first) by name or participant and start time.",
       SearchEvents),
    _t("calendar_create_event", "Creates a calendar event; meetings must start at or after 09:00 and end by 18:00.",
       CreateEvent, True),
    _t("calendar_delete_event", "Deletes a calendar event by id.", DeleteEvent, True),
    _t("calendar_update_event", "Updates one field of a calendar event.", UpdateEvent, True),
    _t("analytics_get_visitor_information_by_id", "Returns the website visits of a visitor.", GetVisitorInformation),
    _t("analytics_create_plot", "Creates a plot of website analytics between two dates.", CreatePlot, True),
    _t("analytics_total_visits_count", "Number of website visits per day in a date range.", DateRange),
    _t("analytics_engaged_users_count", "Number of engaged visitors per day in a date range.", DateRange),
    _t("analytics_traffic_source_count", "Number of visits per day from one traffic source in a date range.",
       TrafficSourceCount),
    _t("analytics_get_average_session_duration", "Average session duration in seconds per day in a date range.",
       DateRange),
    _t("project_management_get_task_information_by_id", "Returns one field of a project task.", GetTaskInformation),
    _t("project_management_search_tasks", "Searches project tasks by name, assignee email, list, due date or board.",
       SearchTasks),
    _t("project_management_create_task", "Creates a project task; the due date may not be in the past.", CreateTask,
       True),
    _t("project_management_delete_task", "Deletes a project task by id.", DeleteTask, True),
    _t("project_management_update_task", "Updates one field of a project task.", UpdateTask, True),
    _t("customer_relationship_manager_search_customers", "Searches CRM customers by any of their fields.",
       SearchCustomers),
    _t("customer_relationship_manager_update_customer", "Updates one field of a CRM customer.", UpdateCustomer, True),
    _t("customer_relationship_manager_add_customer", "Adds a CRM customer.", AddCustomer, True),
    _t("customer_relationship_manager_delete_customer", "Deletes a CRM customer by id.", DeleteCustomer, True),
)

TOOLS_BY_NAME: dict[str, ToolDef] = {t.name: t for t in TOOLS}
WRITE_TOOLS: frozenset[str] = frozenset(t.name for t in TOOLS if t.writes)


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """pydantic's JSON Schema made plain: `anyOf [X, null]` becomes X, titles go, no unknown keys allowed."""
    props: dict[str, Any] = {}
    for name, prop in schema.get("properties", {}).items():
        prop = dict(prop)
        if "anyOf" in prop:
            non_null = [p for p in prop.pop("anyOf") if p.get("type") != "null"]
            if len(non_null) == 1:
                prop.update(non_null[0])
        prop.pop("title", None)
        if not prop.get("description"):
            prop.pop("description", None)
        if prop.get("default") is None:
            prop.pop("default", None)
        props[name] = prop
    out: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    out["required"] = list(schema.get("required", []))
    return out


def tool_specs(names: list[str] | None = None) -> list[ToolSpec]:
    """The OpenAI function schemas of the tools (all, or the named ones in the given order)."""
    chosen = [TOOLS_BY_NAME[n] for n in names] if names is not None else list(TOOLS)
    return [
        ToolSpec(function=FunctionSpec(name=t.name, description=t.description,
                                       parameters=_clean_schema(t.args.model_json_schema())))
        for t in chosen
    ]
