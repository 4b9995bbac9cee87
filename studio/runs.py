"""Background runs (training, SFT) started from the studio: processes that outlive the page that started them.

Why processes and files rather than threads and session state: a Streamlit script reruns on every click and a
browser reload drops the session, but a training run must go on, be found again and be stoppable. So a run is a
subprocess in its own process group, running the same `rlvr` CLI a user would type, and everything about it lives
in its folder under `runs/`: `run.json` (what was started, with which options and overrides), `pid` (the supervisor's
pid and its start time, so a recycled pid is never mistaken for the run), `log.txt`, and `exit.json` written by the
supervisor when the command ends. Stop = SIGTERM to the group, wait, SIGKILL only after a grace period.

`python -m studio.runs supervise EXIT_FILE -- CMD...` is the supervisor: it runs CMD, forwards SIGTERM/SIGINT to
it and records the exit code, so "finished", "failed" and "stopped" can be told apart after the fact.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Literal

import psutil
from pydantic import BaseModel, Field

RunState = Literal["running", "finished", "failed", "stopped", "lost"]


class RunRecord(BaseModel):
    """What was started; written once when the run starts (the override of an unaudited reward is recorded here)."""

    run_id: str
    kind: str
    name: str = ""
    command: list[str]
    config_path: str | None = None
    output_dir: str | None = None
    started_at: float
    allow_unaudited: bool = False
    notes: dict[str, Any] = Field(default_factory=dict)


class RunStatus(BaseModel):
    record: RunRecord
    state: RunState
    pid: int | None = None
    returncode: int | None = None
    ended_at: float | None = None
    stop_requested: bool = False


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str))
    os.replace(tmp, path)


class RunManager:
    """All runs under one folder (the workspace's `runs/`)."""

    def __init__(self, runs_dir: str | Path):
        self.dir = Path(runs_dir)
        self.dir.mkdir(parents=True, exist_ok=True)

    # --------------------------------------------------------------------------------------------- start
    def start(self, kind: str, command: list[str], *, name: str = "", config_path: str | Path | None = None,
              output_dir: str | Path | None = None, allow_unaudited: bool = False,
              notes: dict[str, Any] | None = None, env: dict[str, str] | None = None,
              run_id: str | None = None) -> RunStatus:
        """Start `command` in the background under the supervisor; returns at once."""
        run_id = run_id or f"{time.strftime('%Y%m%d-%H%M%S')}-{kind}-{uuid.uuid4().hex[:6]}"
        run_dir = self.dir / run_id
        run_dir.mkdir(parents=True, exist_ok=True)
        if (run_dir / "run.json").exists():
            raise FileExistsError(f"run {run_id!r} already exists in {self.dir}")
        record = RunRecord(run_id=run_id, kind=kind, name=name or run_id, command=list(command),
                           config_path=str(config_path) if config_path else None,
                           output_dir=str(output_dir) if output_dir else None, started_at=time.time(),
                           allow_unaudited=allow_unaudited, notes=notes or {})
        _write_json(run_dir / "run.json", record.model_dump(mode="json"))
        full_env = {**os.environ, **(env or {})}
        full_env.setdefault("RLVR_THREADS", "1")
        full_env["PYTHONUNBUFFERED"] = "1"
        with open(run_dir / "log.txt", "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "studio.runs", "supervise", str(run_dir / "exit.json"), "--", *command],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=run_dir,
                start_new_session=True, env=full_env,
            )
        try:
            ctime = psutil.Process(proc.pid).create_time()
        except psutil.Error:
            ctime = None
        _write_json(run_dir / "pid", {"pid": proc.pid, "create_time": ctime})
        return self.status(run_id)

    # -------------------------------------------------------------------------------------------- inspect
    def run_dir(self, run_id: str) -> Path:
        d = (self.dir / run_id).resolve()
        if d.parent != self.dir.resolve() or not (d / "run.json").is_file():
            raise KeyError(f"no run {run_id!r} under {self.dir}")
        return d

    def list(self) -> list[RunStatus]:
        """Every run, newest first."""
        out = []
        for d in self.dir.iterdir():
            if (d / "run.json").is_file():
                try:
                    out.append(self.status(d.name))
                except (OSError, ValueError):
                    continue
        return sorted(out, key=lambda s: s.record.started_at, reverse=True)

    def status(self, run_id: str) -> RunStatus:
        d = self.run_dir(run_id)
        record = RunRecord.model_validate_json((d / "run.json").read_text())
        pid_info = _read_json(d / "pid") or {}
        pid = pid_info.get("pid")
        exit_info = _read_json(d / "exit.json")
        stop_requested = (d / "stop_requested").exists()
        alive = pid is not None and _alive(pid, pid_info.get("create_time"))
        if alive:
            return RunStatus(record=record, state="running", pid=pid, stop_requested=stop_requested)
        if exit_info is not None:
            rc = exit_info.get("returncode")
            state: RunState = "finished" if rc == 0 else ("stopped" if stop_requested else "failed")
            return RunStatus(record=record, state=state, pid=pid, returncode=rc, ended_at=exit_info.get("ended_at"),
                             stop_requested=stop_requested)
        return RunStatus(record=record, state="stopped" if stop_requested else "lost", pid=pid,
                         stop_requested=stop_requested)

    def log_tail(self, run_id: str, max_chars: int = 4000) -> str:
        path = self.run_dir(run_id) / "log.txt"
        if not path.exists():
            return ""
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_chars))
            return f.read().decode("utf-8", errors="replace")

    # ----------------------------------------------------------------------------------------------- stop
    def stop(self, run_id: str, *, grace_s: float = 20.0) -> RunStatus:
        """SIGTERM the run's process group, wait up to `grace_s` for it to end, then SIGKILL what is left."""
        d = self.run_dir(run_id)
        (d / "stop_requested").write_text(str(time.time()))
        pid_info = _read_json(d / "pid") or {}
        pid = pid_info.get("pid")
        if pid is None or not _alive(pid, pid_info.get("create_time")):
            return self.status(run_id)
        _signal_group(pid, signal.SIGTERM)
        deadline = time.time() + grace_s
        while time.time() < deadline and _alive(pid, pid_info.get("create_time")):
            time.sleep(0.1)
        if _alive(pid, pid_info.get("create_time")):
            _signal_group(pid, signal.SIGKILL)
            t_kill = time.time() + 5
            while time.time() < t_kill and _alive(pid, pid_info.get("create_time")):
                time.sleep(0.05)
        if not (d / "exit.json").exists():
            _write_json(d / "exit.json", {"returncode": -signal.SIGKILL, "ended_at": time.time(), "killed": True})
        return self.status(run_id)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _alive(pid: int, create_time: float | None) -> bool:
    """True while the process with this pid is the one we started (same start time) and not a zombie.

    A finished child of this process is reaped here, so it does not linger as a zombie in the server.
    """
    try:
        os.waitpid(pid, os.WNOHANG)
    except (ChildProcessError, OSError):
        pass
    try:
        proc = psutil.Process(pid)
        if create_time is not None and abs(proc.create_time() - create_time) > 1e-3:
            return False
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(os.getpgid(pid), sig)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


