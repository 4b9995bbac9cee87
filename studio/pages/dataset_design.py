"""Datasets: edit a spec (errors shown at the field), preview rows with a per-column profile and every declared
relation checked, generate with a progress bar, browse and filter the Parquet output, see the quarantine.

Everything here is a call into `generators` (spec_io, writer, report), the same functions `rlvr preview` and
`rlvr generate` use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import streamlit as st
import yaml

from studio.page_guard import run_page
from studio.pickers import pick_source_file, save_source_file
from studio.workspace import Workspace
from studio.yaml_locations import annotate, line_of, split_problem, yaml_error_line

TITLE = "Datasets"
NEW_SPEC = "(new spec)"
STARTER = """name: tiny_math
seed: 0
batch_size: 1000
tables:
  tasks:
    split: {ratios: {train: 0.8, validation: 0.1, test: 0.1}}
    columns:
      - {name: id, kind: sequence, prefix: "t"}
      - {name: a, kind: uniform, low: 1, high: 20, integer: true}
      - {name: b, kind: uniform, low: 1, high: 20, integer: true}
      - {name: prompt, kind: template, template: "What is {a} + {b}? Reply with the number inside <answer></answer>."}
      - {name: answer, kind: expression, expr: "CAST(a + b AS VARCHAR)", dtype: str}
