"""Evaluation of tool tasks in the workplace environment: episodes through the shared loop, verifier verdicts.

The default test replays fixed replies (no model) through the same runner path; the slow one lets the embedded
model play real episodes through `rlvr eval`."""

from __future__ import annotations

import json
from functools import lru_cache

import pytest
from typer.testing import CliRunner

from schemas.tool_prompt import TOOL_CALL_CLOSE, TOOL_CALL_OPEN
from training.eval_environment import EnvironmentRunner
from training.evaluation import evaluate


@lru_cache(maxsize=1)
def world_and_tasks():
    from generators.workplace.tasks import generate_tasks
    from generators.workplace.world import CONTEXT, TODAY, generate_world_tables
    from rewards.environments.workplace import WorkplaceWorld

    tables = generate_world_tables()
    return (WorkplaceWorld.from_tables(tables, today=TODAY, context=CONTEXT),
            generate_tasks(tables, today=TODAY, context=CONTEXT, n=60, seed=0))


class ScriptedRunner(EnvironmentRunner):
    """The environment runner with a scripted policy instead of a model: ground truth for even tasks, a wrong tool
    for odd ones."""

    def __init__(self, world):
        super().__init__(None, None, world_resolver=lambda task: world, max_turns=4)

    def __call__(self, task, n, seed):
        from rewards.environments.loop import run_episode
        from rewards.environments.workplace import WorkplaceEnv
        from training.eval_environment import sample_from_trajectory

        good = int(task.id, 16) % 2 == 0 if all(c in "0123456789abcdef" for c in task.id) else True
        calls = task.ground_truth_calls if good else [type(task.ground_truth_calls[0])(name="send_mail", arguments={})]
        script = iter(["".join(f"{TOOL_CALL_OPEN}{json.dumps({'name': c.name, 'arguments': c.arguments})}"
                               f"{TOOL_CALL_CLOSE}" for c in calls), "Done."])
        out = []
        for _ in range(n):
            traj = run_episode(task, WorkplaceEnv(self.world_resolver(task)), lambda msgs: next(script, "Done."),
                               max_turns=self.max_turns)
            out.append(sample_from_trajectory(traj))
        return out


def test_environment_report_counts_verifier_reasons():
    world, tasks = world_and_tasks()
    # even ids play the ground truth, odd ids a tool that does not exist
    chosen = [t.model_copy(update={"id": f"{i:x}"}) for i, t in enumerate([t for t in tasks if t.ground_truth_calls][:6])]
    rep = evaluate(chosen, ScriptedRunner(world), model="scripted", dataset="wp", mode="environment")
    assert rep.overall.pass_at_1 == pytest.approx(0.5)
    assert rep.overall.failure_reasons == {"wrong_tool": 3}
    failing = [s for t in rep.tasks for s in t.samples if not s.passed]
    assert all(s.tool_calls == 1 and s.messages and s.components for s in failing)
    assert rep.overall.components["passed"] == pytest.approx(0.5)


@pytest.mark.slow
def test_rlvr_eval_plays_the_embedded_model_in_the_environment(tmp_path, monkeypatch):
    from generators.task_io import write_tasks
    from studio.cli import app

    monkeypatch.setenv("RLVR_REGISTRY", str(tmp_path / "r.sqlite"))
    _, tasks = world_and_tasks()
    path = write_tasks([t for t in tasks if t.split == "test"][:2], tmp_path / "wp.parquet")
    r = CliRunner().invoke(app, ["eval", "--model", "default", "--dataset", str(path), "--max-turns", "2",
                                 "--max-new-tokens", "48", "--json", str(tmp_path / "rep.json")])
    assert r.exit_code == 0, r.output
    rep = json.loads((tmp_path / "rep.json").read_text())
    assert rep["mode"] == "environment" and rep["overall"]["tasks"] == 2
    reasons = rep["overall"]["failure_reasons"]
    assert sum(reasons.values()) + round(rep["overall"]["pass_at_1"] * 2) == 2


def test_the_world_stored_beside_a_dataset_is_used(tmp_path):
    from generators.task_io import read_tasks
    from rewards.environments.workplace import verify_trajectory
    from schemas.messages import Message
    from schemas.trajectory import Trajectory
    from studio.workplace_dataset import build_dataset
    from training.eval_environment import dataset_world, default_world_resolver

    assert dataset_world(tmp_path / "x.parquet") is None
    build_dataset(tmp_path / "wp", n=40, world_seed=7)
    tasks = read_tasks(tmp_path / "wp" / "test.parquet")
    world = default_world_resolver(data_path=tmp_path / "wp" / "test.parquet")(tasks[0])
    assert world is not default_world_resolver()(tasks[0].model_copy(update={"metadata": {}}))
    t = next(t for t in tasks if t.ground_truth_calls and not t.metadata.get("noop"))
    calls = [Message(role="assistant", content="", tool_calls=[c]) for c in t.ground_truth_calls]
    traj = Trajectory(task_id=t.id, messages=[*t.prompt, *calls], final_answer="done")
    assert verify_trajectory(t, traj, world).passed  # the dataset's own world (seed 7) replays its ground truth
