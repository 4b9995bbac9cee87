"""Background runs: a real subprocess under the supervisor, found again by a fresh manager, stopped cleanly."""

from __future__ import annotations

import json
import sys
import time

import pytest

from studio.runs import RunManager, find_metrics_file, read_metrics

WRITER = """
import json, sys, time, pathlib
out = pathlib.Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
steps = int(sys.argv[2])
with open(out / "metrics.jsonl", "a") as f:
    for i in range(1, steps + 1):
        f.write(json.dumps({"step": i, "reward": i / steps}) + "\\n"); f.flush()
        time.sleep(0.05)
"""


def _wait(manager, run_id, states, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        s = manager.status(run_id)
        if s.state in states:
            return s
        time.sleep(0.05)
    pytest.fail(f"run {run_id} still {manager.status(run_id).state}")


def test_run_finishes_and_metrics_are_read(tmp_path):
    m = RunManager(tmp_path / "runs")
    out = tmp_path / "out"
    s = m.start("train", [sys.executable, "-c", WRITER, str(out), "5"], output_dir=out, allow_unaudited=True)
    assert s.state in ("running", "finished")
    done = _wait(m, s.record.run_id, {"finished"})
    assert done.returncode == 0
    rows = read_metrics(find_metrics_file(out))
    assert [r["step"] for r in rows] == [1, 2, 3, 4, 5]
    # a fresh manager (a page reload, a new server) finds the same run and its recorded override
    again = RunManager(tmp_path / "runs").list()
    assert [r.record.run_id for r in again] == [s.record.run_id]
    assert again[0].record.allow_unaudited is True


def test_failed_run_is_failed_not_finished(tmp_path):
    m = RunManager(tmp_path / "runs")
    s = m.start("train", [sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"])
    done = _wait(m, s.record.run_id, {"failed"})
    assert done.returncode == 3
    assert "boom" in m.log_tail(s.record.run_id)


def test_stop_terminates_the_process_group(tmp_path):
    m = RunManager(tmp_path / "runs")
    s = m.start("train", [sys.executable, "-c", "import time; time.sleep(600)"])
    _wait(m, s.record.run_id, {"running"})
    t0 = time.time()
    stopped = m.stop(s.record.run_id, grace_s=10)
    assert stopped.state == "stopped"
    assert time.time() - t0 < 10
    import psutil

    assert not psutil.pid_exists(stopped.pid) or psutil.Process(stopped.pid).status() == psutil.STATUS_ZOMBIE


def test_partial_last_line_is_skipped(tmp_path):
    p = tmp_path / "metrics.jsonl"
    p.write_text(json.dumps({"step": 1}) + "\n" + '{"step": 2, "rew')
    assert read_metrics(p) == [{"step": 1}]
    assert read_metrics(tmp_path / "missing.jsonl") == []