# ------------------------------------------------------------------------------------------------ metrics
def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The per-step records of a metrics JSONL file that a running trainer is appending to.

    A last line still being written (no newline yet, or not valid JSON) is skipped, never an error.
    """
    path = Path(path)
    if not path.is_file():
        return []
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.endswith("\n"):
                break
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                out.append(rec)
    return out


def find_metrics_file(output_dir: str | Path | None) -> Path | None:
    """The trainer's metrics JSONL inside a run's output folder (`metrics.jsonl`, else any `*metrics*.jsonl`)."""
    if not output_dir:
        return None
    d = Path(output_dir)
    if (d / "metrics.jsonl").is_file():
        return d / "metrics.jsonl"
    found = sorted(d.glob("**/*metrics*.jsonl"), key=lambda p: p.stat().st_mtime, reverse=True)
    return found[0] if found else None


# --------------------------------------------------------------------------------------------- supervisor
def _supervise(exit_file: Path, command: list[str]) -> int:
    child = subprocess.Popen(command)

    def forward(signum, _frame):
        try:
            child.send_signal(signum)
        except ProcessLookupError:
            pass

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    rc = child.wait()
    _write_json(exit_file, {"returncode": rc, "ended_at": time.time()})
    return rc


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 4 or argv[0] != "supervise" or argv[2] != "--":
        print("usage: python -m studio.runs supervise EXIT_FILE -- COMMAND...", file=sys.stderr)
        return 2
    return _supervise(Path(argv[1]), argv[3:])


if __name__ == "__main__":
    sys.exit(main())
