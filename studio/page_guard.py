"""Run a page so that a crash shows an error panel, never a blank app.

Why: a page calls library code on user input (a spec, a reward file, a dataset); when that raises, the person must
see what failed and where, and the rest of the studio (navigation, other pages) must keep working. Streamlit's own
control-flow exceptions (rerun, stop) derive from BaseException and pass through untouched.
"""

from __future__ import annotations

import traceback
from typing import Callable

import streamlit as st

from studio.workspace import Workspace, WorkspacePathError


def error_panel(where: str, exc: BaseException) -> None:
    """A visible, self-explaining panel for an exception raised while rendering `where`."""
    st.error(f"**{where} crashed:** {type(exc).__name__}: {exc}", icon=":material/error:")
    with st.expander("traceback", expanded=False):
        st.code("".join(traceback.format_exception(exc)), language="text")
    st.caption("The rest of the studio still works: pick another page in the sidebar, or fix the input and rerun.")


def run_page(title: str, render: Callable[[Workspace], None]) -> None:
    """Open the workspace, render the page, and turn any exception into an error panel."""
    try:
        ws = workspace()
    except Exception as exc:  # noqa: BLE001 - shown in the panel
        error_panel("opening the workspace", exc)
        return
    try:
        render(ws)
    except WorkspacePathError as exc:
        st.error(f"Path refused: {exc}", icon=":material/block:")
    except Exception as exc:  # noqa: BLE001 - the whole point: show it, keep the app alive
        error_panel(f"The {title} page", exc)


def workspace() -> Workspace:
    """The studio workspace (cached per session: opening it copies the examples in once)."""
    if "_workspace" not in st.session_state:
        st.session_state["_workspace"] = Workspace.open()
    return st.session_state["_workspace"]


def path_input(ws: Workspace, label: str, value: str, *, base: str | None = None, must_exist: bool = False,
               key: str | None = None, help: str | None = None):
    """A text box for a path inside the workspace; returns the resolved path or None with the refusal shown."""
    from studio.workspace import WorkspacePathError as _E

    text = st.text_input(label, value=value, key=key, help=help or f"relative to {ws.root / (base or '')}")
    try:
        return ws.resolve(text, base=base, must_exist=must_exist)
    except _E as exc:
        st.error(f"Path refused: {exc}", icon=":material/block:")
        return None
