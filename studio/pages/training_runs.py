"""Training: start SFT/GRPO from a validated dataset and an audited reward, watch live curves, stop cleanly.

The run is the `rlvr train` / `rlvr sft` CLI in a background process (studio.runs), so it survives a page reload
and a closed browser; the curves are read from the metrics JSONL the trainer appends to.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import streamlit as st
import yaml

from studio.page_guard import run_page
from studio.pickers import audits_for, mtime_of, pick_dataset, pick_reward
from studio.runs import RunManager, find_metrics_file, read_metrics
from studio.workspace import Workspace

TITLE = "Training"

# Metric names as the trainer writes them (first present wins), grouped into the four curves a person watches.
CURVES: dict[str, tuple[str, ...]] = {
    "reward": ("reward", "reward_mean", "rewards/mean", "mean_reward"),
    "pass rate": ("pass_rate", "pass_rate_mean", "passed"),
    "completion length": ("completion_length", "length_mean", "mean_length", "len_mean", "completion_len_mean"),
    "KL": ("kl", "kl_mean"),
    "loss": ("loss",),
}

BUILTIN_TEMPLATE: dict[str, Any] = {
    "name": "studio-run", "steps": 10, "batch_size": 8,
    "rollout": {"num_generations": 4, "max_new_tokens": 64},
    "loss": {"type": "dapo"}, "checkpoint": {"every": 5},
}


@st.cache_data(show_spinner=False, max_entries=32)
def _validate_dataset(path: str, mtime: float) -> tuple[bool, str, dict[str, int]]:
    """Every row read back as a TaskRow (the library's own check); cached per file version."""
    from generators.task_io import read_tasks

    try:
        tasks = read_tasks(path)
    except Exception as exc:  # noqa: BLE001 - the message is the verdict shown
        return False, str(exc), {}
    splits: dict[str, int] = {}
    for t in tasks:
        splits[str(t.split)] = splits.get(str(t.split), 0) + 1
    if not tasks:
        return False, f"{path}: no rows", {}
    return True, f"{len(tasks)} tasks", splits


def _templates(ws: Workspace) -> dict[str, dict[str, Any]]:
    """Training config templates of the workspace (files whose top-level keys are TrainConfig's; a DPO config or
    anything else in configs/ is not offered here)."""
    from schemas.train_config import TrainConfig

    out: dict[str, dict[str, Any]] = {}
    for p in ws.files("configs", "*.yaml", "*.yml"):
        try:
            data = yaml.safe_load(p.read_text())
        except yaml.YAMLError:
            continue
        if isinstance(data, dict) and "reward" in data and set(data) <= set(TrainConfig.model_fields):
            out[ws.rel(p)] = data | {"__file__": str(p)}
    out["(built-in small GRPO run)"] = dict(BUILTIN_TEMPLATE)
    return out


def _resolve_template_paths(cfg: dict[str, Any]) -> None:
    """Relative paths inside a template are relative to the template's own folder; make them absolute."""
    src = cfg.pop("__file__", None)
    if not src:
        return
    base = Path(src).parent
    model = cfg.get("model") or {}
    for section, key in (("model", "tokenizer"), ("model", "name")):
        v = (cfg.get(section) or {}).get(key)
        if isinstance(v, str) and (v.startswith("./") or v.startswith("../")):
            model[key] = str((base / v).resolve())
    sft = cfg.get("sft") or {}
    if isinstance(sft.get("data_path"), str) and not Path(sft["data_path"]).is_absolute():
        sft["data_path"] = str((base / sft["data_path"]).resolve())


def build_config(template: dict[str, Any], *, dataset: Path, reward: str, audit_report: Path | None,
                 allow_unaudited: bool, output_dir: Path, steps: int, name: str) -> dict[str, Any]:
    """The template with this run's dataset, reward, audit and output folder filled in (validated by the caller)."""
    import copy

    cfg = copy.deepcopy(template)
    _resolve_template_paths(cfg)
    cfg["name"] = name
    cfg["steps"] = int(steps)
    cfg["output_dir"] = str(output_dir)
    data = dict(cfg.get("data") or {})
    data["path"] = str(dataset)
    data.pop("eval_path", None)
    cfg["data"] = data
    rew = dict(cfg.get("reward") or {})
    rew["function"] = reward
    rew["audit_report"] = str(audit_report) if audit_report else None
    rew["allow_unaudited"] = bool(allow_unaudited)
    cfg["reward"] = rew
    return cfg


def render(ws: Workspace) -> None:
    st.title("Training")
    runs = RunManager(ws.dir("runs"))
    _new_run(ws, runs)
    st.divider()
    _monitor(ws, runs)


def _new_run(ws: Workspace, runs: RunManager) -> None:
    from training.config_io import load_train_config

    st.subheader("Start a run")
    c1, c2 = st.columns(2)
    with c1:
        dataset = pick_dataset(ws, key="train_dataset")
        valid = False
        if dataset is not None:
            valid, msg, splits = _validate_dataset(str(dataset), mtime_of(dataset))
            if valid:
                st.success(f"validated: {msg} ({', '.join(f'{k}: {v}' for k, v in splits.items())})")
            else:
                st.error(f"not a valid task dataset: {msg}")
    with c2:
        reward = pick_reward(ws, key="train_reward")
        audit_path, audited, allow_unaudited = None, False, False
        if reward:
            audits = audits_for(ws, reward)
            passing = [a for a in audits if a[1].get("verdict") == "pass"]
            if passing:
                audit_path, audited = passing[0][0], True
                st.success(f"audited: `{ws.rel(audit_path)}` (verdict pass)")
            else:
                if audits:
                    audit_path = audits[0][0]
                    st.warning(f"the latest audit of this reward failed (`{ws.rel(audit_path)}`): see the Audit page")
                else:
                    st.warning("this reward has not been audited at its current content: run the Audit page first")
                allow_unaudited = st.checkbox(
                    "train on it anyway (the override is recorded in the run and its config)", key="allow_unaudited")
                if allow_unaudited:
                    audit_path = None
    templates = _templates(ws)
    c3, c4, c5 = st.columns([2, 1, 1])
    tname = c3.selectbox("config template", list(templates), key="train_template",
                         help="examples/configs are copied into the workspace's configs/ folder")
    template = templates[tname]
    kind = c4.radio("command", ["train", "sft"], horizontal=True, key="train_kind",
                    help="train = GRPO family (with SFT warm start when the config has an sft section)")
    steps = c5.number_input("steps", min_value=1, max_value=100_000, value=int(template.get("steps", 10)),
                            key="train_steps")
    name = st.text_input("run name", value=str(template.get("name", "run")), key=f"train_name::{tname}")
    ready = bool(dataset and valid and reward and (audited or allow_unaudited))
    if st.button("Start run", type="primary", disabled=not ready, key="start_run"):
        if kind == "sft" and not template.get("sft"):
            st.error("`rlvr sft` needs a config with an sft section (demonstrations to imitate); pick such a template")
            return
        run_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{kind}-{uuid.uuid4().hex[:6]}"
        run_dir = ws.dir("runs") / run_id
        cfg = build_config(template, dataset=dataset, reward=reward, audit_report=audit_path,
                           allow_unaudited=allow_unaudited, output_dir=run_dir / "output", steps=steps, name=name)
        run_dir.mkdir(parents=True)
        config_path = run_dir / "config.yaml"
        config_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        try:  # the trainer's own loader: schema, option compatibility, data present, audit verdict
            load_train_config(config_path)
        except Exception as exc:  # noqa: BLE001 - its message says what to change
            import shutil

            shutil.rmtree(run_dir, ignore_errors=True)
            st.error(f"config refused: {exc}")
            return
        status = runs.start(kind, [sys.executable, "-m", "studio.cli", kind, str(config_path)], name=name,
                            config_path=config_path, output_dir=run_dir / "output", allow_unaudited=allow_unaudited,
                            notes={"dataset": str(dataset), "reward": reward,
                                   "audit_report": str(audit_path) if audit_path else None},
                            env={"RLVR_THREADS": os.environ.get("RLVR_THREADS", "1")}, run_id=run_id)
        st.session_state["selected_run"] = status.record.run_id
        st.success(f"started run `{run_id}` (pid {status.pid})")


def _monitor(ws: Workspace, runs: RunManager) -> None:
    st.subheader("Runs")
    all_runs = runs.list()
    if not all_runs:
        st.info("No run yet.")
        return
    ids = [r.record.run_id for r in all_runs]
    selected = st.session_state.get("selected_run")
    index = ids.index(selected) if selected in ids else 0
    run_id = st.selectbox("run", ids, index=index, key="monitor_run",
                          )
    status = runs.status(run_id)
    running = status.state == "running"

    @st.fragment(run_every=2.0 if running else None)
    def live() -> None:
        s = runs.status(run_id)
        cols = st.columns(4)
        cols[0].metric("state", s.state)
        cols[1].metric("kind", s.record.kind)
        rows = read_metrics(find_metrics_file(s.record.output_dir) or "")
        cols[2].metric("steps logged", sum(1 for r in rows if r.get("step", 1) >= 1))  # step 0: keep_best's start
        cols[3].metric("unaudited override", "yes" if s.record.allow_unaudited else "no")
        if s.state == "running" and st.button("Stop run", key=f"stop_{run_id}"):
            with st.spinner("stopping (SIGTERM, then wait)"):
                s = runs.stop(run_id)
            st.info(f"run {run_id}: {s.state}")
        _curves(rows)
        with st.expander("log", expanded=s.state in ("failed", "lost")):
            st.code(runs.log_tail(run_id) or "(empty)", language="text")
        if s.state != "running" and running:
            st.rerun()

    live()


def _curves(rows: list[dict[str, Any]]) -> None:
    if not rows:
        st.caption("no metrics yet (the first step writes them)")
        return
    import polars as pl

    frame = pl.DataFrame([{k: v for k, v in r.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
                          for r in rows])
    if "step" not in frame.columns:
        frame = frame.with_row_index("step", offset=1)
    charts = st.columns(2)
    shown = 0
    for title, names in CURVES.items():
        col = next((n for n in names if n in frame.columns), None)
        if col is None:
            continue
        with charts[shown % 2]:
            st.markdown(f"**{title}**")
            st.line_chart(frame.select(["step", col]).to_pandas(), x="step", y=col, height=200)
        shown += 1
    if shown == 0:
        st.dataframe(frame.to_pandas(), hide_index=True)


if __name__ == "__main__":
    run_page(TITLE, render)
