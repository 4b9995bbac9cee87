"""Rewards: write or pick a reward, run it on sample completions (score, components, reason per row), build a
shaped reward from a binary verifier with dominance shown live, and see version history with diffs.

Scoring goes through `rewards.scoring.score_batch` with the sandbox on (user code never runs in the studio's own
process for scoring); versions are the rewards library's content hashes in its version log.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

import polars as pl
import streamlit as st

from studio.page_guard import run_page
from studio.pickers import function_names, load_rows, mtime_of, pick_source_file, save_source_file, task_tables
from studio.workspace import Workspace

TITLE = "Rewards"
NEW_FILE = "(new reward file)"
STARTER = '''"""My reward: 1 when the last <answer> tag holds the reference answer, else 0."""

import re

from schemas.rewards import RewardResult

TAG = re.compile(r"<answer>\\s*(.*?)\\s*</answer>", re.S)


def reward(completion: str, answer: str | None = None, **_) -> RewardResult:
    found = TAG.findall(completion)
    if not found:
        return RewardResult(score=0.0, passed=False, reason="no <answer> tag")
    ok = answer is not None and found[-1].strip() == str(answer).strip()
    return RewardResult(score=1.0 if ok else 0.0, passed=ok, components={"correct": float(ok)},
                        reason="correct" if ok else f"answered {found[-1]!r}")
'''


def prompt_of(row: dict[str, Any]) -> str:
    prompt = row.get("prompt")
    if isinstance(prompt, list):
        return "\n".join(str(m.get("content", "")) for m in prompt if isinstance(m, dict))
    return str(prompt or "")


def render(ws: Workspace) -> None:
    st.title("Rewards")
    spec = _editor(ws)
    if spec is None:
        return
    tab_run, tab_shape, tab_versions = st.tabs(["Run on samples", "Shape", "Versions"], key="reward_tabs")
    with tab_run:
        _run_on_samples(ws, spec)
    with tab_shape:
        _shaping(ws, spec)
    with tab_versions:
        _versions(spec)


def _editor(ws: Workspace) -> str | None:
    c1, c2 = st.columns([3, 1])
    choice, text0, save_name = pick_source_file(
        ws, "rewards", ("*.py",), label="reward file", new_label=NEW_FILE, starter=STARTER,
        new_name="rewards/my_reward.py", key="reward_file", column=c1)
    code = st.text_area("reward code (Python)", value=text0, height=300, key=f"reward_code::{choice}")
    try:
        compile(code, save_name, "exec")
    except SyntaxError as exc:
        st.error(f"line {exc.lineno}: {exc.msg}")
        return None
    save_to = c2.text_input("save as", value=save_name, key=f"reward_save_as::{choice}")
    label = c2.text_input("version label", value="", key="reward_label")
    if c2.button("Save reward", key="save_reward"):
        target = ws.resolve(save_to)
        if target.suffix != ".py" or not target.is_relative_to(ws.dir("rewards")):
            st.error("reward files are saved as rewards/<name>.py")
            return None
        save_source_file(target, code)
        st.success(f"saved `{ws.rel(target)}`")
        choice = ws.rel(target)
    if choice == NEW_FILE:
        st.info("Save the file to run it.")
        return None
    path = ws.resolve(choice, must_exist=True)
    fns = function_names(path)
    if not fns:
        st.warning("this file defines no public function")
        return None
    fn = st.selectbox("reward function", fns, key=f"reward_fn::{choice}")
    spec = f"{path}:{fn}"
    if st.session_state.get("save_reward"):
        _record_version(spec, label)
    st.caption(f"reward spec: `{ws.rel(path)}:{fn}` (what `rlvr reward test`, `rlvr audit` and training configs take)")
    return spec


RECORD_VERSION = """
import sys
from rewards.loading import load_reward
from rewards.registry import VersionLog
reward = load_reward(sys.argv[1], label=sys.argv[2])
VersionLog().record(reward)
print(reward.version_id)
"""


def record_version(spec: str, label: str = "") -> tuple[str | None, str]:
    """Record the reward's version in the rewards library's version log, from a short-lived subprocess.

    Why a subprocess: computing the version imports the user's file, and user code never runs inside the studio
    server (an import that hangs or crashes must not take the server with it). Returns (version id, error text).
    """
    import subprocess
    import sys

    try:
        done = subprocess.run([sys.executable, "-c", RECORD_VERSION, spec, label], capture_output=True, text=True,
                              timeout=60)
    except subprocess.TimeoutExpired:
        return None, "loading the reward file took over 60 s (does it do work at import time?)"
    if done.returncode != 0:
        return None, (done.stderr.strip().splitlines() or ["failed"])[-1]
    return done.stdout.strip().splitlines()[-1], ""


def _record_version(spec: str, label: str) -> None:
    version, error = record_version(spec, label)
    if error:
        st.error(f"cannot load the reward: {error}")
    else:
        st.caption(f"version {version}" + (f" ({label})" if label else ""))


def _run_on_samples(ws: Workspace, spec: str) -> None:
    from rewards.scoring import score_batch

    tables = task_tables(ws)
    if not tables:
        st.info("No task dataset in the workspace: generate one on the Datasets page.")
        return
    c1, c2, c3 = st.columns([2, 1, 1])
    data = c1.selectbox("dataset", [ws.rel(p) for p in tables], key="rw_dataset")
    n = c2.number_input("rows", min_value=1, max_value=500, value=8, key="rw_n")
    source = c3.selectbox("completions", ["reference answers", "embedded model", "completions file"],
                          key="rw_source")
    path = ws.resolve(data, must_exist=True)
    rows = load_rows(str(path), mtime_of(path))[: int(n)]
    completions: list[str] | None = None
    comp_file = None
    if source == "completions file":
        files = ws.files("completions", "*.jsonl")
        if not files:
            st.info('No completions file: put a JSONL of {"id", "completion"} in the workspace\'s completions/.')
            return
        comp_file = ws.resolve(st.selectbox("completions file", [ws.rel(p) for p in files], key="rw_comp_file"))
    if st.button("Score", type="primary", key="score"):
        if source == "reference answers":
            completions = [str(r.get("answer") or "") for r in rows]
        elif source == "embedded model":
            from studio.model_samples import model_completions

            completions = model_completions(rows, max_new_tokens=48, temperature=0.7, seed=0)
        else:
            by_id = {}
            for line in comp_file.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    rec = json.loads(line)
                    by_id[str(rec["id"])] = str(rec["completion"])
            rows = [r for r in rows if str(r.get("id")) in by_id] or [r for r in load_rows(str(path), mtime_of(path))
                                                                     if str(r.get("id")) in by_id]
            completions = [by_id[str(r["id"])] for r in rows]
            if not rows:
                st.error(f"no id of {ws.rel(comp_file)} is in the dataset")
                return
        bar = st.progress(0.0, text="scoring in the sandbox")
        done = [0]

        def tick(k: int) -> None:
            done[0] += k
            bar.progress(min(1.0, done[0] / max(1, len(rows))), text=f"scored {done[0]}/{len(rows)}")

        results = score_batch(spec, completions, rows, sandbox=True, progress=tick)
        record_version(spec)  # every scoring run is recorded, as `rlvr reward test` does
        st.session_state["_reward_results"] = (spec, rows, completions, results)
    got = st.session_state.get("_reward_results")
    if not got or got[0] != spec:
        st.caption("Score the reward on reference answers, the embedded model's samples or a completions file.")
        return
    _, rows, completions, results = got
    frame = pl.DataFrame([{
        "id": str(r.get("id")), "completion": c, "score": res.score, "passed": res.passed,
        "components": json.dumps(res.components), "reason": res.reason, "error": res.error,
    } for r, c, res in zip(rows, completions, results)])
    scored = [r for r in results if r.error is None and r.score is not None]
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("samples", len(results))
    m2.metric("pass rate", f"{sum(bool(r.passed) for r in scored) / max(1, len(results)):.0%}")
    m3.metric("mean score", f"{sum(r.score for r in scored) / len(scored):.3f}" if scored else "-")
    m4.metric("errors", len(results) - len(scored))
    if len(results) - len(scored):
        st.error(f"{len(results) - len(scored)} sample(s) errored: the reward raised, timed out or returned a "
                 "non-finite score (see the error column); these are errors, not zeros")
    st.dataframe(frame.to_pandas(), hide_index=True, width="stretch")
    if scored:
        hist = pl.DataFrame({"score": [round(r.score, 2) for r in scored]}).group_by("score").len("samples")
        st.bar_chart(hist.sort("score").to_pandas(), x="score", y="samples", height=200)


def _shaping(ws: Workspace, spec: str) -> None:
    try:
        import rewards.shaping as shaping  # noqa: F401
    except ImportError:
        st.info("Shaped rewards arrive with `rewards.shaping` (the rewards library); not installed in this build.")
        return
    from studio.shaping_panel import render_shaping

    render_shaping(ws, spec)


def _versions(spec: str) -> None:
    from rewards.registry import VersionLog

    name = spec.rsplit(":", 1)[1]
    log = VersionLog()
    versions = [v for v in log.versions(name) if (v.get("ref") or "").startswith(spec.rsplit(":", 1)[0])] \
        or log.versions(name)
    if not versions:
        st.info("No recorded version yet: saving or scoring the reward records one (so does `rlvr reward test`).")
        return
    st.dataframe(pl.DataFrame([{"hash": v["content_hash"][:12], "label": v["label"], "ref": v["ref"],
                                "first seen": v["first_seen"]} for v in versions]).to_pandas(),
                 hide_index=True, width="stretch")
    if len(versions) >= 2:
        hashes = [v["content_hash"][:12] for v in versions]
        c1, c2 = st.columns(2)
        a = c1.selectbox("from version", hashes, index=len(hashes) - 2, key="ver_a")
        b = c2.selectbox("to version", hashes, index=len(hashes) - 1, key="ver_b")
        src_a = log.source(name, a) or ""
        src_b = log.source(name, b) or ""
        diff = "".join(difflib.unified_diff(src_a.splitlines(True), src_b.splitlines(True), f"{name}@{a}",
                                            f"{name}@{b}"))
        st.code(diff or "(no difference in the reward's code)", language="diff")


if __name__ == "__main__":
    run_page(TITLE, render)
