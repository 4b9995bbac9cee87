"""The checkpoint registry on a real SQLite file: register, promote, rollback with the hash check, delete only
with yes, and two processes writing at once without corrupting the catalog."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from tests.registry_writer import writer
from training.registry import Registry, RegistryError, make_manifest, read_manifest, weights_digest


def make_checkpoint(root: Path, name: str, seed: int, parent: str | None = None) -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(seed)
    save_file({"w": torch.randn(16, 8, generator=g), "b": torch.randn(8, generator=g)},
              str(folder / "model.safetensors"))
    make_manifest(folder, name=name, base_model="tiny-llama", parent=parent, step=seed,
                  metrics={"reward": seed / 10})
    return folder


def test_promote_rollback_with_hash_check(tmp_path):
    reg = Registry(tmp_path / "registry.sqlite")
    for i, name in enumerate(["ck-a", "ck-b", "ck-c"]):
        reg.register_checkpoint(make_checkpoint(tmp_path, name, i, parent=None if i == 0 else ["ck-a", "ck-b"][i - 1]))
    assert [c.name for c in reg.lineage("ck-c")] == ["ck-c", "ck-b", "ck-a"]

    with pytest.raises(RegistryError, match="never been promoted"):
        reg.rollback()
    reg.promote("ck-a")
    with pytest.raises(RegistryError, match="no earlier promoted checkpoint"):
        reg.rollback()
    reg.promote("ck-b")
    reg.promote("ck-c", note="better")
    assert reg.checkpoint("production").name == "ck-c"

    r = reg.rollback()
    assert (r.checkpoint, r.previous, r.action) == ("ck-b", "ck-c", "rollback")
    assert reg.resolve("production") == "ck-b"
    assert reg.checkpoint("ck-b").aliases == ["production"]

    # the weights of ck-a change on disk: rolling back to it is refused and production stays on ck-b
    save_file({"w": torch.zeros(16, 8), "b": torch.zeros(8)}, str(tmp_path / "ck-a" / "model.safetensors"))
    with pytest.raises(RegistryError, match="refusing to roll production back to 'ck-a'"):
        reg.rollback()
    assert reg.resolve("production") == "ck-b"
    with pytest.raises(RegistryError, match="refusing to promote"):
        reg.promote("ck-a")
    ok, msg = reg.verify("ck-a")
    assert not ok and "registered" in msg
    assert [h.action for h in reg.history()] == ["promote", "promote", "promote", "rollback"]
    assert reg.integrity_check() == "ok"


def test_register_refuses_tampered_or_incomplete_and_name_clash(tmp_path):
    reg = Registry(tmp_path / "r.sqlite")
    folder = make_checkpoint(tmp_path, "ck", 1)
    (tmp_path / "empty").mkdir()
    with pytest.raises(RegistryError, match="no manifest.json"):
        reg.register_checkpoint(tmp_path / "empty")
    save_file({"w": torch.ones(2)}, str(folder / "model.safetensors"))
    with pytest.raises(RegistryError, match="does not match the manifest"):
        reg.register_checkpoint(folder)
    other = make_checkpoint(tmp_path / "x", "ck", 2)
    reg.register_checkpoint(other)
    assert reg.register_checkpoint(other).name == "ck"  # same weights again: idempotent
    clash = make_checkpoint(tmp_path / "y", "ck", 3)
    with pytest.raises(RegistryError, match="already registered with other weights"):
        reg.register_checkpoint(clash, name="ck")
    auto = reg.register_checkpoint(clash)  # the manifest's name is taken: the hash disambiguates
    assert auto.name == f"ck-{read_manifest(clash).weights_hash[:8]}"


def test_the_same_weights_registered_from_a_new_folder_move_there_when_the_old_one_is_gone(tmp_path):
    """A deterministic run re-made elsewhere (the demo in a fresh clone) registers the same name and hash from a new
    folder. While the recorded folder still holds the weights the row stays; once it is gone or overwritten the row
    moves to the new folder, so promotion and its hash check find the weights (they used to fail: 'no longer
    exists'). Unverified registrations never move a row."""
    import shutil

    reg = Registry(tmp_path / "r.sqlite")
    first = make_checkpoint(tmp_path / "run1", "demo", 5)
    reg.register_checkpoint(first)
    reg.promote("demo")
    again = tmp_path / "run2" / "demo"
    shutil.copytree(first, again)
    assert reg.register_checkpoint(again).path == str(first.resolve())  # the old folder still holds them
    shutil.rmtree(first)
    assert reg.verify("production") == (False, f"{first.resolve()} no longer exists")
    assert reg.register_checkpoint(again, verify=False).path == str(first.resolve())  # not checked: no move
    assert reg.register_checkpoint(again).path == str(again.resolve())
    assert reg.verify("production")[0] and reg.aliases()["production"] == "demo"
    third = tmp_path / "run3" / "demo"
    shutil.copytree(again, third)
    save_file({"w": torch.ones(2)}, str(again / "model.safetensors"))  # the recorded folder now holds other weights
    assert reg.register_checkpoint(third).path == str(third.resolve())


def test_delete_needs_yes_and_not_current(tmp_path):
    reg = Registry(tmp_path / "r.sqlite")
    reg.register_checkpoint(make_checkpoint(tmp_path, "old", 1))
    reg.register_checkpoint(make_checkpoint(tmp_path, "new", 2))
    reg.promote("new")
    with pytest.raises(RegistryError, match="current production"):
        reg.delete_checkpoint("new", yes=True)
    with pytest.raises(RegistryError, match="pass --yes"):
        reg.delete_checkpoint("old", remove_files=True)
    assert (tmp_path / "old").is_dir() and len(reg.checkpoints()) == 2
    reg.delete_checkpoint("old", yes=True, remove_files=True)
    assert not (tmp_path / "old").exists() and [c.name for c in reg.checkpoints()] == ["new"]


def test_datasets_rewards_audits_runs_are_recorded(tmp_path):
    from generators.task_io import write_tasks
    from schemas.task import TaskRow

    data = write_tasks([TaskRow(id=f"t{i}", split="test" if i % 2 else "train",
                                prompt=[{"role": "user", "content": "hi"}]) for i in range(5)],
                       tmp_path / "d.parquet")
    reg = Registry(tmp_path / "r.sqlite")
    d = reg.register_dataset(data, name="toy")
    assert d.counts == {"train": 3, "test": 2, "total": 5}
    assert reg.register_dataset(data).hash == d.hash and len(reg.datasets()) == 1
    assert reg.dataset(d.hash[:10]).name == "toy"
    reg.register_reward_version("exact", "abc123", "v1")
    reg.record_audit("exact@abc123", True, dataset_hash=d.hash, summary={"dominance": True})
    run = reg.start_run("demo", config={"steps": 2}, dataset_hash=d.hash)
    reg.finish_run(run.id, metrics={"reward": 0.5})
    assert reg.run(run.id).status == "finished" and reg.run(run.id).metrics == {"reward": 0.5}
    assert reg.audits("exact@abc123")[0].summary == {"dominance": True}


def test_two_processes_writing_at_once_do_not_corrupt(tmp_path):
    db = str(tmp_path / "shared.sqlite")
    Registry(db).close()
    ctx = mp.get_context("spawn")
    queue, barrier = ctx.Queue(), ctx.Barrier(2)
    n = 25
    procs = [ctx.Process(target=writer, args=(db, str(tmp_path), tag, n, queue, barrier)) for tag in ("p1", "p2")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    results = dict(queue.get(timeout=5) for _ in procs)
    assert results == {"p1": "ok", "p2": "ok"}
    reg = Registry(db)
    assert reg.integrity_check() == "ok"
    assert len(reg.checkpoints()) == 2 * n
    hist = reg.history()
    assert len(hist) == 2 * n
    # each history entry's `previous` is exactly the entry before it: promotions were serialised, none lost
    assert [h.previous for h in hist[1:]] == [h.checkpoint for h in hist[:-1]]
    assert reg.resolve("production") == hist[-1].checkpoint
    tags = [h.checkpoint.split("-")[0] for h in hist]
    assert sum(a != b for a, b in zip(tags, tags[1:])) >= 2, "the two writers never interleaved"
    assert sum(1 for r in reg.runs() if r.status == "finished") == 2 * n


def test_hash_recipe_equals_the_trainers(tmp_path):
    from training.checkpoints import weights_digest as trainer_digest

    folder = make_checkpoint(tmp_path, "ck", 4)
    (folder / "adapter_model.safetensors").write_bytes(b"x" * 100)
    files = ["model.safetensors", "adapter_model.safetensors"]
    assert weights_digest(folder, files) == trainer_digest(folder, files)


def test_promotes_and_rollbacks_from_two_processes_stay_serialised(tmp_path):
    db = str(tmp_path / "shared.sqlite")
    reg = Registry(db)
    reg.register_checkpoint(make_checkpoint(tmp_path, "seed", 0))
    reg.promote("seed")
    ctx = mp.get_context("spawn")
    queue, barrier = ctx.Queue(), ctx.Barrier(2)
    n = 15
    procs = [ctx.Process(target=writer, args=(db, str(tmp_path), "pro", n, queue, barrier)),
             ctx.Process(target=writer, args=(db, str(tmp_path), "rb", n, queue, barrier, True))]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert dict(queue.get(timeout=5) for _ in procs) == {"pro": "ok", "rb": "ok"}
    assert reg.integrity_check() == "ok"
    hist = reg.history()
    assert sum(h.action == "rollback" for h in hist) == n and len(hist) == 1 + 3 * n
    current = None
    for h in hist:  # every entry saw exactly the alias value the entry before it left: nothing interleaved inside
        assert h.previous == current, h
        current = h.checkpoint
    assert reg.resolve("production") == current
