"""Audit: attack a reward with the probe suite before training, see trivial-policy baselines first, the findings
with examples, the score distribution, score vs length and the dominance picture, and label sampled outputs
pass/fail with agreement updated as you label (labels persist in the inspection table).

The audit itself is `rewards.audit.run_audit`, the reward scored through `rewards.scoring.score_batch` in the
sandbox; the report JSON is the `rlvr audit --json` contract, saved under audits/ with a note of which reward
file content it certifies (the Training page accepts it only for that content).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import polars as pl
import streamlit as st

from studio.page_guard import run_page
from studio.pickers import audit_meta_path, file_hash, pick_reward, read_json, reward_file, task_tables
from studio.workspace import Workspace

TITLE = "Audit"
LABELS = ["pass", "fail"]


def audit_name(spec: str, dataset: Path) -> str:
    fn = spec.rsplit(":", 1)[1]
    return f"{reward_file(spec).stem}.{fn}__{dataset.parent.name if dataset.name in ('tasks',) else dataset.stem}"


def render(ws: Workspace) -> None:
    st.title("Audit")
    _run_form(ws)
    st.divider()
    reports = [p for p in ws.files("audits", "*.json") if not p.name.endswith(".meta.json")]
    if not reports:
        st.info("No audit yet: pick a reward and a dataset above and run one.")
        return
    names = [ws.rel(p) for p in reports]
    last = st.session_state.get("_audit_last")
    idx = names.index(last) if last in names else 0
    choice = st.selectbox("audit report", names, index=idx, key="audit_report")
    path = ws.resolve(choice, must_exist=True)
    _show_report(ws, path)


def _run_form(ws: Workspace) -> None:
    st.subheader("Run an audit")
    spec = pick_reward(ws, key="audit_reward")
    tables = task_tables(ws)
    if not tables:
        st.info("No task dataset in the workspace: generate one on the Datasets page.")
        return
    c1, c2, c3 = st.columns([2, 1, 1])
    data = c1.selectbox("dataset", [ws.rel(p) for p in tables], key="audit_dataset")
    ref = c2.text_input("reference field", value="answer", key="audit_ref")
    n_samples = c3.number_input("model samples to inspect", min_value=0, max_value=200, value=50,
                                key="audit_samples", help="0 skips model sampling; 50-100 is the inspection step")
    c4, c5 = st.columns([1, 3])
    max_rows = c4.number_input("dataset rows probed", min_value=1, max_value=100_000, value=200, key="audit_rows")
    if not spec:
        return
    clicked = c5.button("Run audit", type="primary", key="run_audit")
    if "_audit_message" in st.session_state:
        verdict, message = st.session_state["_audit_message"]
        (st.success if verdict == "pass" else st.error)(message)
    if not clicked:
        return
    from rewards.audit import write_json
    from studio.commands.audit import run_audit_job
    from studio.model_samples import cached_model

    path = ws.resolve(data, must_exist=True)
    name = f"{audit_name(spec, path)}.{time.strftime('%Y%m%d-%H%M%S')}"
    t0 = time.time()
    with st.spinner(f"sampling {int(n_samples)} completions and probing the reward (sandboxed)"):
        report, ctx = run_audit_job(spec, path, reference_field=ref, samples=int(n_samples), model="default",
                                    loaded_model=cached_model("default") if n_samples else None,
                                    table=ws.dir("labels") / f"{name}.parquet", sandbox=True,
                                    limit=int(max_rows), max_new_tokens=48)
    out = ws.dir("audits") / f"{name}.json"
    write_json(report, out)
    _write_scores(ctx, ws.dir("audits") / f"{name}.scores.parquet")
    meta = {"reward": spec, "reward_hash": file_hash(reward_file(spec)), "dataset": str(path),
            "reference_field": ref, "created_at": time.time(), "seconds": round(time.time() - t0, 2)}
    audit_meta_path(out).write_text(json.dumps(meta, indent=2))
    _record_in_registry(report, spec, out)
    st.session_state["_audit_last"] = ws.rel(out)
    st.session_state["_audit_message"] = (
        report.verdict, f"audit {report.verdict}: {len(report.findings)} finding(s), {len(report.blocking)} at "
        f"severity high or above ({report.seconds:.1f} s) → `{ws.rel(out)}`")
    st.rerun()  # render the new report in the page's steady layout (tabs keep their place on later reruns)


def _write_scores(ctx: Any, path: Path) -> None:
    """Every input the audit scored (probes, references, samples) with its verdict: the data behind the plots."""
    from rewards.audit.context import item_text

    recs = []
    for s in ctx.scored:
        if s.override or s.result.score is None:
            continue
        text = item_text(s.item, limit=10_000)
        recs.append({"source": s.source, "row": s.row, "length": len(text), "score": float(s.result.score),
                     "passed": bool(ctx.is_pass(s.row, s.result))})
    pl.DataFrame(recs, schema={"source": pl.Utf8, "row": pl.Int64, "length": pl.Int64, "score": pl.Float64,
                               "passed": pl.Boolean}).write_parquet(path)


def _record_in_registry(report: Any, spec: str, out: Path) -> None:
    """The catalog keeps audits next to runs and checkpoints (what `rlvr checkpoints show` traces back to)."""
    try:
        from training.registry import Registry

        with Registry() as reg:
            reg.record_audit(report.reward, report.verdict == "pass", report_path=str(out),
                             summary={"findings": len(report.findings), "reward_spec": spec})
    except Exception as exc:  # noqa: BLE001 - the audit stands on its own; say the catalog did not take it
        st.caption(f"(not recorded in the registry: {exc})")


def _show_report(ws: Workspace, path: Path) -> None:
    from schemas.audit import AuditReport

    report = AuditReport.model_validate_json(path.read_text())
    meta = read_json(audit_meta_path(path)) or {}
    verdict_box = st.success if report.verdict == "pass" else st.error
    verdict_box(f"verdict **{report.verdict}** · reward `{report.reward}` · {report.rows} rows · "
                f"{len(report.findings)} finding(s), {len(report.blocking)} blocking")
    if meta.get("reward") and meta.get("reward_hash") != _current_hash(meta["reward"]):
        st.warning("the reward file changed since this audit: it no longer certifies the current code")
    _baselines(report)
    tab_f, tab_p, tab_l = st.tabs(["Findings", "Plots", "Inspect & label"], key="audit_tabs")
    with tab_f:
        _findings(report)
    with tab_p:
        _plots(path)
    with tab_l:
        _labels(ws, report)


def _current_hash(spec: str) -> str | None:
    p = reward_file(spec)
    return file_hash(p) if p.is_file() else None


def _baselines(report: Any) -> None:
    b = report.baselines
    if b is None:
        return
    cols = st.columns(1 + len(b.policies))
    cols[0].metric("reference answers pass", f"{b.reference_pass_rate:.0%}")
    for col, (name, pol) in zip(cols[1:], b.policies.items()):
        col.metric(f"'{name}' policy passes", f"{pol.pass_rate:.0%}", help=pol.description)


def _findings(report: Any) -> None:
    if not report.findings:
        st.success(f"no finding: {sum(p.status == 'clean' for p in report.probes)} probes clean, "
                   f"{sum(p.status == 'skipped' for p in report.probes)} skipped")
    else:
        st.dataframe(pl.DataFrame([{
            "severity": f.severity, "family": f.family, "probe": f.probe,
            "fooled": f"{f.fooled_rows}/{f.tested_rows}", "message": f.message,
        } for f in report.findings]).to_pandas(), hide_index=True, width="stretch")
        for f in report.findings:
            with st.expander(f"{f.severity} · {f.family}/{f.probe}: {f.fooled_rows} row(s) fooled"):
                st.write(f.message)
                for ex in f.examples:
                    st.code(f"row {ex.row} ({ex.row_id}) score={ex.score} passed={ex.passed}\n{ex.input}",
                            language="text")
    with st.expander("probe coverage"):
        st.dataframe(pl.DataFrame([p.model_dump() for p in report.probes]).to_pandas(), hide_index=True,
                     width="stretch")


def _plots(path: Path) -> None:
    scores_path = path.with_name(path.stem + ".scores.parquet")
    if not scores_path.exists():
        st.caption("no score table saved with this audit")
        return
    frame = pl.read_parquet(scores_path).with_columns(
        pl.when(pl.col("passed")).then(pl.lit("passing")).otherwise(pl.lit("failing")).alias("verdict"))
    passing = frame.filter(pl.col("passed"))["score"]
    failing = frame.filter(~pl.col("passed"))["score"]
    m1, m2, m3 = st.columns(3)
    lo = passing.min() if passing.len() else None
    hi = failing.max() if failing.len() else None
    m1.metric("lowest passing score", "-" if lo is None else f"{lo:.3f}")
    m2.metric("highest failing score", "-" if hi is None else f"{hi:.3f}")
    if lo is not None and hi is not None:
        m3.metric("dominance margin", f"{lo - hi:+.3f}", help="> 0: every passing sample outscores every failing one")
    c1, c2 = st.columns(2)
    with c1:
        st.markdown("**dominance: scores of passing vs failing inputs**")
        binned = frame.with_columns((pl.col("score") * 20).round(0).truediv(20).alias("score_bin")) \
            .group_by(["score_bin", "verdict"]).len("inputs").sort("score_bin").rename({"score_bin": "score"})
        st.bar_chart(binned.to_pandas(), x="score", y="inputs", color="verdict", stack=False, height=260)
    with c2:
        st.markdown("**score vs length**")
        st.scatter_chart(frame.to_pandas(), x="length", y="score", color="verdict", height=260)
    st.markdown("**score distribution (all audited inputs)**")
    hist = frame.with_columns(pl.col("score").round(2)).group_by("score").len("inputs").sort("score")
    st.bar_chart(hist.to_pandas(), x="score", y="inputs", height=200)


def agreement(frame: pl.DataFrame) -> dict[str, Any]:
    """Accuracy and Cohen's kappa of the reward's verdicts against the labels given so far."""
    from rewards.audit.inspection import cohens_kappa

    done = frame.filter(pl.col("label").is_in(LABELS) & pl.col("passed").is_not_null())
    rew = [bool(v) for v in done["passed"]]
    hum = [v == "pass" for v in done["label"]]
    return {"labelled": len(hum), "accuracy": (sum(a == b for a, b in zip(rew, hum)) / len(hum)) if hum else None,
            "kappa": cohens_kappa(rew, hum) if hum else None,
            "disagreements": done.filter(pl.col("passed") != (pl.col("label") == "pass"))}


def _labels(ws: Workspace, report: Any) -> None:
    from rewards.audit.inspection import read_table, write_table

    insp = report.inspection
    if insp is None or not insp.table or not Path(insp.table).exists():
        st.info("This audit sampled no model output: run it with model samples to inspect and label them.")
        return
    table = Path(insp.table)
    frame = read_table(table)
    st.caption(f"{frame.height} sampled outputs from `{insp.model}` · labels persist in `{ws.rel(table)}` "
               "(and its CSV, which `rlvr audit` reads back)")
    edited = st.data_editor(
        frame.select(["label", "sample", "score", "passed", "completion", "reason", "prompt", "id"]).to_pandas(),
        column_config={
            "label": st.column_config.SelectboxColumn("your label", options=LABELS, required=False, width="small"),
            "passed": st.column_config.CheckboxColumn("reward passed"),
            "completion": st.column_config.TextColumn(width="large"),
            "prompt": st.column_config.TextColumn(width="medium"),
        },
        disabled=["sample", "id", "prompt", "completion", "score", "passed", "reason"],
        hide_index=True, width="stretch", key=f"labels::{table}", num_rows="fixed",
    )
    new_labels = [None if (v is None or v != v) else str(v) for v in edited["label"].tolist()]
    if new_labels != frame["label"].to_list():
        frame = frame.with_columns(pl.Series("label", new_labels, dtype=pl.Utf8))
        write_table(frame, table)
    agree = agreement(frame)
    m1, m2, m3 = st.columns(3)
    m1.metric("labelled", f"{agree['labelled']} / {frame.height}")
    m2.metric("agreement (accuracy)", "-" if agree["accuracy"] is None else f"{agree['accuracy']:.0%}")
    m3.metric("Cohen's kappa", "-" if agree["kappa"] is None else f"{agree['kappa'] + 0.0:.2f}")
    if agree["disagreements"].height:
        st.markdown("**disagreements** (the reward's verdict vs yours)")
        st.dataframe(agree["disagreements"].select(["sample", "completion", "score", "passed", "label"]).to_pandas(),
                     hide_index=True, width="stretch")


if __name__ == "__main__":
    run_page(TITLE, render)
