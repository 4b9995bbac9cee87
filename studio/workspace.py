"""The studio's workspace: the one folder the studio reads and writes, and the only place a user path may point.

Why a workspace jail: the studio is a web app; whatever a person types into a path box (or whatever a crafted
request sends) must not read or overwrite files elsewhere on the machine. Every user-entered path goes through
`Workspace.resolve`, which resolves symlinks and `..` first and refuses anything that lands outside the root,
with a message saying so (never a silent rewrite to some other file).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

ENV_VAR = "RLVR_STUDIO_WORKSPACE"

# Sub-folders, one per kind of artefact, so pages can list "the datasets" or "the audits" without guessing.
SUBDIRS = ("specs", "datasets", "rewards", "completions", "audits", "labels", "configs", "runs", "evals", "triage")

REPO_EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


class WorkspacePathError(ValueError):
    """A user path that is empty, malformed or resolves outside the workspace; the message says which and why."""


def default_root() -> Path:
    """`$RLVR_STUDIO_WORKSPACE`, else `$RLVR_HOME/workspace` (so the repository checkout stays clean)."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    from training.model import rlvr_home

    return rlvr_home() / "workspace"


@dataclass(frozen=True)
class Workspace:
    root: Path

    @classmethod
    def open(cls, root: str | Path | None = None, *, seed_examples: bool = True) -> "Workspace":
        """The workspace at `root` (default: `default_root()`), its sub-folders created, examples copied in once."""
        path = Path(root).expanduser() if root is not None else default_root()
        path.mkdir(parents=True, exist_ok=True)
        ws = cls(path.resolve())
        for sub in SUBDIRS:
            (ws.root / sub).mkdir(exist_ok=True)
        if seed_examples:
            ws.seed_examples()
        return ws

    # ------------------------------------------------------------------------------------------------ paths
    def resolve(self, user_path: str | Path, *, must_exist: bool = False, base: str | None = None) -> Path:
        """The absolute path inside the workspace that `user_path` names, or WorkspacePathError.

        Relative paths are taken from `base` (a sub-folder such as "datasets") or the root; absolute paths are
        accepted only when they already lie inside the workspace. Symlinks are followed before the check, so a
        link pointing outside is refused like `../../etc/passwd`.
        """
        text = str(user_path).strip()
        if not text:
            raise WorkspacePathError("empty path: enter a file name inside the workspace")
        if "\x00" in text:
            raise WorkspacePathError(f"{text!r}: a path cannot contain a NUL character")
        p = Path(text)
        start = self.root / base if base else self.root
        candidate = p if p.is_absolute() else start / p
        resolved = candidate.resolve()
        if not resolved.is_relative_to(self.root):
            raise WorkspacePathError(
                f"{text!r} resolves to {resolved}, outside the studio workspace {self.root}: "
                "only paths inside the workspace are allowed"
            )
        if must_exist and not resolved.exists():
            raise WorkspacePathError(f"{text!r}: no such file or folder in the workspace ({resolved})")
        return resolved

    def dir(self, name: str) -> Path:
        if name not in SUBDIRS:
            raise KeyError(f"unknown workspace folder {name!r} (expected one of {SUBDIRS})")
        return self.root / name

    def rel(self, path: Path) -> str:
        """`path` as shown to a person: relative to the workspace root."""
        try:
            return str(Path(path).resolve().relative_to(self.root))
        except ValueError:
            return str(path)

    def files(self, sub: str, *patterns: str) -> list[Path]:
        """Files (or folders) under a sub-folder matching glob patterns, newest first."""
        found: dict[Path, None] = {}
        for pat in patterns or ("*",):
            for p in self.dir(sub).glob(pat):
                if not p.name.startswith("."):
                    found[p] = None
        return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)

    # --------------------------------------------------------------------------------------------- examples
    def seed_examples(self) -> list[Path]:
        """Copy the repository's example specs, rewards and configs in once, so a new user has something to open.

        Never overwrites a file the user already has (they may have edited it).
        """
        copied: list[Path] = []
        if not REPO_EXAMPLES.is_dir():
            return copied
        # (folder, glob under examples/): files directly in a kind's own folder keep their name; others (the
        # arithmetic example's reward.py, tasks.jsonl) are prefixed with their folder to stay distinct.
        targets = [
            ("specs", "datasets/*.yaml"), ("specs", "datasets/*.yml"), ("specs", "specs/*.yaml"),
            ("rewards", "rewards/*.py"), ("rewards", "*/reward*.py"),
            ("datasets", "*/*tasks*.jsonl"), ("datasets", "*/*tasks*.parquet"),
            ("completions", "*/*completions*.jsonl"),
            ("configs", "configs/*.yaml"), ("configs", "configs/*.yml"),
        ]
        for sub, pat in targets:
            for src in sorted(REPO_EXAMPLES.glob(pat)):
                if not src.is_file() or src.name.startswith("_"):
                    continue
                own = src.parent.name in ("datasets", "specs", "configs", "rewards")
                dst = self.dir(sub) / (src.name if own else f"{src.parent.name}_{src.name}")
                if not dst.exists():
                    shutil.copy2(src, dst)
                    copied.append(dst)
        return copied
