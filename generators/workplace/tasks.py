"""Workplace tasks generated from templates over a seed world, each with its ground-truth calls.

A template reads the world's tables (plain `{table: [row dicts]}`, see world.py), picks entities with a seeded
`random.Random`, and returns the user request, the ground-truth calls (the look-ups a careful assistant makes, then
the writes) and a reference final answer. Why the look-ups are part of the ground truth: demonstrations for SFT are
the ground truth replayed (`rewards.environments.workplace.demonstrations`), and an agent must find ids before it
can change anything. The verifier only replays the writes.

Coverage: 6 categories (email, calendar, project_management, crm, analytics, multi_domain), 1 to 4+ calls,
no-op tasks (nothing matches: the right behaviour is to change nothing and say so), distractor sentences in the
request, and one held-out template per category that only ever appears in the test split (generalisation, not
memorisation). Same world + seed -> the same tasks, in the same order.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import random
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable

from schemas.messages import Message, ToolCall
from schemas.task import TaskRow
from schemas.workplace import TOOLKITS, WRITE_TOOLS, tool_specs

CATEGORIES = ("email", "calendar", "project_management", "crm", "analytics", "multi_domain")


@dataclass
class Draft:
    """What a template produces for one task."""

    request: str
    calls: list[ToolCall]
    answer: str
    distractor: bool = False

    @property
    def noop(self) -> bool:
        return not any(c.name in WRITE_TOOLS for c in self.calls)


def C(tool: str, /, **arguments: Any) -> ToolCall:  # noqa: N802 - reads like a call in the templates
    return ToolCall(name=tool, arguments=arguments)


class WorldView:
    """Indexes over the seed tables that templates query (no SQL here: generators may not import the environment)."""

    def __init__(self, tables: dict[str, list[dict]], today: str):
        self.t = tables
        self.today = dt.datetime.fromisoformat(today)
        self.people = tables["directory"]
        firsts = defaultdict(list)
        for p in self.people:
            firsts[p["name"].split()[0].lower()].append(p)
        self._first_unique = {k: v[0]["email_address"] for k, v in firsts.items() if len(v) == 1}
        self.by_email = {p["email_address"]: p for p in self.people}

    def ref(self, email: str) -> str:
        """How a request names a colleague: the first name when unique, else the full name."""
        name = self.by_email[email]["name"]
        first = name.split()[0]
        return first if self._first_unique.get(first.lower()) == email else name

    def lookup_name(self, email: str) -> str:
        """What to pass to company_directory_find_email_address to find this person (unique match)."""
        name = self.by_email[email]["name"]
        first = name.split()[0].lower()
        return first if self._first_unique.get(first) == email else email.split("@")[0]

    def team(self, team: str) -> list[str]:
        return [p["email_address"] for p in self.people if p["team"] == team]

    def emails_matching(self, words: str) -> list[dict]:
        ws = words.lower().split()
        rows = [e for e in self.t["emails"]
                if all(w in f"{e['subject']} {e['body']} {e['sender/recipient']}".lower() for w in ws)]
        return sorted(rows, key=lambda e: (e["sent_datetime"], e["email_id"]), reverse=True)

    def events_on(self, day: dt.date) -> list[dict]:
        d = day.isoformat()
        return sorted((e for e in self.t["calendar_events"] if e["event_start"][:10] == d),
                      key=lambda e: (e["event_start"], e["event_id"]), reverse=True)

    def future_days(self, rng: random.Random, lo: int = 1, hi: int = 28, weekdays: bool = True) -> dt.date:
        while True:
            d = self.today.date() + dt.timedelta(days=rng.randint(lo, hi))
            if not weekdays or d.weekday() < 5:
                return d


def day_phrase(d: dt.date) -> str:
    return f"{d:%B} {d.day}"


def hhmm(h: int, m: int) -> str:
    return f"{h}:{m:02d}" if h < 12 else (f"{h - 12 or 12}:{m:02d}pm" if m else f"{h - 12 or 12}pm")


DISTRACTORS = (
    "I already took care of the budget thread myself.",
    "No need to touch anything in the analytics dashboard.",
    "By the way, the office is closed next Friday.",
    "Don't worry about last week's newsletter.",
    "Ignore the earlier request about the pricing page; that one is settled.",
)
REPLY_TEXTS = ("Thanks for the update - I will get back to you tomorrow.", "Thanks, let's discuss this at our next sync.",
               "Got it, I will review it today.", "Thanks! Please keep me posted.", "Sounds good, go ahead.")
EVENT_NAMES = ("Risk Management Forum", "Roadmap Review", "Customer Onboarding", "Team Retrospective",
               "Architecture Deep Dive", "Hiring Sync")
NEW_TASKS = ("Write release notes", "Audit access permissions", "Update API docs", "Plan load test",
             "Clean up feature flags", "Draft Q3 goals")
NEW_CUSTOMERS = (("Avery Quinn", "avery.quinn@brightpath.example.com"), ("Jordan Blake", "jordan.blake@novatech.example.com"),
                 ("Riley Chen", "riley.chen@summitworks.example.com"), ("Morgan Diaz", "morgan.diaz@oakridge.example.com"),
                 ("Casey Park", "casey.park@bluewave.example.com"), ("Taylor Reed", "taylor.reed@ironleaf.example.com"))


# ------------------------------------------------------------------------------------------------------ email
def _reply_target(w: WorldView, rng: random.Random) -> tuple[str, str, str, dict] | None:
    """(person, topic, search query, newest matching inbox email from that person) or None."""
    e = rng.choice([e for e in w.t["emails"] if e["inbox/outbox"] == "inbox"])
    person = e["sender/recipient"]
    topic = e["subject"].split(" ", 2)[-1] if e["subject"].count(" ") >= 2 else e["subject"]
    query = f"{person.split('@')[0].split('.')[0]} {topic}"
    found = w.emails_matching(query)
    if not found or found[0]["inbox/outbox"] != "inbox" or found[0]["sender/recipient"] != person:
        return None
    return person, topic, query, found[0]


def email_reply_last(w: WorldView, rng: random.Random) -> Draft | None:
    hit = _reply_target(w, rng)
    if hit is None:
        return None
    person, topic, query, target = hit
    text = rng.choice(REPLY_TEXTS)
    req = rng.choice([f"Reply to {w.ref(person)}'s last email about '{topic}' with '{text}'",
                      f"Answer the latest email from {w.ref(person)} about '{topic}': '{text}'"])
    return Draft(req, [C("email_search_emails", query=query), C("email_reply_email", email_id=target["email_id"], body=text)],
                 f"I replied to {w.ref(person)}'s latest email about '{topic}'.")


def email_forward(w: WorldView, rng: random.Random) -> Draft | None:
    e = rng.choice(w.t["emails"])
    topic = e["subject"]
    found = w.emails_matching(topic)
    to = rng.choice(w.people)["email_address"]
    if not found or to == found[0]["sender/recipient"]:
        return None
    req = rng.choice([f"Forward the most recent email titled '{topic}' to {w.ref(to)}",
                      f"Please send {w.ref(to)} a forward of the latest '{topic}' email"])
    return Draft(req, [C("company_directory_find_email_address", name=w.lookup_name(to)),
                       C("email_search_emails", query=topic),
                       C("email_forward_email", email_id=found[0]["email_id"], recipient=to)],
                 f"I forwarded the latest '{topic}' email to {w.ref(to)}.")


def email_send(w: WorldView, rng: random.Random) -> Draft | None:
    to = rng.choice(w.people)["email_address"]
    task = rng.choice(w.t["project_tasks"])
    subject = f"Quick question about {task['task_name']}"
    body = rng.choice(["Do you have a minute tomorrow to go over it?", "Could you send me the latest status?",
                       "Can we move the deadline by a week?"])
    req = rng.choice([f"Send an email to {w.ref(to)} with the subject '{subject}' saying '{body}'",
                      f"Email {w.ref(to)}: subject '{subject}', body '{body}'"])
    return Draft(req, [C("company_directory_find_email_address", name=w.lookup_name(to)),
                       C("email_send_email", recipient=to, subject=subject, body=body)],
                 f"I sent {w.ref(to)} the email '{subject}'.")


def email_reply_noop(w: WorldView, rng: random.Random) -> Draft | None:
    person = rng.choice(w.people)["email_address"]
    task = rng.choice(w.t["project_tasks"])["task_name"]
    query = f"{person.split('@')[0].split('.')[0]} {task}"
    if w.emails_matching(query):
        return None
    text = rng.choice(REPLY_TEXTS)
    return Draft(f"Reply to {w.ref(person)}'s last email about '{task}' with '{text}'",
                 [C("email_search_emails", query=query)],
                 f"I found no email from {w.ref(person)} about '{task}', so I did not send anything.")


def email_delete_thread(w: WorldView, rng: random.Random) -> Draft | None:  # held out
    e = rng.choice(w.t["emails"])
    person, subject = e["sender/recipient"], e["subject"]
    query = f"{person.split('@')[0]} {subject}"
    found = [x for x in w.emails_matching(query) if x["sender/recipient"] == person and x["subject"] == subject]
    if not found or len(found) != len(w.emails_matching(query)):
        return None
    req = f"Delete every email exchanged with {w.ref(person)} with the subject '{subject}'"
    return Draft(req, [C("email_search_emails", query=query, page_size=20)]
                 + [C("email_delete_email", email_id=x["email_id"]) for x in found],
                 f"I deleted {len(found)} email(s) with {w.ref(person)} titled '{subject}'.")


# --------------------------------------------------------------------------------------------------- calendar
def cal_create(w: WorldView, rng: random.Random) -> Draft | None:
    who = rng.choice(w.people)["email_address"]
    day = w.future_days(rng)
    dur = rng.choice([30, 60, 90])
    h, m = rng.choice([(9, 0), (10, 0), (10, 30), (11, 0), (13, 0), (14, 30), (15, 0), (16, 0)])
    name = rng.choice(EVENT_NAMES)
    start = f"{day.isoformat()} {h:02d}:{m:02d}:00"
    req = rng.choice([f"Schedule a {dur}-minute '{name}' with {w.ref(who)} on {day_phrase(day)} at {hhmm(h, m)}",
                      f"Book '{name}' with {w.ref(who)} for {dur} minutes, {day_phrase(day)} at {hhmm(h, m)}"])
    return Draft(req, [C("company_directory_find_email_address", name=w.lookup_name(who)),
                       C("calendar_create_event", event_name=name, participant_email=who, event_start=start,
                         duration=str(dur))],
                 f"I scheduled '{name}' with {w.ref(who)} on {day_phrase(day)} at {hhmm(h, m)}.")


def _day_bounds(day: dt.date) -> dict[str, str]:
    return {"time_min": f"{day.isoformat()} 00:00:00", "time_max": f"{day.isoformat()} 23:59:59"}


def cal_rename_last(w: WorldView, rng: random.Random) -> Draft | None:
    day = w.future_days(rng, 0, 28)
    events = w.events_on(day)
    if not events or len(events) > 5:
        return None
    new = rng.choice(EVENT_NAMES)
    req = rng.choice([f"Can you change the name of the last event on {day_phrase(day)} to {new}",
                      f"Rename my last meeting on {day_phrase(day)} to '{new}'"])
    return Draft(req, [C("calendar_search_events", **_day_bounds(day)),
                       C("calendar_update_event", event_id=events[0]["event_id"], field="event_name", new_value=new)],
                 f"The last event on {day_phrase(day)} is now called {new}.")


def cal_cancel_with(w: WorldView, rng: random.Random) -> Draft | None:
    e = rng.choice(w.t["calendar_events"])
    day = dt.date.fromisoformat(e["event_start"][:10])
    if day <= w.today.date():
        return None
    who = e["participant_email"]
    hits = [x for x in w.events_on(day) if x["participant_email"] == who]
    req = rng.choice([f"Cancel all my meetings with {w.ref(who)} on {day_phrase(day)}",
                      f"Please delete every event with {w.ref(who)} on {day_phrase(day)}"])
    return Draft(req, [C("calendar_search_events", query=who, **_day_bounds(day))]
                 + [C("calendar_delete_event", event_id=x["event_id"]) for x in hits],
                 f"I cancelled {len(hits)} meeting(s) with {w.ref(who)} on {day_phrase(day)}.")


def cal_cancel_noop(w: WorldView, rng: random.Random) -> Draft | None:
    who = rng.choice(w.people)["email_address"]
    day = w.future_days(rng)
    if any(x["participant_email"] == who for x in w.events_on(day)):
        return None
    return Draft(f"Cancel all my meetings with {w.ref(who)} on {day_phrase(day)}",
                 [C("calendar_search_events", query=who, **_day_bounds(day))],
                 f"There are no meetings with {w.ref(who)} on {day_phrase(day)}, so nothing was cancelled.")


def cal_reschedule(w: WorldView, rng: random.Random) -> Draft | None:
    e = rng.choice(w.t["calendar_events"])
    day = dt.date.fromisoformat(e["event_start"][:10])
    who = e["participant_email"]
    same = [x for x in w.events_on(day) if x["participant_email"] == who and x["event_name"] == e["event_name"]]
    if day <= w.today.date() or len(same) != 1:
        return None
    dur = int(e["duration"])
    h, m = rng.choice([(9, 0), (10, 0), (11, 30), (13, 0), (14, 0), (15, 30)])
    end = h * 60 + m + dur
    new = f"{day.isoformat()} {h:02d}:{m:02d}:00"
    if end > 18 * 60 or new == e["event_start"]:
        return None
    req = f"Move the '{e['event_name']}' with {w.ref(who)} on {day_phrase(day)} to {hhmm(h, m)}"
    return Draft(req, [C("calendar_search_events", query=who, **_day_bounds(day)),
                       C("calendar_update_event", event_id=e["event_id"], field="event_start", new_value=new)],
                 f"I moved '{e['event_name']}' with {w.ref(who)} to {hhmm(h, m)} on {day_phrase(day)}.")


def cal_extend_first(w: WorldView, rng: random.Random) -> Draft | None:  # held out
    day = w.future_days(rng, 0, 28)
    events = w.events_on(day)
    if not events or len(events) > 5:
        return None
    first = events[-1]
    start = dt.datetime.fromisoformat(first["event_start"])
    new = rng.choice([45, 60, 75, 120])
    if str(new) == first["duration"] or start + dt.timedelta(minutes=new) > start.replace(hour=18, minute=0):
        return None
    return Draft(f"Make the first meeting on {day_phrase(day)} {new} minutes long",
                 [C("calendar_search_events", **_day_bounds(day)),
                  C("calendar_update_event", event_id=first["event_id"], field="duration", new_value=str(new))],
                 f"The first meeting on {day_phrase(day)} now lasts {new} minutes.")


# ------------------------------------------------------------------------------------------ project management
def pm_move(w: WorldView, rng: random.Random) -> Draft | None:
    t = rng.choice(w.t["project_tasks"])
    dest = rng.choice([x for x in ("Backlog", "In Progress", "In Review", "Completed") if x != t["list_name"]])
    req = rng.choice([f"Move the task '{t['task_name']}' to {dest}",
                      f"'{t['task_name']}' should be in {dest} now, please update it"])
    return Draft(req, [C("project_management_search_tasks", task_name=t["task_name"]),
                       C("project_management_update_task", task_id=t["task_id"], field="list_name", new_value=dest)],
                 f"I moved '{t['task_name']}' to {dest}.")


def _tasks_of(w: WorldView, who: str, lst: str, board: str) -> list[dict]:
    return [t for t in w.t["project_tasks"] if t["assigned_to_email"] == who and t["list_name"] == lst
            and t["board"] == board]


def pm_reassign(w: WorldView, rng: random.Random, want_noop: bool = False) -> Draft | None:
    devs = w.team("engineering") + w.team("design")
    a, b = rng.sample(devs, 2)
    lst = rng.choice(["Backlog", "In Progress", "In Review"])
    board = rng.choice(["Back end", "Front end", "Design"])
    hits = _tasks_of(w, a, lst, board)
    if want_noop != (not hits) or len(hits) > 4:
        return None
    req = rng.choice([f"{w.ref(b)} is taking over all of {w.ref(a)}'s {lst} tasks on the {board} board. Reassign them",
                      f"Reassign every {board} task in {lst} from {w.ref(a)} to {w.ref(b)}"])
    calls = [C("company_directory_find_email_address", name=w.lookup_name(a)),
             C("project_management_search_tasks", assigned_to_email=a, list_name=lst, board=board)]
    if hits:
        calls.insert(1, C("company_directory_find_email_address", name=w.lookup_name(b)))
    calls += [C("project_management_update_task", task_id=t["task_id"], field="assigned_to_email", new_value=b)
              for t in hits]
    ans = (f"I reassigned {len(hits)} task(s) from {w.ref(a)} to {w.ref(b)}." if hits else
           f"{w.ref(a)} has no {lst} tasks on the {board} board, so nothing was reassigned.")
    return Draft(req, calls, ans)


def pm_reassign_noop(w: WorldView, rng: random.Random) -> Draft | None:
    return pm_reassign(w, rng, want_noop=True)


def pm_create(w: WorldView, rng: random.Random) -> Draft | None:
    who = rng.choice(w.team("engineering") + w.team("design"))
    name = rng.choice(NEW_TASKS)
    board = rng.choice(["Back end", "Front end", "Design"])
    lst = rng.choice(["Backlog", "In Progress"])
    due = w.future_days(rng, 3, 40)
    req = rng.choice([f"Create a task '{name}' for {w.ref(who)} on the {board} board in {lst}, due {day_phrase(due)}",
                      f"Add '{name}' to the {board} board ({lst}), assigned to {w.ref(who)} and due {due.isoformat()}"])
    return Draft(req, [C("company_directory_find_email_address", name=w.lookup_name(who)),
                       C("project_management_create_task", task_name=name, assigned_to_email=who, list_name=lst,
                         due_date=due.isoformat(), board=board)],
                 f"I created '{name}' for {w.ref(who)}, due {day_phrase(due)}.")


def pm_delete_completed(w: WorldView, rng: random.Random) -> Draft | None:
    who = rng.choice(w.team("engineering") + w.team("design"))
    board = rng.choice(["Back end", "Front end", "Design"])
    hits = _tasks_of(w, who, "Completed", board)
    if len(hits) > 4:
        return None
    calls = [C("company_directory_find_email_address", name=w.lookup_name(who)),
             C("project_management_search_tasks", assigned_to_email=who, list_name="Completed", board=board)]
    calls += [C("project_management_delete_task", task_id=t["task_id"]) for t in hits]
    ans = (f"I deleted {len(hits)} completed task(s) of {w.ref(who)}." if hits else
           f"{w.ref(who)} has no completed tasks on the {board} board, so nothing was deleted.")
    return Draft(f"Clean up: delete {w.ref(who)}'s completed tasks on the {board} board", calls, ans)


def pm_push_due(w: WorldView, rng: random.Random) -> Draft | None:
    t = rng.choice([t for t in w.t["project_tasks"] if t["list_name"] != "Completed"])
    due = w.future_days(rng, 5, 45)
    if due.isoformat() == t["due_date"]:
        return None
    return Draft(rng.choice([f"Push the due date of '{t['task_name']}' to {day_phrase(due)}",
                             f"'{t['task_name']}' is now due {due.isoformat()}; update it"]),
                 [C("project_management_search_tasks", task_name=t["task_name"]),
                  C("project_management_update_task", task_id=t["task_id"], field="due_date", new_value=due.isoformat())],
                 f"'{t['task_name']}' is now due {day_phrase(due)}.")


def pm_rename(w: WorldView, rng: random.Random) -> Draft | None:  # held out
    t = rng.choice(w.t["project_tasks"])
    new = f"{t['task_name']} (v2)"
    return Draft(f"Rename the task '{t['task_name']}' to '{new}'",
                 [C("project_management_search_tasks", task_name=t["task_name"]),
                  C("project_management_update_task", task_id=t["task_id"], field="task_name", new_value=new)],
                 f"The task is now called '{new}'.")


# --------------------------------------------------------------------------------------------------------- crm
PRODUCTS = ("Software", "Hardware", "Services", "Consulting", "Training")
STATUSES = ("Qualified", "Won", "Lost", "Lead", "Proposal")


def _customers(w: WorldView, who: str, product: str, status: str) -> list[dict]:
    return [c for c in w.t["crm_customers"] if c["assigned_to_email"] == who and c["product_interest"] == product
            and c["status"] == status]


def crm_reassign(w: WorldView, rng: random.Random, want_noop: bool = False) -> Draft | None:
    sales = w.team("sales")
    if len(sales) < 2:
        return None
    a, b = rng.sample(sales, 2)
    product, status = rng.choice(PRODUCTS), rng.choice(("Lead", "Qualified", "Proposal"))
    hits = _customers(w, a, product, status)
    if want_noop != (not hits) or len(hits) > 4:
        return None
    word = {"Lead": "leads", "Qualified": "qualified customers", "Proposal": "customers at the proposal stage"}[status]
    req = rng.choice([f"{w.ref(b)} is taking over all of {w.ref(a)}'s {word} that are interested in "
                      f"{product.lower()}. Can you reassign them in the crm?",
                      f"Reassign {w.ref(a)}'s {product} {word} to {w.ref(b)} in the CRM"])
    calls = [C("company_directory_find_email_address", name=w.lookup_name(a)),
             C("customer_relationship_manager_search_customers", assigned_to_email=a, product_interest=product,
               status=status, page_size=50)]
    if hits:
        calls.insert(1, C("company_directory_find_email_address", name=w.lookup_name(b)))
    calls += [C("customer_relationship_manager_update_customer", customer_id=c["customer_id"],
                field="assigned_to_email", new_value=b) for c in hits]
    ans = (f"I reassigned {len(hits)} customer(s) from {w.ref(a)} to {w.ref(b)}." if hits else
           f"{w.ref(a)} has no {product} {word}, so nothing changed.")
    return Draft(req, calls, ans)


def crm_reassign_noop(w: WorldView, rng: random.Random) -> Draft | None:
    return crm_reassign(w, rng, want_noop=True)


def crm_status(w: WorldView, rng: random.Random) -> Draft | None:
    c = rng.choice(w.t["crm_customers"])
    new = rng.choice([s for s in STATUSES if s != c["status"]])
    if sum(1 for x in w.t["crm_customers"] if c["customer_name"].lower() in x["customer_name"].lower()) != 1:
        return None
    return Draft(rng.choice([f"Mark {c['customer_name']} as {new} in the CRM",
                             f"{c['customer_name']}'s status should be {new} now; please update the crm"]),
                 [C("customer_relationship_manager_search_customers", customer_name=c["customer_name"]),
                  C("customer_relationship_manager_update_customer", customer_id=c["customer_id"], field="status",
                    new_value=new)],
                 f"{c['customer_name']} is now {new}.")


def crm_add(w: WorldView, rng: random.Random) -> Draft | None:
    sales = w.team("sales")
    if not sales:
        return None
    who = rng.choice(sales)
    name, email = rng.choice(NEW_CUSTOMERS)
    product = rng.choice(PRODUCTS)
    return Draft(f"Add {name} ({email}) to the CRM as a new lead interested in {product.lower()}, assigned to "
                 f"{w.ref(who)}",
                 [C("company_directory_find_email_address", name=w.lookup_name(who)),
                  C("customer_relationship_manager_add_customer", customer_name=name, assigned_to_email=who,
                    status="Lead", customer_email=email, product_interest=product)],
                 f"I added {name} as a lead assigned to {w.ref(who)}.")


def crm_delete_lost(w: WorldView, rng: random.Random) -> Draft | None:
    sales = w.team("sales")
    if not sales:
        return None
    who, product = rng.choice(sales), rng.choice(PRODUCTS)
    hits = _customers(w, who, product, "Lost")
    if len(hits) > 4:
        return None
    calls = [C("company_directory_find_email_address", name=w.lookup_name(who)),
             C("customer_relationship_manager_search_customers", assigned_to_email=who, product_interest=product,
               status="Lost", page_size=50)]
    calls += [C("customer_relationship_manager_delete_customer", customer_id=c["customer_id"]) for c in hits]
    ans = (f"I deleted {len(hits)} lost customer(s) of {w.ref(who)}." if hits else
           f"{w.ref(who)} has no lost customers interested in {product.lower()}; nothing was deleted.")
    return Draft(f"We no longer need {w.ref(who)}'s lost customers interested in {product.lower()}. Delete them "
                 "from the crm", calls, ans)


def crm_phone(w: WorldView, rng: random.Random) -> Draft | None:  # held out
    c = rng.choice(w.t["crm_customers"])
    phone = f"{rng.randint(201, 989)}-{rng.randint(100, 999)}-{rng.randint(1000, 9999)}"
    if sum(1 for x in w.t["crm_customers"] if c["customer_name"].lower() in x["customer_name"].lower()) != 1:
        return None
    return Draft(f"{c['customer_name']} has a new phone number, {phone}. Update the CRM",
                 [C("customer_relationship_manager_search_customers", customer_name=c["customer_name"]),
                  C("customer_relationship_manager_update_customer", customer_id=c["customer_id"],
                    field="customer_phone", new_value=phone)],
                 f"{c['customer_name']}'s phone number is now {phone}.")


# --------------------------------------------------------------------------------------------------- analytics
PLOT_NAMES = {"total_visits": "total visits", "session_duration_seconds": "session duration",
              "user_engaged": "engaged users", "visits_direct": "direct visits", "visits_referral": "referral visits",
              "visits_search_engine": "search engine visits", "visits_social_media": "social media visits"}


def _visit_days(w: WorldView) -> list[str]:
    return sorted({v["date_of_visit"] for v in w.t["analytics_visits"]})


def an_plot(w: WorldView, rng: random.Random) -> Draft | None:
    days = _visit_days(w)
    i = rng.randrange(0, len(days) - 7)
    lo, hi = days[i], days[min(len(days) - 1, i + rng.choice([3, 6, 13]))]
    value, kind = rng.choice(list(PLOT_NAMES)), rng.choice(["bar", "line", "scatter", "histogram"])
    return Draft(rng.choice([f"Make a {kind} plot of {PLOT_NAMES[value]} from {lo} to {hi}",
                             f"Can you create a {kind} chart of {PLOT_NAMES[value]} between {lo} and {hi}?"]),
                 [C("analytics_create_plot", time_min=lo, time_max=hi, value_to_plot=value, plot_type=kind)],
                 f"I created a {kind} plot of {PLOT_NAMES[value]} from {lo} to {hi}.")


def an_conditional(w: WorldView, rng: random.Random) -> Draft | None:
    days = _visit_days(w)
    day = rng.choice(days[:-1])
    visits = sum(1 for v in w.t["analytics_visits"] if v["date_of_visit"] == day)
    threshold = visits + rng.choice([-5, -2, 2, 5])
    lo = days[max(0, days.index(day) - 6)]
    calls = [C("analytics_total_visits_count", time_min=day, time_max=day)]
    if visits > threshold:
        calls.append(C("analytics_create_plot", time_min=lo, time_max=day, value_to_plot="total_visits",
                       plot_type="line"))
        ans = f"There were {visits} visits on {day}, more than {threshold}, so I created the line plot."
    else:
        ans = f"There were only {visits} visits on {day}, not more than {threshold}, so no plot was needed."
    return Draft(f"If we had more than {threshold} website visits on {day}, make a line plot of total visits from "
                 f"{lo} to {day}. Otherwise do nothing.", calls, ans)


def an_compare(w: WorldView, rng: random.Random) -> Draft | None:  # held out
    days = _visit_days(w)
    a, b = sorted(rng.sample(days, 2))

    def avg(d: str) -> float:
        xs = [int(v["session_duration_seconds"]) for v in w.t["analytics_visits"] if v["date_of_visit"] == d]
        return sum(xs) / len(xs)

    calls = [C("analytics_get_average_session_duration", time_min=a, time_max=b)]
    if avg(a) > avg(b):
        calls.append(C("analytics_create_plot", time_min=a, time_max=b, value_to_plot="session_duration_seconds",
                       plot_type="bar"))
        ans = f"Average session duration was higher on {a}, so I made the bar plot."
    else:
        ans = f"Average session duration was not higher on {a} than on {b}, so I made no plot."
    return Draft(f"If the average session duration on {a} was higher than on {b}, create a bar plot of session "
                 f"duration from {a} to {b}; if not, leave everything as it is.", calls, ans)


# ------------------------------------------------------------------------------------------------ multi-domain
def md_remind_and_move(w: WorldView, rng: random.Random) -> Draft | None:
    t = rng.choice([t for t in w.t["project_tasks"] if t["list_name"] == "Backlog"])
    who = t["assigned_to_email"]
    subject, body = f"Reminder: {t['task_name']}", f"Please start on '{t['task_name']}'; it is due {t['due_date']}."
    return Draft(f"Email {w.ref(who)} with the subject '{subject}' and the body \"{body}\", then move "
                 f"'{t['task_name']}' to In Progress",
                 [C("project_management_search_tasks", task_name=t["task_name"]),
                  C("email_send_email", recipient=who, subject=subject, body=body),
                  C("project_management_update_task", task_id=t["task_id"], field="list_name",
                    new_value="In Progress")],
                 f"I emailed {w.ref(who)} and moved '{t['task_name']}' to In Progress.")


def md_reply_and_review(w: WorldView, rng: random.Random) -> Draft | None:
    hit = _reply_target(w, rng)
    if hit is None:
        return None
    person, topic, query, target = hit
    tasks = [t for t in w.t["project_tasks"] if t["task_name"] == topic]
    if len(tasks) != 1 or tasks[0]["list_name"] == "In Review":
        return None
    t = tasks[0]
    body = "Thanks, I moved it to review."
    return Draft(f"Reply to {w.ref(person)}'s last email about '{topic}' with '{body}' and move the task '{topic}' "
                 "to In Review",
                 [C("email_search_emails", query=query), C("email_reply_email", email_id=target["email_id"], body=body),
                  C("project_management_search_tasks", task_name=topic),
                  C("project_management_update_task", task_id=t["task_id"], field="list_name", new_value="In Review")],
                 f"I replied to {w.ref(person)} and moved '{topic}' to In Review.")


def md_meeting_and_task(w: WorldView, rng: random.Random) -> Draft | None:
    who = rng.choice(w.team("engineering") + w.team("design"))
    day = w.future_days(rng, 1, 14)
    due = day + dt.timedelta(days=7)
    name = rng.choice(NEW_TASKS)
    return Draft(f"Set up a 30-minute 'Kickoff: {name}' with {w.ref(who)} on {day_phrase(day)} at 10:00 and create a "
                 f"Backlog task '{name}' for them on the Back end board due {due.isoformat()}",
                 [C("company_directory_find_email_address", name=w.lookup_name(who)),
                  C("calendar_create_event", event_name=f"Kickoff: {name}", participant_email=who,
                    event_start=f"{day.isoformat()} 10:00:00", duration="30"),
                  C("project_management_create_task", task_name=name, assigned_to_email=who, list_name="Backlog",
                    due_date=due.isoformat(), board="Back end")],
                 f"I booked the kickoff with {w.ref(who)} and created the task '{name}'.")


def md_if_meeting_email(w: WorldView, rng: random.Random) -> Draft | None:
    who = rng.choice(w.people)["email_address"]
    day = w.future_days(rng, 1, 21)
    has = any(x["participant_email"] == who for x in w.events_on(day))
    subject, body = "Agenda", "Please send me your agenda points before our meeting."
    calls = [C("calendar_search_events", query=who, **_day_bounds(day))]
    if has:
        calls.append(C("email_send_email", recipient=who, subject=subject, body=body))
        ans = f"You meet {w.ref(who)} on {day_phrase(day)}, so I emailed them for agenda points."
    else:
        ans = f"You have no meeting with {w.ref(who)} on {day_phrase(day)}, so I sent nothing."
    return Draft(f"If I have a meeting with {w.ref(who)} on {day_phrase(day)}, email them with the subject "
                 f"'{subject}' and the body '{body}'. If not, don't send anything.", calls, ans)


def md_forward_to_assignee(w: WorldView, rng: random.Random) -> Draft | None:  # held out
    e = rng.choice([e for e in w.t["emails"] if e["inbox/outbox"] == "inbox"])
    topic = e["subject"].split(" ", 2)[-1]
    tasks = [t for t in w.t["project_tasks"] if t["task_name"] == topic]
    found = w.emails_matching(e["subject"])
    if len(tasks) != 1 or not found or tasks[0]["assigned_to_email"] == found[0]["sender/recipient"]:
        return None
    who = tasks[0]["assigned_to_email"]
    return Draft(f"Forward the latest email titled '{e['subject']}' to whoever is assigned the task '{topic}'",
                 [C("project_management_search_tasks", task_name=topic),
                  C("email_search_emails", query=e["subject"]),
                  C("email_forward_email", email_id=found[0]["email_id"], recipient=who)],
                 f"I forwarded it to {w.ref(who)}, who owns '{topic}'.")


@dataclass(frozen=True)
class Template:
    id: str
    category: str
    build: Callable[[WorldView, random.Random], Draft | None]
    held_out: bool = False
    weight: float = 1.0


TEMPLATES: tuple[Template, ...] = (
    Template("email.reply_last", "email", email_reply_last),
    Template("email.forward", "email", email_forward),
    Template("email.send", "email", email_send),
    Template("email.reply_noop", "email", email_reply_noop, weight=0.6),
    Template("email.delete_thread", "email", email_delete_thread, held_out=True, weight=0.5),
    Template("calendar.create", "calendar", cal_create),
    Template("calendar.rename_last", "calendar", cal_rename_last),
    Template("calendar.cancel_with", "calendar", cal_cancel_with),
    Template("calendar.cancel_noop", "calendar", cal_cancel_noop, weight=0.6),
    Template("calendar.reschedule", "calendar", cal_reschedule),
    Template("calendar.extend_first", "calendar", cal_extend_first, held_out=True, weight=0.5),
    Template("project_management.move", "project_management", pm_move),
    Template("project_management.reassign", "project_management", pm_reassign),
    Template("project_management.reassign_noop", "project_management", pm_reassign_noop, weight=0.6),
    Template("project_management.create", "project_management", pm_create),
    Template("project_management.delete_completed", "project_management", pm_delete_completed),
    Template("project_management.push_due", "project_management", pm_push_due),
    Template("project_management.rename", "project_management", pm_rename, held_out=True, weight=0.5),
    Template("crm.reassign", "crm", crm_reassign),
    Template("crm.reassign_noop", "crm", crm_reassign_noop, weight=0.6),
    Template("crm.status", "crm", crm_status),
    Template("crm.add", "crm", crm_add),
    Template("crm.delete_lost", "crm", crm_delete_lost),
    Template("crm.phone", "crm", crm_phone, held_out=True, weight=0.5),
    Template("analytics.plot", "analytics", an_plot),
    Template("analytics.conditional", "analytics", an_conditional),
    Template("analytics.compare", "analytics", an_compare, held_out=True, weight=0.5),
    Template("multi_domain.remind_and_move", "multi_domain", md_remind_and_move),
    Template("multi_domain.reply_and_review", "multi_domain", md_reply_and_review),
    Template("multi_domain.meeting_and_task", "multi_domain", md_meeting_and_task),
    Template("multi_domain.if_meeting_email", "multi_domain", md_if_meeting_email),
    Template("multi_domain.forward_to_assignee", "multi_domain", md_forward_to_assignee, held_out=True, weight=0.5),
)


CATEGORY_TOOLKITS = {"email": ("email",), "calendar": ("calendar",), "project_management": ("project_management",),
                     "crm": ("customer_relationship_manager",), "analytics": ("analytics",), "multi_domain": ()}


def _relevant(by_kit: dict, category: str, calls: list[ToolCall]) -> list:
    kits = set(CATEGORY_TOOLKITS[category]) | {k for k in TOOLKITS for c in calls if c.name.startswith(k + "_")}
    kits.add("company_directory")
    return [s for k in TOOLKITS if k in kits for s in by_kit[k]]


def difficulty(n_calls: int) -> str:
    return str(n_calls) if n_calls < 4 else "4+"


def _split_for(task_key: str, ratios: tuple[float, float, float]) -> str:
    h = int.from_bytes(hashlib.blake2b(task_key.encode(), digest_size=8).digest(), "little") / 2**64
    return "train" if h < ratios[0] else ("validation" if h < ratios[0] + ratios[1] else "test")


def generate_tasks(tables: dict[str, list[dict]], *, today: str, context: str, n: int = 1200, seed: int = 0,
                   distractor_rate: float = 0.25, ratios: tuple[float, float, float] = (0.8, 0.1, 0.1),
                   templates: tuple[Template, ...] = TEMPLATES, world_seed: int | None = None,
                   tools: str = "all") -> list[TaskRow]:
    """`n` distinct tasks over the world, spread over templates by weight; deterministic for (tables, seed).

    Held-out templates go to the test split only; the others are split by a hash of the request text.
    `world_seed` (the seed the world spec was generated with; None = the spec's own) is recorded in each task's
    metadata so that a verifier can rebuild the task's world.
    `tools="all"` gives every task all 27 tools (as WorkBench / NeMo Gym do); `tools="relevant"` gives the toolkits
    of the task's category (all toolkits the ground truth uses for multi-domain tasks) plus the company directory,
    which shortens the system prompt about threefold for small models on CPU.
    """
    if tools not in ("all", "relevant"):
        raise ValueError(f"tools must be 'all' or 'relevant', got {tools!r}")
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    view = WorldView(tables, today)
    rng = random.Random(seed)
    total = sum(t.weight for t in templates)
    quotas = [max(1, round(n * t.weight / total)) for t in templates]
    specs = tool_specs()
    by_kit = {k: [s for s in specs if s.function.name.startswith(k + "_")] for k in TOOLKITS}
    tasks: list[TaskRow] = []
    seen: set[str] = set()
    for tmpl, quota in zip(templates, quotas):
        made = attempts = 0
        while made < quota and attempts < quota * 40:
            attempts += 1
            draft = tmpl.build(view, rng)
            if draft is None:
                continue
            request = draft.request.strip()
            if request[-1] not in ".?!'\"":
                request += "."
            if rng.random() < distractor_rate:
                request = f"{request} {rng.choice(DISTRACTORS)}"
                draft.distractor = True
            if request in seen:
                continue
            seen.add(request)
            made += 1
            n_writes = sum(1 for c in draft.calls if c.name in WRITE_TOOLS)
            split = "test" if tmpl.held_out else _split_for(request, ratios)
            tid = f"wp-{hashlib.blake2b(f'{tmpl.id}|{request}'.encode(), digest_size=6).hexdigest()}"
            tasks.append(TaskRow(
                id=tid, split=split,
                prompt=[Message(role="system", content=context), Message(role="user", content=request)],
                tools=specs if tools == "all" else _relevant(by_kit, tmpl.category, draft.calls),
                answer=draft.answer, ground_truth_calls=draft.calls,
                metadata={"category": tmpl.category, "template": tmpl.id, "held_out_template": tmpl.held_out,
                          "difficulty": difficulty(len(draft.calls)), "n_calls": len(draft.calls),
                          "n_writes": n_writes, "noop": n_writes == 0, "distractor": draft.distractor,
                          "today": today, "world_seed": world_seed},
            ))
    return tasks
