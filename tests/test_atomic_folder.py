"""generators.task_io.atomic_folder: how every saved model (the embedded cache, SFT, learn_workplace's kept
policy) reaches its folder."""

from __future__ import annotations

import pytest


def test_a_finished_save_replaces_the_folder_whole_and_leaves_no_temporaries(tmp_path):
    from generators.task_io import atomic_folder

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "old.safetensors").write_text("old")
    with atomic_folder(folder) as tmp:
        assert tmp.parent == tmp_path and tmp != folder
        (tmp / "model.safetensors").write_text("new")
        assert (folder / "old.safetensors").exists()  # the old one stays readable until the block ends
    assert sorted(p.name for p in folder.iterdir()) == ["model.safetensors"]
    assert [p.name for p in tmp_path.iterdir()] == ["model"]


def test_a_save_that_fails_midway_keeps_the_previous_folder_untouched(tmp_path):
    from generators.task_io import atomic_folder

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model.safetensors").write_text("good")
    with pytest.raises(RuntimeError, match="disk full"):
        with atomic_folder(folder) as tmp:
            (tmp / "model.safetensors").write_text("half")
            raise RuntimeError("disk full")
    assert (folder / "model.safetensors").read_text() == "good"
    assert [p.name for p in tmp_path.iterdir()] == ["model"]
    with pytest.raises(RuntimeError):
        with atomic_folder(tmp_path / "new") as tmp:
            raise RuntimeError("killed before anything was written")
    assert not (tmp_path / "new").exists()
