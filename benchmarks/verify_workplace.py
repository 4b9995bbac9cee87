"""Verifications per second of the workplace verifier on one core, beside NeMo Gym's pandas-based `is_correct`.

What is measured (process pinned to one CPU core where the OS allows):
- ours, cold: `verify_trajectory` with the ground-truth cache cleared before every call, so each verification
  replays BOTH sides (trajectory and ground truth) in a rolled-back SQLite savepoint and compares the written rows.
  This is the like-for-like number against NeMo Gym, which replays both sides every time.
- ours, warm: the ground-truth effect cached per task (what training sees: a task is verified once per completion
  of its group).
  Both on (a) the 19 parity rollouts over NeMo Gym's own CSV world and (b) the ground-truth demonstrations of 1,000
  generated tasks (1-4+ calls, reads included).
- NeMo Gym's algorithm: a pandas re-implementation of its `is_correct` (read the CSV world afresh for each side,
  replay the calls with pandas, lowercase text columns except status/list_name/board, `DataFrame.equals` per
  table), written from its published source for this comparison. Its verdicts are checked against the 19 rewards
  NeMo Gym itself recorded in `parity/`; the timing is only reported if they all agree.
- The issue's stated figure for NeMo Gym (about 26 verifications/s, measured by the issue's author on such
  rollouts with NeMo Gym's own code, pandas 2.3.2) is reported beside ours as given.

Run: .venv/bin/python benchmarks/verify_workplace.py   ->  benchmarks/results/verify_workplace.json
"""

from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
NEMO = ROOT.parent / "shared" / "external" / "nemo_gym_workplace_assistant"
OUT = ROOT / "benchmarks" / "results" / "verify_workplace.json"
STATED_NEMO_GYM_PER_S = 26.0


def pin_one_core() -> str:
    try:
        core = sorted(os.sched_getaffinity(0))[0]
        os.sched_setaffinity(0, {core})
        return f"pinned to core {core}"
    except (AttributeError, OSError):
        return "not pinned (no sched_setaffinity)"


def rate(fn, items, min_seconds: float = 2.0) -> dict:
    """Verifications per second of wall-clock time and per second of this process's CPU time. On this shared
    2-core machine other jobs steal the core, so CPU time is the fair one-core figure; both are reported."""
    n, t0, c0 = 0, time.perf_counter(), time.process_time()
    while True:
        for it in items:
            fn(it)
        n += len(items)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        if wall >= min_seconds:
            return {"per_s_cpu": round(n / cpu, 1), "per_s_wall": round(n / wall, 1), "n": n}


