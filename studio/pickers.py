"""Selection widgets shared by pages: a dataset, a reward function, an audit report from the workspace.

Why here and not in each page: the same choice ("which dataset?", "which reward?") appears on four pages and must
list the same files the same way. Reward files are listed by parsing them (`ast`), never by importing them: user
code runs only inside the rewards sandbox, when a page asks the library to score.
"""

from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path
from typing import Any

import streamlit as st

from studio.workspace import Workspace


def dataset_paths(ws: Workspace) -> list[Path]:
    """Datasets in the workspace: Parquet/JSONL files and generated folders (those holding Parquet parts)."""
    out: list[Path] = []
    for p in ws.files("datasets", "*.parquet", "*.jsonl", "*"):
        if p.is_dir():
            if any(p.glob("*.parquet")) or any(p.glob("*/*.parquet")):
                out.append(p)
        elif p.suffix in (".parquet", ".jsonl") and p not in out:
            out.append(p)
    return out


def pick_dataset(ws: Workspace, label: str = "dataset", key: str = "dataset") -> Path | None:
    paths = task_tables(ws)
    if not paths:
        st.info("No dataset in the workspace yet: generate one on the Datasets page.")
        return None
    names = [ws.rel(p) for p in paths]
    choice = st.selectbox(label, names, key=key)
    return ws.resolve(choice) if choice else None


def function_names(path: Path) -> list[str]:
    """Top-level reward names of a Python file, parsed and not executed: functions, and names bound to a call
    (`math_shaped = ShapedReward(...)`, a configured verifier object); reward-looking names first."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return []
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            names.extend(t.id for t in node.targets if isinstance(t, ast.Name))
    names = [n for n in names if not n.startswith("_") and not n.isupper()]
    return sorted(dict.fromkeys(names), key=lambda n: (0 if any(k in n for k in ("reward", "verif", "shaped",
                                                                                     "binary")) else 1, names.index(n)))


def pick_reward(ws: Workspace, key: str = "reward") -> str | None:
    """`path/to/file.py:function` of a reward in the workspace's `rewards/` folder."""
    files = ws.files("rewards", "*.py")
    if not files:
        st.info("No reward file in the workspace yet: write one on the Rewards page.")
        return None
    c1, c2 = st.columns([2, 1])
    fname = c1.selectbox("reward file", [ws.rel(p) for p in files], key=f"{key}_file")
    path = ws.resolve(fname)
    fns = function_names(path)
    if not fns:
        c2.warning("no function in this file")
        return None
    fn = c2.selectbox("function", fns, key=f"{key}_fn")
    return f"{path}:{fn}"


def file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def reward_file(reward_spec: str) -> Path:
    return Path(reward_spec.rsplit(":", 1)[0])


def read_json(path: Path) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def audit_meta_path(report: Path) -> Path:
    return report.with_name(report.stem + ".meta.json")


def audits_for(ws: Workspace, reward_spec: str) -> list[tuple[Path, dict, dict]]:
    """Audit reports in the workspace made for this reward at its current content (file hash), newest first.

    An edited reward file has a new hash, so an old audit no longer counts for it.
    """
    path = reward_file(reward_spec)
    current = file_hash(path) if path.is_file() else None
    out = []
    for rep in ws.files("audits", "*.json"):
        if rep.name.endswith(".meta.json"):
            continue
        meta = read_json(audit_meta_path(rep)) or {}
        if meta.get("reward") == reward_spec and meta.get("reward_hash") == current:
            report = read_json(rep)
            if isinstance(report, dict):
                out.append((rep, report, meta))
    return out


def task_tables(ws: Workspace) -> list[Path]:
    """Task datasets usable by a reward: Parquet/JSONL files and the tables of generated datasets."""
    out: list[Path] = []
    for d in dataset_paths(ws):
        if d.is_dir() and (d / "manifest.json").exists():
            out.extend(sorted(t for t in d.iterdir() if t.is_dir() and not t.name.startswith("_")))
        else:
            out.append(d)
    return out


@st.cache_data(show_spinner=False, max_entries=16)
def load_rows(path: str, mtime: float) -> list[dict[str, Any]]:
    """The dataset's rows as the reward receives them (TaskRow-validated, then as keyword fields)."""
    from generators.task_io import read_tasks
    from rewards.scoring import row_fields

    return [row_fields(t) for t in read_tasks(path)]


def mtime_of(p: Path) -> float:
    return max((q.stat().st_mtime for q in p.rglob("*")), default=0.0) if p.is_dir() else p.stat().st_mtime


def pick_source_file(ws: Workspace, folder: str, patterns: tuple[str, ...], *, label: str, new_label: str,
                     starter: str, new_name: str, key: str, column: Any = st) -> tuple[str, str, str]:
    """Choose a file of the workspace's `folder` or a new one; returns (choice, its text, default save name).

    The Datasets and Rewards editors both start from this, so that the list, the new-file starter and the
    resolution inside the workspace behave the same on every page.
    """
    names = [ws.rel(p) for p in ws.files(folder, *patterns)] + [new_label]
    choice = column.selectbox(label, names, key=key)
    if choice == new_label:
        return choice, starter, new_name
    path = ws.resolve(choice, must_exist=True)
    return choice, path.read_text(encoding="utf-8"), choice


def save_source_file(target: Path, text: str) -> None:
    """Write an edited spec or reward atomically: a crash mid-save never leaves the user's file half-written."""
    from generators.task_io import atomic_write_bytes

    atomic_write_bytes(target, text.encode("utf-8"))

