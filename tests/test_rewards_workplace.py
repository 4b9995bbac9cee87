"""The workplace_state verifier and the workplace example rewards on real generated tasks and trajectories."""

from __future__ import annotations

import json
from functools import lru_cache

from typer.testing import CliRunner

from rewards import load_reward, score_batch
from rewards.shaping import check_dominance
from schemas import Message, Trajectory


@lru_cache(maxsize=1)
def _setup():
    from generators.workplace import CONTEXT, TODAY, generate_tasks, generate_world_tables
    from rewards.environments.workplace import WorkplaceEnv, WorkplaceWorld
    from rewards.environments.workplace.demonstrations import demonstration

    tables = generate_world_tables(None)
    world = WorkplaceWorld.from_tables(tables, today=TODAY, context=CONTEXT)
    tasks = [t for t in generate_tasks(tables, today=TODAY, context=CONTEXT, n=40, seed=0)][:12]
    env = WorkplaceEnv(world)
    demos = [demonstration(t, env) for t in tasks]
    return world, tasks, demos


def _variants(task, demo):
    """A right trajectory, one that stops after the reads (its write turns dropped), and one that only answers."""
    from rewards.environments.toolcalls import parse_reply
    from schemas.workplace import WRITE_TOOLS

    def writes(m):
        return m.role == "assistant" and any(c.name in WRITE_TOOLS for c in parse_reply(m.content).calls)

    partial = Trajectory(task_id=task.id, messages=[m for m in demo.messages if not writes(m)],
                         final_answer=demo.final_answer)
    bare = Trajectory(task_id=task.id, messages=[*demo.messages[:2], Message(role="assistant", content="Done.")],
                      final_answer="Done.")
    return [demo, partial, bare]


def test_workplace_binary_matches_the_environment_verifier():
    from rewards.environments.workplace import verify_trajectory

    world, tasks, demos = _setup()
    reward = load_reward("examples/rewards/workplace.py:workplace_binary")
    assert reward.kind == "trajectory"
    items, rows = [], []
    for t, d in zip(tasks, demos):
        for v in _variants(t, d):
            items.append(v)
            rows.append(t)
    res = score_batch(reward, items, rows)
    assert not any(r.is_error for r in res)
    assert all(r.passed for r in res[0::3])  # every ground-truth demonstration passes
    direct = [verify_trajectory(t, v, world) for t, v in zip(rows, items)]
    assert [r.passed for r in res] == [d.passed for d in direct]
    noop = [t.metadata.get("noop") for t in tasks]
    bare = res[2::3]
    assert all(b.passed is False for b, n in zip(bare, noop) if not n)  # doing nothing fails a real task
    assert any(b.reason.startswith("missing_action") for b in bare)
    partial = res[1::3]
    assert all(p.passed is False for p, n in zip(partial, noop) if not n)  # reads alone change nothing
    assert all(r.reward_version.startswith("workplace_binary@") for r in res)


def test_workplace_shaped_keeps_dominance_and_orders_near_misses():
    _, tasks, demos = _setup()
    shaped = load_reward("examples/rewards/workplace.py:workplace_shaped")
    assert shaped.weights and shaped.fn.bounds.holds
    items, rows = [], []
    for t, d in zip(tasks, demos):
        for v in _variants(t, d):
            items.append(v)
            rows.append(t)
    res = score_batch(shaped, items, rows)
    b = check_dominance(res)
    assert b is not None and b.holds
    for r in res:
        assert {"required_changes", "wrong_changes", "valid_call_rate", "passed"} <= set(r.components)
    # among failures, a trajectory that did the reads scores at least as high as one that did nothing
    for i in range(0, len(res), 3):
        partial, bare = res[i + 1], res[i + 2]
        if not partial.passed and not bare.passed:
            assert partial.score >= bare.score - 1e-9


def test_workplace_reward_from_the_cli(tmp_path):
    from generators.task_io import write_tasks
    from studio.cli import app

    _, tasks, demos = _setup()
    data = write_tasks(tasks[:3], tmp_path / "tasks.parquet")
    comps = tmp_path / "traj.jsonl"
    lines = []
    for t, d in zip(tasks[:3], demos[:3]):
        for v in _variants(t, d)[::2]:
            lines.append(json.dumps({"id": t.id, "trajectory": v.model_dump(mode="json")}))
    comps.write_text("\n".join(lines) + "\n")
    out = tmp_path / "o.json"
    res = CliRunner().invoke(app, ["reward", "test", "examples/rewards/workplace.py:workplace_shaped", "--dataset",
                                   str(data), "--completions", str(comps), "--json", str(out)])
    assert res.exit_code == 0, res.output
    recs = json.loads(out.read_text())
    assert [r["passed"] for r in recs][0::2] == [True] * 3
