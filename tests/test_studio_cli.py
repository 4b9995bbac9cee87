"""`rlvr studio`: serves the app on 127.0.0.1 by default (never all interfaces unless told), with the workspace
given; stopped by its PID."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import psutil

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "e2e"))
from studio_server import free_port, wait_healthy  # noqa: E402


def test_rlvr_studio_binds_loopback_by_default(tmp_path):
    port = free_port()
    env = {**os.environ, "RLVR_HOME": str(tmp_path / "home")}
    proc = subprocess.Popen([sys.executable, "-m", "studio.cli", "studio", "--port", str(port), "--workspace",
                             str(tmp_path / "ws")], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc, 60,  # a running server's pipe would block: read it only once exited
                     lambda: proc.stdout.read().decode() if proc.poll() is not None else "studio did not come up")
        listening = [c.laddr for p in [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
                     for c in p.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
        assert listening and all(a.ip == "127.0.0.1" and a.port == port for a in listening), listening
        assert (tmp_path / "ws" / "datasets").is_dir()  # the workspace it was given, created and seeded
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)


def test_the_server_command_is_headless_and_loopback():
    from studio.commands.studio import streamlit_command

    cmd = streamlit_command("127.0.0.1", 8599)
    assert cmd[cmd.index("--server.address") + 1] == "127.0.0.1"
    assert cmd[cmd.index("--server.headless") + 1] == "true"
    assert cmd[cmd.index("--browser.gatherUsageStats") + 1] == "false"
