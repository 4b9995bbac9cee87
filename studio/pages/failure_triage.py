"""Triage: upload production failures, see them re-verified and bucketed by failure mode with the lightest
recommended intervention per bucket, and turn buckets into regression tasks.

All of it is `training.triage.triage` (the same pipeline `rlvr triage` runs); the page stores uploads and reports in
the workspace's triage/ folder and merges chosen buckets into a dataset with `write_regression`.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import streamlit as st

from studio.page_guard import run_page
from studio.pickers import task_tables
from studio.workspace import Workspace

TITLE = "Triage"
NO_TASKS = "(none: bucket by reported reasons and error text only)"


def render(ws: Workspace) -> None:
    st.title("Triage")
    _upload(ws)
    files = [p for p in ws.files("triage", "*.jsonl") if not p.name.endswith(".regression.jsonl")]
    if not files:
        st.info("Upload a JSONL of failed traces (our trajectories, OpenAI chat messages with tool calls, or NeMo Gym "
                "rollouts) to bucket them.")
        return
    c1, c2 = st.columns(2)
    choice = c1.selectbox("failures file", [ws.rel(p) for p in files], key="triage_file")
    tables = task_tables(ws)
    tasks_choice = c2.selectbox("tasks to re-verify against (workplace verifier)",
                                [NO_TASKS] + [ws.rel(p) for p in tables], key="triage_tasks")
    path = ws.resolve(choice, must_exist=True)
    report_path = path.with_name(path.stem + ".triage.json")
    if st.button("Triage", type="primary", key="run_triage"):
        _run(ws, path, None if tasks_choice == NO_TASKS else ws.resolve(tasks_choice), report_path)
    if report_path.exists():
        _show(ws, report_path)


def _upload(ws: Workspace) -> None:
    up = st.file_uploader("failed traces (JSONL)", type=["jsonl"], key="triage_upload")
    if up is None:
        return
    target = ws.resolve(Path(up.name).name, base="triage")
    data = up.getvalue()
    if not target.exists() or target.read_bytes() != data:
        target.write_bytes(data)
        st.success(f"saved `{ws.rel(target)}`")


def _run(ws: Workspace, failures: Path, tasks_path: Path | None, report_path: Path) -> None:
    from generators.task_io import read_tasks
    from generators.task_io import atomic_write_bytes
    from training.triage import TriageError, triage, workplace_verifier

    tasks = read_tasks(tasks_path) if tasks_path else None
    verifier = workplace_verifier() if tasks else None
    try:
        with st.spinner("reading, re-verifying and bucketing"):
            report = triage(failures, tasks=tasks, verifier=verifier,
                            out=failures.with_name(failures.stem + ".regression.parquet"))
    except TriageError as exc:
        st.error(f"cannot triage this file: {exc}")
        return
    atomic_write_bytes(report_path, report.model_dump_json(indent=1).encode())
    st.success(f"{report.traces} traces → {len(report.buckets)} bucket(s), {report.regression_tasks} regression task(s)")


def _show(ws: Workspace, report_path: Path) -> None:
    from schemas.triage import TriageReport

    report = TriageReport.model_validate_json(report_path.read_text())
    m = st.columns(5)
    m[0].metric("traces", report.traces)
    m[1].metric("re-verified", report.reverified)
    m[2].metric("passed on re-verification", len(report.passed_on_reverification))
    m[3].metric("buckets", len(report.buckets))
    m[4].metric("regression tasks", report.regression_tasks)
    if report.formats:
        st.caption("formats: " + ", ".join(f"{k} {v}" for k, v in report.formats.items()))
    if not report.buckets:
        st.success("no failing trace left after re-verification")
        return
    st.dataframe(pl.DataFrame([{
        "bucket": b.name, "failures": b.count, "by": b.key_kind, "reason": b.reason,
        "recommended": b.recommendation.intervention if b.recommendation else "",
    } for b in report.buckets]).to_pandas(), hide_index=True, width="stretch")
    st.bar_chart(pl.DataFrame([{"bucket": b.name, "failures": b.count} for b in report.buckets]).to_pandas(),
                 x="bucket", y="failures", height=60 + 40 * len(report.buckets), horizontal=True)
    for b in report.buckets:
        rec = b.recommendation
        with st.expander(f"{b.name}: {b.count} failure(s) → {rec.intervention if rec else 'no recommendation'}"):
            if rec:
                st.markdown(f"**why:** {rec.why}")
                if rec.evidence:
                    st.code(json.dumps(rec.evidence, indent=1, default=str), language="json")
                if rec.alternatives:
                    st.caption("alternatives: " + "; ".join(rec.alternatives))
            if b.signature:
                st.caption(f"signature: `{b.signature}`")
            for ex in b.examples[:3]:
                st.code(ex, language="text")
    _regression(ws, report)


def _regression(ws: Workspace, report) -> None:
    from generators.task_io import read_tasks
    from training.triage import write_regression

    if not report.regression_path or not Path(report.regression_path).exists():
        return
    st.subheader("Regression tasks")
    reg = read_tasks(report.regression_path)
    st.caption(f"{len(reg)} task(s) in `{ws.rel(Path(report.regression_path))}` (split `regression`, category "
               "`regression/<bucket>`: evaluation reports them separately)")
    buckets = st.multiselect("buckets to add", [b.name for b in report.buckets],
                             default=[b.name for b in report.buckets], key="reg_buckets")
    files = [p for p in task_tables(ws) if p.is_file()]
    if not files:
        st.info("No Parquet/JSONL task dataset to merge into.")
        return
    c1, c2 = st.columns([3, 1])
    into = c1.selectbox("merge into dataset", [ws.rel(p) for p in files], key="reg_into")
    if c2.button("Add regression tasks", key="add_regression"):
        chosen = [t for t in reg if t.metadata.get("bucket") in buckets]
        target = ws.resolve(into, must_exist=True)
        write_regression(chosen, target, into=target)
        st.success(f"added {len(chosen)} regression task(s) to `{ws.rel(target)}`")


if __name__ == "__main__":
    run_page(TITLE, render)
