"""The studio shell: navigation over every page, and a crashing page shows an error panel, not a blank app."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from studio.app import PAGES


@pytest.fixture(autouse=True)
def _workspace(tmp_path, monkeypatch):
    monkeypatch.setenv("RLVR_STUDIO_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.setenv("RLVR_HOME", str(tmp_path / "home"))


def test_every_page_opens_from_the_navigation():
    at = AppTest.from_file("../studio/app.py", default_timeout=60).run()
    assert not at.exception
    assert [t.value for t in at.title] == ["Datasets"]  # the default page
    for path, title, _icon, _url in PAGES:
        at.switch_page(path).run()
        assert not at.exception, (path, at.exception)
        assert title in [t.value for t in at.title], path
        assert not [e for e in at.error if "crashed" in e.value], path


def _crashing_app():
    from studio.page_guard import run_page

    def render(ws):
        import streamlit as st

        st.title("Before the crash")
        raise ZeroDivisionError("the page's own bug")

    run_page("Crashy", render)
    import streamlit as st

    st.write("still alive after the crash")


def test_a_crashing_page_shows_an_error_panel():
    at = AppTest.from_function(_crashing_app, default_timeout=30).run()
    assert not at.exception  # not Streamlit's raw exception: our panel
    errors = [e.value for e in at.error]
    assert any("Crashy page crashed" in e and "ZeroDivisionError" in e for e in errors), errors
    assert any("ZeroDivisionError" in c.value for c in at.code)  # the traceback, in an expander
    assert "still alive after the crash" in [m.value for m in at.markdown]


def _traversal_app():
    from studio.page_guard import run_page

    def render(ws):
        ws.resolve("../../etc/passwd")

    run_page("Paths", render)


def test_a_refused_path_is_a_message_not_a_crash():
    at = AppTest.from_function(_traversal_app, default_timeout=30).run()
    assert not at.exception
    assert any("Path refused" in e.value and "outside the studio workspace" in e.value for e in at.error)
