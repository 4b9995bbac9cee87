"""The generated workplace world and tasks: coverage, splits, held-out templates, determinism, and ground truth that
passes the verifier on every generated task (replayed as demonstrations through the real environment)."""

from __future__ import annotations

import json
from collections import Counter

from generators.workplace import CATEGORIES, CONTEXT, TEMPLATES, TODAY, generate_tasks, generate_world_tables
from rewards.environments.workplace import WorkplaceEnv, verify_trajectory
from rewards.environments.workplace.demonstrations import demonstration
from workplace_testdata import default_world_and_tasks


def test_default_dataset_covers_the_spec():
    _, _, tasks = default_world_and_tasks()
    assert len(tasks) >= 1000 and len({t.id for t in tasks}) == len(tasks)
    cats = Counter(t.metadata["category"] for t in tasks)
    assert set(cats) == set(CATEGORIES) and len(CATEGORIES) >= 6 and "multi_domain" in cats
    diff = Counter(t.metadata["difficulty"] for t in tasks)
    assert {"1", "2", "3", "4+"} <= set(diff)
    assert sum(t.metadata["noop"] for t in tasks) >= 100
    assert sum(t.metadata["distractor"] for t in tasks) >= 100
    splits = Counter(t.split for t in tasks)
    assert splits["train"] > splits["test"] > 0 and splits["validation"] > 0
    for t in tasks:
        assert t.prompt[0].role == "system" and t.prompt[1].role == "user" and t.answer
        assert t.tools and len(t.tools) >= 26


def test_held_out_templates_only_in_test_and_test_has_seen_ones_too():
    _, _, tasks = default_world_and_tasks()
    held = {t.id for t in TEMPLATES if t.held_out}
    assert {t.category for t in TEMPLATES if t.held_out} == set(CATEGORIES)  # one unseen template per category
    train_templates = {t.metadata["template"] for t in tasks if t.split != "test"}
    test_templates = {t.metadata["template"] for t in tasks if t.split == "test"}
    assert held <= test_templates and not (held & train_templates)
    assert test_templates - held  # the test split also measures seen templates


def test_ground_truth_passes_on_every_generated_task():
    _, world, tasks = default_world_and_tasks()
    env = WorkplaceEnv(world)
    failures = []
    for t in tasks:
        traj = demonstration(t, env)  # raises if a ground-truth call fails or uses an id no message showed
        r = verify_trajectory(t, traj, world)
        if not r.passed:
            failures.append((t.id, t.metadata["template"], r.reason, r.error))
        assert r.components["noop_task"] == float(t.metadata["noop"])
    assert not failures, failures[:5]


def test_doing_nothing_fails_every_task_that_needs_a_change():
    from rewards.environments.workplace import verify_calls

    _, world, tasks = default_world_and_tasks()
    for t in tasks[::7]:
        r = verify_calls(t, [], world, final_answer="Done.")
        assert r.passed == t.metadata["noop"], (t.id, r.reason)


def test_generation_is_deterministic_and_the_world_is_consistent():
    tables, _, tasks = default_world_and_tasks()
    again = generate_tasks(tables, today=TODAY, context=CONTEXT)
    assert [t.model_dump() for t in again] == [t.model_dump() for t in tasks]
    assert generate_world_tables() == tables
    other = generate_world_tables(seed=11)
    assert other != tables
    for tb in (tables, other):
        people = {p["email_address"] for p in tb["directory"]}
        sales = {p["email_address"] for p in tb["directory"] if p["team"] == "sales"}
        assert {t["assigned_to_email"] for t in tb["project_tasks"]} <= people
        assert {e["sender/recipient"] for e in tb["emails"]} <= people
        assert {c["assigned_to_email"] for c in tb["crm_customers"]} <= sales
        for e in tb["calendar_events"]:
            start = e["event_start"][11:16]
            assert "09:00" <= start <= "16:30" and e["duration"] in ("30", "60", "90")
    other_tasks = generate_tasks(other, today=TODAY, context=CONTEXT, n=200, seed=3)
    assert len(other_tasks) >= 150


def test_cli_tasks_writes_a_complete_dataset(tmp_path):
    from typer.testing import CliRunner

    from generators.task_io import read_tasks
    from rewards.environments.workplace.nemo_gym import read_tasks as read_nemo
    from studio.cli import app
    from studio.workplace_dataset import load_world

    res = CliRunner().invoke(app, ["env", "tasks", "-o", str(tmp_path), "-n", "80"])
    assert res.exit_code == 0, res.output
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    total = sum(len(read_tasks(tmp_path / f"{s}.parquet")) for s in ("train", "validation", "test"))
    assert total == manifest["n_tasks"] >= 60
    demos = [json.loads(line) for line in (tmp_path / "demonstrations.jsonl").read_text().splitlines()]
    assert len(demos) == manifest["demonstrations"] and all(d["split"] == "train" for d in demos)
    assert demos[0]["messages"][0]["role"] == "system" and demos[0]["messages"][-1]["role"] == "assistant"
    world = load_world(tmp_path)
    test_tasks = read_tasks(tmp_path / "test.parquet")
    exported = read_nemo(tmp_path / "nemo_gym" / "test.jsonl")
    assert [t.id for t in exported] == [t.id for t in test_tasks]
    # our tasks, exported to NeMo Gym's format and read back, still replay to a pass in the saved world
    from rewards.environments.workplace import verify_calls

    for t in exported[:20]:
        assert verify_calls(t, t.ground_truth_calls, world).passed


def test_relevant_tools_keep_every_ground_truth_tool_and_shorten_prompts():
    from rewards.environments.workplace import initial_messages

    tables, world, tasks = default_world_and_tasks()
    slim = generate_tasks(tables, today=TODAY, context=CONTEXT, n=150, tools="relevant")
    for t in slim:
        names = {s.function.name for s in t.tools}
        assert {c.name for c in t.ground_truth_calls} <= names and "company_directory_find_email_address" in names
    single = [t for t in slim if t.metadata["category"] != "multi_domain"]
    assert all(len(t.tools) <= 7 for t in single)
    full = len(initial_messages(tasks[0], world)[0].content)
    assert len(initial_messages(single[0], world)[0].content) < full / 2
