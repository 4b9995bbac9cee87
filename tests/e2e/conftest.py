"""Fixtures of the browser test: a headless Debian chromium page (see studio_server.py for the server)."""

from __future__ import annotations

from pathlib import Path

import pytest

from studio_server import CHROMIUM, CHROMIUM_ARGS


@pytest.fixture()
def browser_page():
    """A headless Debian chromium page driven by Playwright (the system executable; no `playwright install`)."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run `bash scripts/setup.sh --browser` (make test does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        page.set_default_timeout(60_000)
        try:
            yield page
        finally:
            context.close()
            browser.close()
