"""Evaluation and checkpoints: compare evaluation reports (paired bootstrap, per-category bars, flips), register
checkpoints from runs, promote and roll back through the registry (weights re-hashed before either).

Calls `training.evaluation` (load_report, compare_reports) and `training.registry.Registry`, the same objects
`rlvr eval compare` and `rlvr checkpoints ...` use; the catalog is the one the CLI sees.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import polars as pl
import streamlit as st

from studio.page_guard import run_page
from studio.pickers import dataset_paths, pick_reward
from studio.runs import RunManager
from studio.workspace import Workspace

TITLE = "Evaluation & checkpoints"


def render(ws: Workspace) -> None:
    st.title("Evaluation & checkpoints")
    tab_eval, tab_ckpt = st.tabs(["Evaluations", "Checkpoints"], key="eval_tabs")
    with tab_eval:
        _evaluations(ws)
    with tab_ckpt:
        _checkpoints(ws)


# ------------------------------------------------------------------------------------------------ evaluations
def eval_reports(ws: Workspace) -> list[Path]:
    """Evaluation reports in the workspace (evals/ and any run's output), newest first."""
    found = ws.files("evals", "*.json", "*/*.json") + sorted(ws.dir("runs").glob("*/output/**/eval*.json"))
    return [p for p in found if not p.name.endswith(".meta.json")]


def _evaluations(ws: Workspace) -> None:
    from training.evaluation import EvaluationError, compare_reports, load_report

    _launch_eval(ws)
    reports = {}
    for p in eval_reports(ws):
        try:
            reports[ws.rel(p)] = load_report(p)
        except EvaluationError:
            continue
    if not reports:
        st.info("No evaluation report yet: run one above or with `rlvr eval ... --json` into the workspace's evals/.")
        return
    names = list(reports)
    st.subheader("Reports")
    st.dataframe(pl.DataFrame([{
        "report": n, "model": r.model, "pass@1": round(r.overall.pass_at_1, 4),
        **{f"pass@{k}": round(v, 4) for k, v in r.overall.pass_at_k.items()},
        "mean reward": r.overall.mean_reward, "tasks": r.overall.tasks, "errors": r.overall.errors,
    } for n, r in reports.items()]).to_pandas(), hide_index=True, width="stretch")
    one = st.selectbox("report", names, key="eval_one")
    rep = reports[one]
    c1, c2 = st.columns(2)
    with c1:
        st.markdown("**pass@1 by category**")
        cats = pl.DataFrame([{"category": c, "pass@1": g.pass_at_1} for c, g in rep.by_category.items()])
        if cats.height:
            st.bar_chart(cats.to_pandas(), x="category", y="pass@1", height=240)
    with c2:
        st.markdown("**failure reasons**")
        reasons = pl.DataFrame([{"reason": k, "count": v} for k, v in rep.overall.failure_reasons.items()])
        if reasons.height:
            st.bar_chart(reasons.to_pandas(), x="reason", y="count", height=240)
        else:
            st.caption("no failure recorded")
    if len(names) >= 2:
        st.subheader("Compare two reports (B - A)")
        c3, c4, c5 = st.columns([2, 2, 1])
        a = c3.selectbox("A", names, index=1, key="cmp_a")
        b = c4.selectbox("B", names, index=0, key="cmp_b")
        metric = c5.selectbox("metric", ["pass_at_1", "mean_score"], key="cmp_metric")
        try:
            cmp = compare_reports(reports[a], reports[b], metric=metric, n_resamples=2000, a_name=a, b_name=b)
        except EvaluationError as exc:
            st.error(str(exc))
            return
        m1, m2, m3, m4 = st.columns(4)
        m1.metric("A", f"{cmp.mean_a:.3f}")
        m2.metric("B", f"{cmp.mean_b:.3f}", delta=f"{cmp.delta:+.3f}")
        m3.metric(f"{cmp.confidence:.0%} CI of B - A", f"[{cmp.ci_low:+.3f}, {cmp.ci_high:+.3f}]")
        m4.metric("significant", "yes" if cmp.significant else "no")
        bars = pl.DataFrame([{"category": c, "A": v["a"], "B": v["b"]} for c, v in cmp.by_category.items()])
        if bars.height:
            st.bar_chart(bars.to_pandas(), x="category", y=["A", "B"], stack=False, height=260)
        if cmp.flips:
            st.dataframe(pl.DataFrame([f.model_dump() for f in cmp.flips]).to_pandas(), hide_index=True,
                         width="stretch")


def _launch_eval(ws: Workspace) -> None:
    """An evaluation is a background `rlvr eval` run (it samples a model), written into evals/."""
    with st.expander("Run an evaluation", expanded=False):
        datasets = dataset_paths(ws)
        tables = [p for d in datasets for p in ([d] if not (d / "manifest.json").exists()
                                                 else [t for t in d.iterdir() if t.is_dir() and not t.name.startswith("_")])]
        if not tables:
            st.info("No dataset yet.")
            return
        model = st.text_input("model (default, a checkpoint name, `production`, or a folder)", value="default",
                              key="eval_model")
        data = st.selectbox("dataset", [ws.rel(p) for p in tables], key="eval_dataset")
        reward = pick_reward(ws, key="eval_reward")
        c1, c2, c3 = st.columns(3)
        split = c1.text_input("split", value="test", key="eval_split")
        k = c2.number_input("k (samples per task)", min_value=1, max_value=16, value=1, key="eval_k")
        limit = c3.number_input("max tasks", min_value=1, max_value=100_000, value=20, key="eval_limit")
        name = st.text_input("report name", value="eval", key="eval_name")
        if st.button("Start evaluation", disabled=not reward, key="start_eval"):
            if "/" in model or model.startswith("."):  # a folder: only inside the workspace
                model = str(ws.resolve(model, must_exist=True))
            out = ws.resolve(f"{name}.json", base="evals")
            cmd = [sys.executable, "-m", "studio.cli", "eval", "--model", model, "--dataset",
                   str(ws.resolve(data)), "--split", split, "-k", str(int(k)), "--json", str(out),
                   "--reward", reward, "--limit", str(int(limit))]
            status = RunManager(ws.dir("runs")).start("eval", cmd, name=name, output_dir=out.parent)
            st.success(f"evaluation started as run `{status.record.run_id}`: follow it on the Training page")


# ------------------------------------------------------------------------------------------------ checkpoints
def run_checkpoints(ws: Workspace) -> list[Path]:
    """Complete checkpoint folders (a manifest written last) under the workspace's runs."""
    return sorted({p.parent for p in ws.dir("runs").glob("*/output/**/manifest.json")})


def _checkpoints(ws: Workspace) -> None:
    from training.registry import DEFAULT_ALIAS, Registry, RegistryError

    with Registry() as reg:
        st.caption(f"catalog: `{reg.path}` (the same one `rlvr checkpoints` uses)")
        known = {Path(c.path).resolve() for c in reg.checkpoints()}
        new = [p for p in run_checkpoints(ws) if p.resolve() not in known]
        if new:
            c1, c2 = st.columns([3, 1])
            pick = c1.selectbox("unregistered checkpoint from a run", [ws.rel(p) for p in new], key="ckpt_new")
            if c2.button("Register", key="ckpt_register"):
                try:
                    rec = reg.register_checkpoint(ws.resolve(pick), name=None)
                    st.success(f"registered `{rec.name}`")
                except (RegistryError, OSError, ValueError) as exc:
                    st.error(str(exc))
        ckpts = reg.checkpoints()
        if not ckpts:
            st.info("No checkpoint registered yet: a training run writes them; register them here.")
            return
        st.dataframe(pl.DataFrame([{
            "name": c.name, "aliases": ", ".join(c.aliases), "step": c.step, "base": c.base_model,
            "parent": c.parent or "", "reward": c.reward_version or "", "weights": c.weights_hash[:12],
            **{k: round(v, 4) for k, v in list(c.metrics.items())[:4]},
        } for c in ckpts]).to_pandas(), hide_index=True, width="stretch")
        aliases = reg.aliases()
        current = aliases.get(DEFAULT_ALIAS)
        st.markdown(f"**{DEFAULT_ALIAS}** → `{current or 'nothing promoted yet'}`")
        c1, c2, c3 = st.columns([2, 1, 1])
        target = c1.selectbox("checkpoint", [c.name for c in reversed(ckpts)], key="ckpt_pick")
        if c2.button(f"Promote to {DEFAULT_ALIAS}", key="ckpt_promote"):
            try:
                reg.promote(target, note="studio")
                st.success(f"{DEFAULT_ALIAS} → {target}")
                st.rerun()
            except RegistryError as exc:
                st.error(str(exc))
        if c3.button("Roll back", key="ckpt_rollback", disabled=current is None):
            try:
                rec = reg.rollback(note="studio")
                st.success(f"{DEFAULT_ALIAS} rolled back to {rec.checkpoint} (weights verified)")
                st.rerun()
            except RegistryError as exc:
                st.error(str(exc))
        hist = reg.history(DEFAULT_ALIAS)
        if hist:
            st.markdown("**history**")
            rows = [h.model_dump() | {"created_at": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(h.created_at))}
                    for h in hist]
            st.dataframe(pl.DataFrame(rows).to_pandas(), hide_index=True, width="stretch")
        lineage = reg.lineage(target)
        st.caption("lineage: " + " ← ".join(c.name for c in lineage))


if __name__ == "__main__":
    run_page(TITLE, render)
