"""The studio end to end in a real browser: a real server on 127.0.0.1, headless Debian chromium driven by
Playwright, across the core flow (preview a spec, generate, run a reward on samples, audit it, label a few rows,
start a tiny training run and see its curve). Screenshots go to tmp (and to docs/screenshots/ with RLVR_UPDATE_SCREENSHOTS=1); the server is
stopped by its PID."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from studio_server import SCREENSHOTS, studio_server

from studio.runs import RunManager
from studio.workspace import Workspace

REWARD = "tagged_answer_shaped"


def _settle(page) -> None:
    """Wait for the script rerun a widget change started to finish (the status widget disappears)."""
    page.wait_for_timeout(300)
    page.get_by_test_id("stStatusWidget").wait_for(state="hidden", timeout=120_000)


def _select(page, label: str, option: str) -> None:
    _settle(page)
    box = page.get_by_test_id("stSelectbox").filter(has=page.get_by_text(label, exact=True)).first
    for attempt in range(3):  # the options may still be the previous rerun's: reopen until ours is there
        box.click()
        try:
            page.get_by_role("option", name=option, exact=True).click(timeout=10_000)
            break
        except Exception:
            if attempt == 2:
                raise
            page.keyboard.press("Escape")
            _settle(page)
    _settle(page)


def _number(page, label: str, value: int) -> None:
    field = page.get_by_role("spinbutton", name=label)
    field.fill(str(value))
    field.press("Enter")
    _settle(page)


def _shot(page, name: str, tmp_dir: Path, max_h: int = 2600) -> None:
    """The whole page (Streamlit scrolls inside its main block, so grow the viewport to fit it)."""
    h = page.evaluate("() => { const m = document.querySelector('[data-testid=\"stMain\"]');"
                      " return m ? m.scrollHeight : 1000; }")
    page.set_viewport_size({"width": 1400, "height": max(1000, min(int(h) + 40, max_h))})
    page.wait_for_timeout(800)
    page.screenshot(path=str(tmp_dir / f"{name}.png"))
    if os.environ.get("RLVR_UPDATE_SCREENSHOTS") == "1":  # refresh the README's images on purpose, not every run
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copy2(tmp_dir / f"{name}.png", SCREENSHOTS / f"{name}.png")
    page.set_viewport_size({"width": 1400, "height": 1000})


def _goto(page, title: str) -> None:
    page.get_by_test_id("stSidebarNav").get_by_role("link", name=title).click()
    page.get_by_role("heading", name=title, exact=True).wait_for()


def test_core_flow_in_the_browser(tmp_path, monkeypatch, browser_page):
    t0 = time.time()
    home = tmp_path / "home"
    home.mkdir()
    real_models = Path(os.environ.get("RLVR_HOME", Path.home() / ".cache" / "rlvr-studio")).expanduser() / "models"
    real_models.mkdir(parents=True, exist_ok=True)  # the embedded model's cache is shared (built once if missing);
    (home / "models").symlink_to(real_models)  # everything else (registry, version log) is private to the test
    monkeypatch.setenv("RLVR_HOME", str(home))
    ws = Workspace.open(tmp_path / "ws")
    shots = tmp_path / "screenshots"
    shots.mkdir()
    page = browser_page
    with studio_server(ws.root, tmp_path / "server.log") as (url, proc):
        assert url.startswith("http://127.0.0.1:")
        page.goto(url)
        page.get_by_role("heading", name="Datasets", exact=True).wait_for()

        # 1. a spec: preview rows, the per-column profile and the relations, then generate
        _select(page, "spec", "(new spec)")
        page.get_by_text("valid spec tiny_math").wait_for()
        page.get_by_role("button", name="Preview").click()
        page.get_by_text("relations: 3 of 3 hold").first.wait_for()
        page.get_by_text("tasks: per-column profile").wait_for()
        _shot(page, "datasets_preview", shots)
        page.get_by_role("tab", name="Generate").click()
        _settle(page)
        page.get_by_role("button", name="Generate").click()
        page.get_by_text("wrote datasets/tiny_math").wait_for()
        assert (ws.root / "datasets" / "tiny_math" / "manifest.json").exists()

        # 2. the reward on sample completions (right, wrong, untagged, hedged), scored in the sandbox
        from generators.task_io import read_tasks

        tasks = read_tasks(ws.root / "datasets" / "tiny_math" / "tasks")[:6]
        forms = ["<answer>{a}</answer>", "The sum is {a}.", "<answer>{w}</answer>", "I think <answer>{a}</answer>",
                 "<answer>{a} or {w}</answer>", "<answer>{w}</answer> no wait <answer>{a}</answer>"]
        (ws.root / "completions" / "tiny_math_samples.jsonl").write_text("".join(
            json.dumps({"id": t.id, "completion": f.format(a=t.answer, w=int(t.answer) + 1)}) + "\n"
            for t, f in zip(tasks, forms)))
        _goto(page, "Rewards")
        _select(page, "reward file", "rewards/arithmetic_reward.py")
        _select(page, "reward function", REWARD)
        _select(page, "dataset", "datasets/tiny_math/tasks")
        _select(page, "completions", "completions file")
        _select(page, "completions file", "completions/tiny_math_samples.jsonl")
        page.get_by_role("button", name="Score").click()
        page.get_by_text("mean score").wait_for()
        _shot(page, "rewards_scored", shots)

        # 3. audit it with a few model samples, look at the plots, label three rows
        _goto(page, "Audit")
        _select(page, "reward file", "rewards/arithmetic_reward.py")
        _select(page, "function", REWARD)
        _select(page, "dataset", "datasets/tiny_math/tasks")
        _number(page, "model samples to inspect", 4)
        _number(page, "dataset rows probed", 60)
        page.get_by_role("button", name="Run audit").click()
        page.get_by_text("audit pass").wait_for(timeout=150_000)
        _settle(page)
        page.get_by_role("tab", name="Plots").click()
        _settle(page)
        page.get_by_text("dominance margin").wait_for()
        page.wait_for_timeout(1500)
        _shot(page, "audit_plots", shots)
        page.get_by_role("tab", name="Inspect & label").click()
        _settle(page)
        page.get_by_text("labels persist in").wait_for()
        grid = page.get_by_test_id("stDataFrame").filter(has_text="your label").first
        grid.wait_for()
        for row, label in enumerate(["fail", "pass", "fail"]):
            grid.scroll_into_view_if_needed()
            box = grid.bounding_box()  # again each time: a rerun may move the table
            page.mouse.dblclick(box["x"] + 30, box["y"] + 35 + 35 * row + 17)  # the "your label" column
            page.wait_for_timeout(400)
            page.keyboard.type(label)
            page.wait_for_timeout(200)
            page.keyboard.press("Enter")
            _settle(page)
            page.get_by_text(f"{row + 1} / 4").wait_for(timeout=30_000)
        try:
            page.get_by_text("3 / 4").wait_for(timeout=20_000)
        except Exception:
            page.screenshot(path="/tmp/e2e_fail.png")
            raise
        _shot(page, "audit_labels", shots)
        import polars as pl

        table = next((ws.root / "labels").glob("*.parquet"))
        assert pl.read_parquet(table)["label"].to_list()[:3] == ["fail", "pass", "fail"]  # labels persisted
        audit = next(p for p in (ws.root / "audits").glob("*.json") if not p.name.endswith(".meta.json"))
        assert json.loads(audit.read_text())["verdict"] == "pass"

        # 4. a tiny training run from the validated dataset and the audited reward, and its live curve
        _goto(page, "Training")
        _select(page, "dataset", "datasets/tiny_math/tasks")
        _select(page, "reward file", "rewards/arithmetic_reward.py")
        _select(page, "function", REWARD)
        page.get_by_text("verdict pass").wait_for()
        _select(page, "config template", "configs/tiny.yaml")
        _number(page, "steps", 4)
        page.get_by_role("button", name="Start run").click()
        page.get_by_text("started run").wait_for()
        page.get_by_text("completion length").first.wait_for(timeout=120_000)  # the first step's curves
        runs = RunManager(ws.dir("runs"))
        run = runs.list()[0]
        deadline = time.time() + 120
        while runs.status(run.record.run_id).state == "running" and time.time() < deadline:
            time.sleep(1)
        assert runs.status(run.record.run_id).state == "finished", runs.log_tail(run.record.run_id)
        page.reload()  # a reload is a new session: the run and its curves are found again from disk
        page.get_by_role("heading", name="Training", exact=True).wait_for()
        page.get_by_text("finished").first.wait_for(timeout=30_000)
        page.get_by_text("completion length").first.wait_for()
        _settle(page)
        page.wait_for_timeout(1500)
        _shot(page, "training_curves", shots)
        assert not run.record.allow_unaudited
        assert proc.poll() is None  # the server is still up: it is stopped by PID when the block ends
    assert proc.poll() is not None
    assert time.time() - t0 < 300, f"the browser flow took {time.time() - t0:.0f} s"
