"""A persistent pool of sandbox worker processes that scores batches of reward calls.

Why persistent and batched: starting a Python process per call costs ~100 ms; a training step needs a few calls,
an audit or a `reward test` thousands. Workers are started once, each gets chunks of calls in one message, and
answers with one frame per call, so the parent knows at any moment which call a worker is on. The parent waits
with `select` on all workers: a worker silent for longer than the per-call limit (plus a grace period) is
killed with its whole process group and replaced, the call it was on becomes a timeout error result, and the
rest of its chunk is handed out again. A worker that dies (segfault, `os._exit`, the kernel's OOM killer) is
treated the same way, with the exit status as the reason.
"""

from __future__ import annotations

import atexit
import math
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from rewards.protocol import error_result
from rewards.reward import Reward
from rewards.sandbox.framing import FrameBuffer, encode, write_all
from rewards.sandbox.isolation import remove_orphaned_tmpdirs, remove_private_tmpdir
from schemas.rewards import RewardResult


class SandboxError(RuntimeError):
    """The sandbox itself could not run (workers do not start, a reward cannot be sent to them)."""


@dataclass(frozen=True)
class SandboxLimits:
    """Limits for user reward code. `timeout_s` is per call; `memory_mb` caps each worker's address space
    (RLIMIT_AS, so it counts virtual memory: keep it >= 512); `network=False` isolates the workers where the
    platform allows, `filesystem=False` lets them write only in a private TMPDIR, `subprocesses=False` stops them
    starting processes (see `rewards.sandbox.isolation`; `Sandbox.info` says what is in force)."""

    timeout_s: float = 10.0
    memory_mb: int = 2048
    network: bool = False
    filesystem: bool = False
    subprocesses: bool = False
    grace_s: float = 2.0
    load_timeout_s: float = 60.0
    max_consecutive_crashes: int = 16


@dataclass
class SandboxStats:
    calls: int = 0
    errors: int = 0
    timeouts: int = 0
    crashes: int = 0
    restarts: int = 0


def caller_search_path() -> list[str]:
    """Where this process finds modules now: its working directory, then sys.path's existing folders. Workers append
    it after their own entries, so 'module:function' rewards resolve as they would here."""
    return list(dict.fromkeys(p for p in (os.getcwd(), *sys.path) if p and os.path.isdir(p)))


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