"""


def check_spec_text(text: str) -> tuple[Any, list[tuple[int | None, str]]]:
    """(spec or None, [(line, problem)]) for the editor: YAML syntax first, then every spec problem by path."""
    from generators.spec_io import SpecError, parse_spec

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return None, [(yaml_error_line(exc), f"not valid YAML: {exc}")]
    try:
        return parse_spec(data, "editor"), []
    except SpecError as exc:
        out = []
        for problem in exc.problems:
            path, _msg = split_problem(problem)
            out.append((line_of(text, path) if path else None, problem))
        return None, out


def render(ws: Workspace) -> None:
    st.title("Datasets")
    spec = _editor(ws)
    if spec is None:
        return
    tab_preview, tab_generate = st.tabs(["Preview", "Generate"], key="dataset_tabs")
    with tab_preview:
        _preview(spec)
    with tab_generate:
        _generate(ws, spec)
    st.divider()
    _browse(ws)


def _editor(ws: Workspace):
    c1, c2 = st.columns([3, 1])
    choice, source_text, save_name = pick_source_file(
        ws, "specs", ("*.yaml", "*.yml"), label="spec", new_label=NEW_SPEC, starter=STARTER,
        new_name="specs/my_spec.yaml", key="spec_choice", column=c1)
    text = st.text_area("spec (YAML)", value=source_text, height=360, key=f"spec_text::{choice}")
    spec, problems = check_spec_text(text)
    if problems:
        st.error(f"{len(problems)} problem(s) in the spec: each is shown under its line")
        for line, msg in problems:
            st.markdown(f"- {'line ' + str(line) + ': ' if line else ''}`{msg}`")
        st.code(annotate(text, problems), language="yaml", line_numbers=True)
    else:
        tables = ", ".join(f"{t} ({len(s.columns)} columns)" for t, s in spec.tables.items())
        st.success(f"valid spec `{spec.name}`: {tables}")
    save_to = c2.text_input("save as", value=save_name, key=f"save_as::{choice}")
    if c2.button("Save spec", key="save_spec"):
        target = ws.resolve(save_to, base=None)
        if not target.is_relative_to(ws.dir("specs")):
            st.error("specs are saved under specs/")
        else:
            save_source_file(target, text)
            st.success(f"saved `{ws.rel(target)}`")
    return spec


def _preview(spec) -> None:
    from generators.report import build_report
    from generators.writer import generate_frames

    n = st.number_input("rows to preview", min_value=1, max_value=1000, value=10, key="preview_n")
    if st.button("Preview", key="preview"):
        with st.spinner("sampling"):
            frames = generate_frames(spec, int(n))
        st.session_state["_preview_result"] = (spec.name, frames, build_report(spec, {t: frames[t] for t in spec.tables}))
    if "_preview_result" not in st.session_state:
        st.caption("Preview samples rows in memory (nothing written) with the same engine as Generate.")
        return
    name, frames, report = st.session_state["_preview_result"]
    for table in report["tables"]:
        st.markdown(f"#### {table} · {frames[table].height} rows")
        st.dataframe(frames[table].to_pandas(), hide_index=True, width="stretch")
        q = frames.get(f"_quarantine/{table}")
        if q is not None and q.height:
            st.warning(f"{q.height} row(s) quarantined")
            st.dataframe(q.to_pandas(), hide_index=True)
        with st.expander(f"{table}: per-column profile", expanded=True):
            st.dataframe(_profile_frame(report["tables"][table]["columns"]), hide_index=True, width="stretch")
    _relations(report)


def _profile_frame(columns: dict[str, dict]) -> pl.DataFrame:
    rows = []
    for col, prof in columns.items():
        rows.append({
            "column": col, "dtype": prof.get("dtype"), "nulls": prof.get("nulls"), "unique": prof.get("unique"),
            "min": _s(prof.get("min")), "max": _s(prof.get("max")), "mean": _s(prof.get("mean")),
            "top": ", ".join(f"{k} {v:.0%}" for k, v in list((prof.get("top") or {}).items())[:4]),
        })
    return pl.DataFrame(rows)


def _s(v: Any) -> str:
    return "" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v))


def _relations(report: dict) -> None:
    checks = report.get("relations") or []
    if not checks:
        st.caption("no declared relation or constraint to check")
        return
    bad = [c for c in checks if not c["ok"]]
    (st.error if bad else st.success)(
        f"relations: {len(checks) - len(bad)} of {len(checks)} hold" + (f"; {len(bad)} FAIL" if bad else ""))
    st.dataframe(pl.DataFrame([{"ok": "ok" if c["ok"] else "FAIL", "relation": c["name"], "kind": c["kind"],
                                "failed rows": c["failed"], "checked": c["checked"], "detail": c.get("detail", "")}
                               for c in checks]).to_pandas(), hide_index=True, width="stretch")


def _generate(ws: Workspace, spec) -> None:
    from generators.report import report_for_dir
    from generators.writer import Progress, generate_dataset

    c1, c2, c3 = st.columns(3)
    n = c1.number_input("rows (tables without a fixed count)", min_value=1, max_value=10_000_000, value=200,
                        key="gen_n")
    seed = c2.number_input("seed", value=int(spec.seed), key="gen_seed")
    out_text = c3.text_input("output folder (under datasets/)", value=spec.name, key=f"gen_out::{spec.name}")
    c4, c5 = st.columns(2)
    resume = c4.checkbox("resume an interrupted run", key="gen_resume")
    overwrite = c5.checkbox("overwrite an existing dataset", key="gen_overwrite")
    if st.button("Generate", type="primary", key="generate"):
        out = ws.resolve(out_text, base="datasets")
        bar = st.progress(0.0, text="starting")
        totals: dict[str, int] = {}
        done: dict[str, int] = {}

        def on_table(table: str, total: int) -> None:
            totals[table] = total
            done.setdefault(table, 0)

        def on_rows(table: str, rows: int) -> None:
            done[table] = done.get(table, 0) + rows
            frac = sum(min(done[t], totals.get(t, 1)) for t in done) / max(1, sum(totals.values()))
            bar.progress(min(1.0, frac), text=f"{table}: {done[table]:,} / {totals.get(table, 0):,} rows")

        manifest = generate_dataset(spec, int(n), out, seed=int(seed), resume=resume, overwrite=overwrite,
                                    progress=Progress(on_table=on_table, on_rows=on_rows))
        bar.progress(1.0, text="done")
        report = report_for_dir(out)
        st.session_state["_generated"] = str(out)
        rows = ", ".join(f"{t}: {m['rows']:,}" for t, m in manifest["tables"].items())
        st.success(f"wrote `{ws.rel(out)}` ({rows}) in {manifest.get('seconds', 0)} s")
        _relations(report)


def generated_datasets(ws: Workspace) -> list[Path]:
    return [p for p in ws.files("datasets", "*") if p.is_dir() and (p / "manifest.json").exists()]


def _browse(ws: Workspace) -> None:
    from generators.writer import read_quarantine, read_table

    st.subheader("Browse a generated dataset")
    outs = generated_datasets(ws)
    if not outs:
        st.info("No generated dataset yet.")
        return
    names = [ws.rel(p) for p in outs]
    last = st.session_state.get("_generated")
    idx = names.index(ws.rel(Path(last))) if last and ws.rel(Path(last)) in names else 0
    c1, c2 = st.columns(2)
    choice = c1.selectbox("dataset", names, index=idx, key="browse_dataset")
    out = ws.resolve(choice, must_exist=True)
    tables = sorted(p.name for p in out.iterdir() if p.is_dir() and not p.name.startswith("_"))
    table = c2.selectbox("table", tables, key="browse_table")
    frame = read_table(out, table)
    where = st.text_input("filter (SQL condition, e.g. `priority = 'urgent' AND estimate_hours > 2`)",
                          key="browse_filter")
    if where.strip():
        try:
            frame = pl.SQLContext(frame=frame).execute(f"SELECT * FROM frame WHERE {where}", eager=True)
        except Exception as exc:  # noqa: BLE001 - a bad filter is the user's typo: say so, keep the page
            st.error(f"filter not understood: {exc}")
    st.caption(f"{frame.height:,} rows · task dataset path for rewards/training: `{ws.rel(out / table)}`")
    st.dataframe(frame.head(1000).to_pandas(), hide_index=True, width="stretch")
    q = read_quarantine(out, table)
    with st.expander(f"quarantine: {q.height} row(s)", expanded=bool(q.height)):
        if q.height:
            st.dataframe(q.to_pandas(), hide_index=True, width="stretch")
        else:
            st.caption("nothing quarantined")


if __name__ == "__main__":
    run_page(TITLE, render)
