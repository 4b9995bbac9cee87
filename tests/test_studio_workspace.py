"""The studio workspace: every user path resolves inside it; traversal and symlink escapes are refused."""

from __future__ import annotations

import os

import pytest

from studio.workspace import SUBDIRS, Workspace, WorkspacePathError


def test_open_creates_folders_and_seeds_without_overwriting(tmp_path):
    ws = Workspace.open(tmp_path / "ws")
    for sub in SUBDIRS:
        assert (ws.root / sub).is_dir()
    copied = ws.seed_examples()
    for p in copied:  # a second seeding copies nothing new (never overwrites user edits)
        pytest.fail(f"seeded twice: {p}")


@pytest.mark.parametrize("bad", ["../outside.txt", "datasets/../../x", "/etc/passwd", "", "a\x00b"])
def test_traversal_and_bad_paths_are_refused(tmp_path, bad):
    ws = Workspace.open(tmp_path / "ws", seed_examples=False)
    with pytest.raises(WorkspacePathError) as err:
        ws.resolve(bad)
    assert str(err.value)  # the message says why


def test_symlink_escape_is_refused(tmp_path):
    ws = Workspace.open(tmp_path / "ws", seed_examples=False)
    secret = tmp_path / "secret.txt"
    secret.write_text("x")
    os.symlink(secret, ws.root / "datasets" / "link.txt")
    with pytest.raises(WorkspacePathError, match="outside the studio workspace"):
        ws.resolve("datasets/link.txt")


def test_inside_paths_resolve(tmp_path):
    ws = Workspace.open(tmp_path / "ws", seed_examples=False)
    assert ws.resolve("datasets/a.parquet") == ws.root / "datasets" / "a.parquet"
    assert ws.resolve("a.parquet", base="datasets") == ws.root / "datasets" / "a.parquet"
    assert ws.resolve(str(ws.root / "specs" / "x.yaml")) == ws.root / "specs" / "x.yaml"
    assert ws.resolve("specs/./sub/../x.yaml") == ws.root / "specs" / "x.yaml"
    with pytest.raises(WorkspacePathError, match="no such file"):
        ws.resolve("specs/missing.yaml", must_exist=True)