class _Worker:
    def __init__(self, limits: SandboxLimits) -> None:
        # -P: no current folder in front of sys.path (a user's `math.py` must not shadow the standard library);
        # the parent's own sys.path entries are appended *after* the worker's, by the worker itself.
        cmd = [sys.executable, "-P", "-m", "rewards.sandbox.worker", "--memory-mb", str(limits.memory_mb)]
        cmd += [f"--{name}" for name in ("network", "filesystem", "subprocesses") if getattr(limits, name)]
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = root
        env["RLVR_SANDBOX_PATH"] = os.pathsep.join(caller_search_path())
        env.update({"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                    "TOKENIZERS_PARALLELISM": "false", "RLVR_SANDBOX": "1", "PYTHONDONTWRITEBYTECODE": "1"})
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                     start_new_session=True, close_fds=True)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.fd_in = self.proc.stdin.fileno()
        self.fd_out = self.proc.stdout.fileno()
        os.set_blocking(self.fd_out, False)
        self.buf = FrameBuffer()
        self.loaded: set[str] = set()
        self.info: dict[str, Any] = {}
        # busy state
        self.chunk_id: int | None = None
        self.pending: deque[int] = deque()
        self.deadline = 0.0

    def read_available(self) -> list[Any] | None:
        """Messages that have arrived; None on EOF."""
        out: list[Any] = []
        while True:
            try:
                data = os.read(self.fd_out, 1 << 16)
            except BlockingIOError:
                return out
            if not data:
                return out if out else None
            out.extend(self.buf.feed(data))

    def wait_hello(self, timeout: float) -> None:
        end = time.monotonic() + timeout
        while not self.info:
            left = end - time.monotonic()
            if left <= 0:
                self.kill()
                raise SandboxError(f"sandbox worker did not start within {timeout:.0f}s")
            ready, _, _ = select.select([self.fd_out], [], [], left)
            if ready:
                msgs = self.read_available()
                if msgs is None:
                    code = self.proc.wait()
                    raise SandboxError(f"sandbox worker failed to start ({_describe_exit(code)}); see stderr above")
                for m in msgs:
                    if m[0] == "hello":
                        self.info = m[1]

    def kill(self) -> int | None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()  # type: ignore[union-attr]
            except OSError:
                pass
        remove_private_tmpdir(self.info.get("writable", ""))
        return code

    def stop(self) -> None:
        try:
            write_all(self.fd_in, encode(("exit",)))
            self.proc.wait(timeout=2)
        except Exception:  # noqa: BLE001 - a worker that does not exit politely is killed
            pass
        self.kill()


class Sandbox:
    """Runs reward calls in worker subprocesses under `limits`. Thread-safe (one batch at a time); use as a
    context manager or call `close()`; `stats` counts calls, errors, timeouts, crashes and worker restarts."""

    _swept = False  # orphaned private TMPDIRs (remove_orphaned_tmpdirs) are removed once per process

    def __init__(self, limits: SandboxLimits | None = None, workers: int | None = None) -> None:
        self.limits = limits or SandboxLimits()
        self.n_workers = max(1, workers or min(4, os.cpu_count() or 1))
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()
        self._chunk_seq = 0
        self.stats = SandboxStats()
        self.closed = False

    # ---- lifecycle
    def start(self) -> "Sandbox":
        with self._lock:
            self._ensure_workers()
        return self

    def _ensure_workers(self) -> None:
        if self.closed:
            raise SandboxError("this sandbox is closed")
        if not Sandbox._swept:
            Sandbox._swept = True
            remove_orphaned_tmpdirs()
        new = [_Worker(self.limits) for _ in range(self.n_workers - len(self._workers))]
        for w in new:
            w.wait_hello(self.limits.load_timeout_s)
        self._workers.extend(new)

    @property
    def info(self) -> dict[str, Any]:
        """What the workers report about their isolation (network method, memory cap)."""
        with self._lock:
            self._ensure_workers()
            info = dict(self._workers[0].info)
        info.pop("pid", None)
        return {**info, "timeout_s": self.limits.timeout_s, "workers": self.n_workers}

    def close(self) -> None:
        with self._lock:
            for w in self._workers:
                w.stop()
            self._workers.clear()
            self.closed = True

    def __enter__(self) -> "Sandbox":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- scoring
    @staticmethod
    def _payload(reward: Reward) -> tuple[str, Any, list[str]]:
        if reward.ref:  # with the caller's path as it is now: the worker may have been started long before
            return ("ref", reward.ref, caller_search_path())
        import cloudpickle

        try:
            return ("pickle", cloudpickle.dumps(reward.fn), caller_search_path())  # by-reference parts import
        except Exception as exc:  # noqa: BLE001
            raise SandboxError(
                f"reward {reward.name} cannot be sent to sandbox workers ({type(exc).__name__}: {exc}); define it in "
                f"a file or module and load it as 'file.py:function' / 'module:function'"
            ) from exc

    def score(self, reward: Reward, items: Sequence[Any], fields: Sequence[dict[str, Any]],
              progress: Callable[[int], None] | None = None) -> list[RewardResult]:
        """One RewardResult per (item, fields) pair, in order. Reward failures are error results; only a sandbox
        that cannot run at all raises SandboxError."""
        if len(items) != len(fields):
            raise ValueError(f"{len(items)} items but {len(fields)} rows of fields")
        n = len(items)
        if n == 0:
            return []
        with self._lock:
            self._ensure_workers()
            return self._score(reward, items, fields, progress)

    def _score(self, reward: Reward, items: Sequence[Any], fields: Sequence[dict[str, Any]],
               progress: Callable[[int], None] | None) -> list[RewardResult]:
        lim = self.limits
        n = len(items)
        key = f"{reward.version.content_hash}|{reward.ref or 'pickle'}|{reward.kind}"
        payload = self._payload(reward)
        version = reward.version_id
        results: list[RewardResult | None] = [None] * n
        # several chunks per worker for balance on big batches; a small batch (a GRPO group) goes to one worker in
        # one message: measured 0.4 ms for 8 calls on one worker vs 1.0 ms split over two (wake-ups dominate)
        size = max(1, min(1024, max(math.ceil(n / (self.n_workers * 4)), min(n, 32))))
        queue: deque[list[int]] = deque(list(range(i, min(n, i + size))) for i in range(0, n, size))
        busy: dict[int, _Worker] = {}
        done = 0
        consecutive_crashes = 0

        def finish(idx: int, res: RewardResult) -> None:
            nonlocal done
            if results[idx] is None:
                results[idx] = res
                done += 1
                self.stats.calls += 1
                if res.error is not None:
                    self.stats.errors += 1
                    if res.reason.startswith("reward timed out"):
                        self.stats.timeouts += 1

        def dispatch(w: _Worker, idxs: list[int]) -> None:
            self._chunk_seq += 1
            first_load = key not in w.loaded
            msg = ("score", self._chunk_seq, key, payload if first_load else None, reward.kind, version,
                   lim.timeout_s, [(i, items[i], fields[i]) for i in idxs])
            w.chunk_id = self._chunk_seq
            w.pending = deque(idxs)
            w.deadline = time.monotonic() + lim.timeout_s + lim.grace_s + (lim.load_timeout_s if first_load else 0)
            try:
                frame = encode(msg)
            except Exception as exc:  # noqa: BLE001 - e.g. a row field holding a database connection
                raise SandboxError(f"the reward's inputs cannot be sent to sandbox workers ({type(exc).__name__}: "
                                   f"{exc}); pass picklable row fields, or score this reward with sandbox=False") \
                    from exc
            try:
                write_all(w.fd_in, frame)
            except OSError:  # the worker died while idle (killed from outside): replace it, hand the chunk out again
                w.kill()
                self._workers.remove(w)
                self.stats.restarts += 1
                self._ensure_workers()
                queue.appendleft(idxs)
                return
            w.loaded.add(key)
            busy[w.fd_out] = w

        def replace(w: _Worker, reason: str, timed_out: bool) -> None:
            nonlocal consecutive_crashes
            busy.pop(w.fd_out, None)
            code = w.kill()
            if w.pending:
                idx = w.pending.popleft()
                detail = reason if timed_out else f"{reason}: sandbox worker {_describe_exit(code)} during this call"
                finish(idx, error_result(detail, version=version))
                if w.pending:
                    queue.appendleft(list(w.pending))
            if not timed_out:
                self.stats.crashes += 1
            consecutive_crashes += 1
            self._workers.remove(w)
            self.stats.restarts += 1
            self._ensure_workers()

        last_progress = 0
        while queue or busy:
            if consecutive_crashes >= lim.max_consecutive_crashes:
                why = (f"sandbox gave up after {consecutive_crashes} consecutive worker crashes/timeouts with no "
                       f"successful call in between")
                for idxs in queue:
                    for i in idxs:
                        finish(i, error_result(why, version=version))
                queue.clear()
                for w in list(busy.values()):
                    for i in w.pending:
                        finish(i, error_result(why, version=version))
                    w.pending.clear()
                    replace(w, why, timed_out=False)
                break
            for w in list(self._workers):
                if not queue:
                    break
                if w.fd_out not in busy:
                    dispatch(w, queue.popleft())
            now = time.monotonic()
            wait = max(0.0, min(w.deadline for w in busy.values()) - now) if busy else 0.0
            ready, _, _ = select.select(list(busy), [], [], wait)
            for fd in ready:
                w = busy.get(fd)
                if w is None:
                    continue
                msgs = w.read_available()
                if msgs is None:
                    replace(w, "reward crashed the sandbox worker", timed_out=False)
                    continue
                for m in msgs:
                    if m[0] == "r":
                        _, idx, (score, passed, comps, reason, err, rv) = m
                        finish(idx, RewardResult.model_construct(score=score, passed=passed, components=comps,
                                                                 reason=reason, error=err, reward_version=rv))
                        if w.pending and w.pending[0] == idx:
                            w.pending.popleft()
                        elif idx in w.pending:
                            w.pending.remove(idx)
                        consecutive_crashes = 0
                        w.deadline = time.monotonic() + lim.timeout_s + lim.grace_s
                    elif m[0] == "loaded":
                        w.deadline = time.monotonic() + lim.timeout_s + lim.grace_s
                    elif m[0] == "done":
                        busy.pop(fd, None)
                        w.pending.clear()
                        break
            now = time.monotonic()
            for w in list(busy.values()):
                if now > w.deadline:
                    replace(w, f"reward timed out after {lim.timeout_s:g}s (did not return; the worker was killed "
                               f"and replaced)", timed_out=True)
            if progress is not None and done != last_progress:
                progress(done - last_progress)
                last_progress = done
        missing = [i for i, r in enumerate(results) if r is None]
        for i in missing:  # cannot happen unless the protocol is broken; never silently drop a call
            results[i] = error_result("internal sandbox error: no result came back for this call", version=version)
        return results  # type: ignore[return-value]


_DEFAULT: Sandbox | None = None
_DEFAULT_LOCK = threading.Lock()


def default_sandbox() -> Sandbox:
    """The process-wide sandbox (default limits), started on first use and closed at exit."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None or _DEFAULT.closed:
            _DEFAULT = Sandbox()
            atexit.register(_DEFAULT.close)
        return _DEFAULT