# --------------------------------------------------------------------------- NeMo Gym's algorithm, in pandas
def nemo_gym_is_correct_factory(csv_root: Path):
    import pandas as pd

    files = {"calendar": "calendar_events.csv", "email": "emails.csv", "pm": "project_tasks.csv",
             "crm": "customer_relationship_manager_data.csv"}

    # NeMo Gym reads with dtype=str, which is an object column in the pandas it pins (2.3.2); pandas 3 would make
    # it the new string dtype, whose frames stop comparing equal once a row with None is appended. object keeps
    # the pinned semantics.
    text = str if pd.__version__.startswith("2.") else object

    def load():
        st = {k: pd.read_csv(csv_root / "processed" / f, dtype=text) for k, f in files.items()}
        st["analytics"] = pd.read_csv(csv_root / "processed" / "analytics_data.csv", dtype=text)
        st["plots"] = pd.DataFrame(columns=["file_path"])
        return st

    def next_id(df, col):
        return str(int(df[col].max()) + 1).zfill(8)

    def send(st, recipient, subject, body):
        if not recipient or "@" not in recipient or "." not in recipient:
            raise ValueError("bad recipient")
        row = {"email_id": str(int(st["email"]["email_id"].max()) + 1), "inbox/outbox": "outbox",
               "sender/recipient": recipient.lower(), "subject": subject, "sent_datetime": "2023-11-30 23:59:00",
               "body": body}
        st["email"] = pd.concat([st["email"], pd.DataFrame([row])], ignore_index=True)

    def apply(st, name, a):  # the write tools (reads cannot change state and are skipped)
        e, c, p, r = st["email"], st["calendar"], st["pm"], st["crm"]
        if name == "email_send_email":
            send(st, a.get("recipient"), a.get("subject"), a.get("body"))
        elif name in ("email_reply_email", "email_forward_email"):
            hit = e[e["email_id"] == a.get("email_id")].to_dict(orient="records")
            if not hit:
                raise KeyError("email")
            if name == "email_reply_email":
                send(st, hit[0]["sender/recipient"], f"RE: {hit[0]['subject']}", a.get("body"))
            else:
                send(st, a.get("recipient"), f"FW: {hit[0]['subject']}", hit[0]["body"])
        elif name == "email_delete_email":
            if a.get("email_id") not in e["email_id"].values:
                raise KeyError("email")
            st["email"] = e[e["email_id"] != a["email_id"]]
        elif name == "calendar_create_event":
            row = {k: a.get(k) for k in ("event_name", "participant_email", "event_start", "duration")}
            row["event_id"] = next_id(c, "event_id")
            st["calendar"] = pd.concat([c, pd.DataFrame([row])])
        elif name == "calendar_delete_event":
            if a.get("event_id") not in c["event_id"].values:
                raise KeyError("event")
            st["calendar"] = c[c["event_id"] != a["event_id"]]
        elif name == "calendar_update_event":
            eid = a.get("event_id")
            if not (isinstance(eid, str) and len(eid) == 8 and eid.isdigit()) or eid not in c["event_id"].values:
                raise KeyError("event")
            c.loc[c["event_id"] == eid, a["field"]] = a["new_value"]
        elif name == "analytics_create_plot":
            st["plots"].loc[len(st["plots"])] = [f"plots/{a['time_min']}_{a['time_max']}_{a['value_to_plot']}_{a['plot_type']}.png"]
        elif name == "project_management_create_task":
            row = {k: a.get(k) for k in ("task_name", "assigned_to_email", "list_name", "due_date", "board")}
            row["task_id"] = next_id(p, "task_id")
            st["pm"] = pd.concat([p, pd.DataFrame([row])], ignore_index=True)
        elif name == "project_management_delete_task":
            if a.get("task_id") not in p["task_id"].values:
                raise KeyError("task")
            st["pm"] = p[p["task_id"] != a["task_id"]]
        elif name == "project_management_update_task":
            if a.get("task_id") not in p["task_id"].values:
                raise KeyError("task")
            p.loc[p["task_id"] == a["task_id"], a["field"]] = a["new_value"]
        elif name == "customer_relationship_manager_update_customer":
            if a.get("field") == "status" and a.get("new_value") not in ("Qualified", "Won", "Lost", "Lead", "Proposal"):
                raise ValueError("status")
            if a.get("customer_id") not in r["customer_id"].values:
                raise KeyError("customer")
            v = a["new_value"].lower() if a["field"] in ("customer_email", "assigned_to_email") else a["new_value"]
            r.loc[r["customer_id"] == a["customer_id"], a["field"]] = v
        elif name == "customer_relationship_manager_add_customer":
            row = {k: a.get(k) for k in ("customer_name", "customer_email", "customer_phone", "last_contact_date",
                                          "product_interest", "status", "assigned_to_email", "notes", "follow_up_by")}
            row["customer_id"] = next_id(r, "customer_id")
            st["crm"] = pd.concat([r, pd.DataFrame([row])], ignore_index=True)
        elif name == "customer_relationship_manager_delete_customer":
            if a.get("customer_id") not in r["customer_id"].values:
                raise KeyError("customer")
            st["crm"] = r[r["customer_id"] != a["customer_id"]]

    def execute(actions):
        st = load()
        for name, args in actions:
            try:
                apply(st, name, args)
            except Exception:  # noqa: BLE001 - NeMo Gym skips calls that fail
                continue
        return st

    def lower(df):
        df = df.copy()
        for col in df.columns:
            if col not in ("status", "list_name", "board"):
                df[col] = df[col].str.lower()
        return df

    def is_correct(pred, gt):
        a, b = execute(pred), execute(gt)
        return all(lower(a[k]).equals(lower(b[k])) for k in ("calendar", "email", "plots", "pm", "crm"))

    return is_correct


