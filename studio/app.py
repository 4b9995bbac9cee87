"""RLVR Studio, the Streamlit app: `streamlit run studio/app.py` or `rlvr studio`.

One module per page under `studio/pages/`; each defines `render(ws)` and runs itself through
`studio.page_guard.run_page`, so a crash in one page shows an error panel and the navigation keeps working.
The app holds no logic of its own: every button calls the same library function the CLI calls.
"""

from __future__ import annotations

import streamlit as st

PAGES = [
    ("pages/dataset_design.py", "Datasets", ":material/table_chart:", "datasets"),
    ("pages/reward_authoring.py", "Rewards", ":material/rule:", "rewards"),
    ("pages/reward_audit.py", "Audit", ":material/policy:", "audit"),
    ("pages/training_runs.py", "Training", ":material/model_training:", "training"),
    ("pages/evaluation_checkpoints.py", "Evaluation & checkpoints", ":material/leaderboard:", "evaluation"),
    ("pages/failure_triage.py", "Triage", ":material/bug_report:", "triage"),
]


def main() -> None:
    st.set_page_config(page_title="RLVR Studio", page_icon=":material/science:", layout="wide")
    pages = [st.Page(path, title=title, icon=icon, url_path=url, default=(i == 0))
             for i, (path, title, icon, url) in enumerate(PAGES)]
    nav = st.navigation({"RLVR Studio": pages})
    with st.sidebar:
        try:
            from studio.page_guard import workspace

            st.caption(f"workspace: `{workspace().root}`")
        except Exception as exc:  # noqa: BLE001 - the page itself shows the full panel
            st.caption(f"workspace unavailable: {exc}")
        st.caption("spec → dataset → reward → audit → training → eval → triage")
    nav.run()


main()
