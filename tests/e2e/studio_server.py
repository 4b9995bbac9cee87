"""Start and stop a real studio server for the browser test (by PID, never by process name)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, proc: subprocess.Popen, timeout_s: float, output: Callable[[], str]) -> None:
    """Poll the server's health endpoint until it answers 200; raise with its output if it exits or times out."""
    deadline = time.time() + timeout_s
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"studio server exited with {proc.returncode}: {output()}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if time.time() > deadline:
            raise TimeoutError(f"studio server not healthy after {timeout_s}s: {output()}")
        time.sleep(0.3)


@contextmanager
def studio_server(workspace: Path, log_path: Path, timeout_s: float = 90.0) -> Iterator[tuple[str, subprocess.Popen]]:
    """The studio served on 127.0.0.1:<free port> with `workspace`; yields (base URL, process)."""
    from studio.commands.studio import streamlit_command

    port = free_port()
    env = {**os.environ, "RLVR_STUDIO_WORKSPACE": str(workspace), "RLVR_THREADS": "1"}
    log = open(log_path, "wb")
    proc = subprocess.Popen(streamlit_command("127.0.0.1", port), env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, timeout_s, lambda: log_path.read_text()[-2000:])
        yield url, proc
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
        log.close()


SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