def main() -> None:
    affinity = pin_one_core()
    os.environ.setdefault("RLVR_THREADS", "1")
    from generators.workplace import CONTEXT, TODAY, generate_tasks, generate_world_tables
    from rewards.environments.workplace import WorkplaceEnv, WorkplaceWorld, verify_trajectory
    from rewards.environments.workplace import verifier as V
    from rewards.environments.workplace.demonstrations import demonstration
    from rewards.environments.workplace.nemo_gym import read_csv_world, read_tasks, trajectory_from_rollout, user_text

    results: dict = {"machine": {"python": platform.python_version(), "cpu_count": os.cpu_count(),
                                 "affinity": affinity, "platform": platform.platform(),
                                 "load_average_at_start": [round(x, 2) for x in os.getloadavg()]}}

    # (b) generated tasks: ground-truth demonstrations, 1-4+ calls
    tables = generate_world_tables()
    world = WorkplaceWorld.from_tables(tables, today=TODAY, context=CONTEXT)
    tasks = generate_tasks(tables, today=TODAY, context=CONTEXT, n=1000)
    env = WorkplaceEnv(world)
    pairs = [(t, demonstration(t, env)) for t in tasks]
    calls = [sum(len(m.tool_calls or []) for m in tr.messages) for _, tr in pairs]
    assert all(verify_trajectory(t, tr, world).passed for t, tr in pairs)

    def cold(pair):
        V._EXPECTED_CACHE.clear()
        verify_trajectory(pair[0], pair[1], world)

    def warm(pair):
        verify_trajectory(pair[0], pair[1], world)

    results["generated_tasks"] = {
        "trajectories": len(pairs), "mean_calls": round(sum(calls) / len(calls), 2), "max_calls": max(calls),
        "ours_cold": rate(cold, pairs), "ours_warm": rate(warm, pairs),
    }

    # (a) NeMo Gym's 19 parity rollouts on its own CSV world
    if NEMO.exists():
        nworld = read_csv_world(NEMO)
        ntasks = {user_text(t.prompt): t for t in read_tasks(NEMO / "parity" / "tasks.jsonl")}
        recs = [json.loads(line) for line in (NEMO / "parity" / "rollouts.jsonl").read_text().splitlines()]
        items = []
        for rec in recs:
            tr = trajectory_from_rollout(rec)
            items.append((ntasks[user_text(tr.messages)], tr, rec))

        def ncold(it):
            V._EXPECTED_CACHE.clear()
            verify_trajectory(it[0], it[1], nworld)

        def nwarm(it):
            verify_trajectory(it[0], it[1], nworld)

        nc, nw = rate(ncold, items), rate(nwarm, items)
        is_correct = nemo_gym_is_correct_factory(NEMO / "csv_data")

        def nemo_actions(tr):
            return [(c.name, c.arguments) for m in tr.messages if m.role == "assistant" for c in (m.tool_calls or [])]

        verdicts = [float(is_correct(nemo_actions(tr), [(c.name, c.arguments) for c in task.ground_truth_calls]))
                    for task, tr, _ in items]
        recorded = [float(rec["reward"]) for _, _, rec in items]
        agree = verdicts == recorded
        entry = {"rollouts": len(items), "ours_cold": nc, "ours_warm": nw,
                 "pandas_reimplementation_matches_recorded_nemo_gym_rewards": agree,
                 "pandas_reimplementation_verdicts": verdicts, "recorded_nemo_gym_rewards": recorded}
        if agree:
            pr = rate(lambda it: is_correct(nemo_actions(it[1]), [(c.name, c.arguments) for c in it[0].ground_truth_calls]),
                      items, min_seconds=3.0)
            import pandas

            entry.update(nemo_gym_algorithm_pandas=pr, pandas_version=pandas.__version__,
                         speedup_ours_cold_vs_pandas_cpu=round(nc["per_s_cpu"] / pr["per_s_cpu"], 1))
        results["nemo_gym_parity_rollouts"] = entry
    results["nemo_gym_stated"] = {
        "verifications_per_s": STATED_NEMO_GYM_PER_S,
        "how": "figure given in issue 9 (NeMo Gym's own pandas is_correct on such rollouts, measured by the issue's "
               "author); not re-measured with NeMo Gym's code here (its code is not vendored in this repository)",
        "speedup_ours_cold_generated_cpu_vs_stated": round(results["generated_tasks"]["ours_cold"]["per_s_cpu"]
                                                           / STATED_NEMO_GYM_PER_S, 1),
    }
    results["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    results["target_verifications_per_s"] = 2000
    results["meets_target_cpu"] = results["generated_tasks"]["ours_cold"]["per_s_cpu"] >= 2000
    results["meets_target_wall"] = results["generated_tasks"]["ours_cold"]["per_s_wall"] >= 2000
    OUT.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=OUT.parent, prefix=".verify_workplace.", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(results, f, indent=2)
    os.replace(tmp, OUT)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
