"""Demo stage: the workplace tool-calling environment. Builds the world (from its spec) and the task dataset,
checks that ground truth passes the verifier on a sample, and rolls the embedded model out on a few test tasks."""

from __future__ import annotations

ORDER = 20
TITLE = "workplace environment"


def run(ctx) -> dict:
    from collections import Counter

    from rich.table import Table

    from rewards.environments.loop import run_episode
    from rewards.environments.workplace import WorkplaceEnv, reason_code, verify_trajectory
    from rewards.environments.workplace.demonstrations import demonstration
    from studio.demo import StageFailed
    from studio.workplace_dataset import build_dataset, load_split, load_world
    from training.chat import generate_reply

    out = ctx.out / "workplace"
    with ctx.console.status("generating the workplace world and tasks"):
        # relevant toolkits only: a prompt a third as long, which CPU rollouts and training of a 135M model need
        manifest = build_dataset(out, n=300 if ctx.quick else 1200, tools="relevant")
    world = load_world(out)
    test = load_split(out, "test")
    sample = test[: 40 if ctx.quick else 200]
    env = WorkplaceEnv(world)
    bad = [t.id for t in sample if not verify_trajectory(t, demonstration(t, env), world).passed]
    if bad:
        raise StageFailed(f"ground truth fails the verifier on {len(bad)} task(s), e.g. {bad[:3]}")

    if "model" in ctx.state:
        model, tok = ctx.state["model"]
    else:
        from training.model import load_model

        model, tok = load_model("default")
    n_roll, turns, tokens = (2, 2, 64) if ctx.quick else (3, 3, 96)
    table = Table(title=f"embedded model on {n_roll} test tasks")
    for col in ("task", "category", "verdict", "reason"):
        table.add_column(col)
    codes = Counter()
    passed = 0
    for task in test[:n_roll]:
        traj = run_episode(task, WorkplaceEnv(world), lambda m: generate_reply(model, tok, m, max_new_tokens=tokens),
                           max_turns=turns)
        r = traj.reward
        codes[reason_code(r)] += 1
        passed += bool(r.passed)
        table.add_row(task.id, task.metadata.get("category", ""), "pass" if r.passed else "fail", r.reason[:80])
    ctx.console.print(table)
    ctx.state["workplace_tasks"] = str(out)
    return {"dataset": str(out), "tasks": manifest["n_tasks"], "splits": manifest["splits"],
            "ground truth verified": f"{len(sample)}/{len(sample)} pass",
            "model rollouts": f"{passed}/{n_roll} pass, reasons {dict(codes)}"}
