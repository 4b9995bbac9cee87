"""Audit page (being wired to the library as it lands)."""

from __future__ import annotations

import streamlit as st

from studio.page_guard import run_page
from studio.workspace import Workspace

TITLE = "Audit"


def render(ws: Workspace) -> None:
    st.title(TITLE)


if __name__ == "__main__":
    run_page(TITLE, render)
