"""A sandbox worker: `python -m rewards.sandbox.worker --memory-mb N [--network] [--filesystem] [--subprocesses]`.

It leaves the network, caps its memory, confines its writes to a private TMPDIR and gives up starting processes
(`rewards.sandbox.isolation`) *before* importing any user code, then loops: read a chunk of
(index, item, row fields) from stdin, call the reward on each under a per-call alarm, and write one result frame
per call (so the parent always knows which call a hang or crash belongs to). User code's prints go to stderr; the
protocol uses a private duplicate of the original stdout.
"""

from __future__ import annotations

import argparse
import os
import pickle
import signal
import sys
import traceback
from typing import Any


class RewardTimeout(BaseException):
    """Raised by the alarm inside a reward call; a BaseException so `except Exception` in user code cannot eat it."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise RewardTimeout()


def follow_caller_path(own: list[str], caller: list[str]) -> None:
    """Make sys.path the worker's own entries, then the caller's search path as it is *now*, in the caller's order.

    Why: a worker outlives the call that started it (the process-wide sandbox serves every later call), and the
    caller's path can change in between (a folder put in front, a working directory left). Without this a
    'module:function' reward resolved against the path of whoever started the worker: a folder deleted since, or
    an older copy of the module elsewhere."""
    sys.path[:] = own + [p for p in dict.fromkeys(caller) if p and p not in own]


def forget_moved_module(target: str) -> None:
    """Drop a module (with its submodules) that this worker imported from another file than the one the current
    sys.path finds first, so the next import loads the caller's; modules found where they were are kept."""
    import importlib.machinery

    top = target.split(".")[0]
    cached = sys.modules.get(top)
    origin = getattr(cached, "__file__", None)
    if not origin:
        return
    spec = importlib.machinery.PathFinder.find_spec(top, sys.path)
    if spec is not None and spec.origin and os.path.realpath(spec.origin) != os.path.realpath(origin):
        for name in [n for n in sys.modules if n == top or n.startswith(top + ".")]:
            del sys.modules[name]


def _load(payload: tuple[Any, ...], own_path: list[str]) -> tuple[Any, str | None]:
    """(callable, kind-or-None) from ('ref', 'file.py:fn' / 'module:fn', caller's search path) or ('pickle', bytes,
    caller's search path)."""
    how, data, caller_path = payload
    follow_caller_path(own_path, caller_path)
    if how == "ref":
        from rewards.loading import is_file_target, resolve_callable
        from rewards.reward import Reward

        target = data.rpartition(":")[0]
        if not is_file_target(target):
            forget_moved_module(target)
        obj, _ = resolve_callable(data)
        if isinstance(obj, Reward):
            return obj.fn, obj.kind
        return obj, None
    return pickle.loads(data), None


def _watch_parent() -> None:
    """Exit when the parent dies, even in the middle of a hung reward (the worker has its own session, so nothing
    else would stop it). A thread started after `unshare`, which needs a single-threaded process."""
    import threading
    import time

    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                from rewards.sandbox.isolation import remove_private_tmpdir

                remove_private_tmpdir(os.environ.get("TMPDIR", ""))  # nobody else will
                os._exit(0)

    threading.Thread(target=watch, name="rlvr-parent-watch", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memory-mb", type=int, default=0)
    parser.add_argument("--network", action="store_true")
    parser.add_argument("--filesystem", action="store_true", help="allow writes outside the private TMPDIR")
    parser.add_argument("--subprocesses", action="store_true", help="allow starting processes")
    args = parser.parse_args(argv)

    proto_out = os.dup(1)
    proto_in = os.dup(0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    from rewards.sandbox.isolation import confine, isolate_network, limit_memory, remove_private_tmpdir

    net, why = ("allowed", "") if args.network else isolate_network()
    # imports the protocol needs, before the memory cap, so the cap is what user code gets
    from rewards.protocol import Binding, call_reward, error_result, exception_result
    from rewards.sandbox.framing import encode, read_frame, write_all
    import cloudpickle  # noqa: F401 - so pickled closures load

    own_path = list(sys.path)
    follow_caller_path(own_path, os.environ.get("RLVR_SANDBOX_PATH", "").split(os.pathsep))  # the parent's, after
    limit_memory(args.memory_mb)
    signal.signal(signal.SIGALRM, _on_alarm)
    # before any thread starts: Landlock and seccomp bind the calling thread and the threads it starts later
    confined = confine(args.filesystem, args.subprocesses)
    _watch_parent()
    write_all(proto_out, encode(("hello", {"pid": os.getpid(), "network_isolation": net, "why": why,
                                           "memory_mb": args.memory_mb, **confined})))
    loaded: dict[str, tuple[Any, Binding, str] | str] = {}
    while True:
        msg = read_frame(proto_in)
        if msg is None or msg[0] == "exit":
            remove_private_tmpdir(confined["writable"])
            return 0
        _, chunk_id, key, payload, kind, version, timeout_s, calls = msg
        if key not in loaded:
            if payload is None:
                loaded[key] = f"worker has no reward {key!r} loaded (internal error)"
            else:
                try:
                    signal.setitimer(signal.ITIMER_REAL, max(timeout_s, 30.0))
                    fn, kind_found = _load(payload, own_path)
                    signal.setitimer(signal.ITIMER_REAL, 0)
                    loaded[key] = (fn, Binding.of(fn), kind_found or kind)
                except BaseException as exc:  # noqa: BLE001 - the load failure is every call's error
                    signal.setitimer(signal.ITIMER_REAL, 0)
                    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()
                    loaded[key] = f"loading the reward in the sandbox failed: {type(exc).__name__}: {exc}\n{tb}"
            write_all(proto_out, encode(("loaded", key)))  # the parent now applies the per-call limit
        entry = loaded[key]
        for idx, item, fields in calls:
            if isinstance(entry, str):
                res = error_result(entry.splitlines()[0], entry, version=version)
            else:
                fn, binding, fn_kind = entry
                try:
                    signal.setitimer(signal.ITIMER_REAL, timeout_s)
                    try:
                        res = call_reward(fn, binding, fn_kind, item, fields, version=version)
                        if res.reason.startswith("reward raised MemoryError"):
                            res = res.model_copy(update={"reason": f"reward exceeded the sandbox memory limit "
                                                                   f"({args.memory_mb} MiB): MemoryError"})
                    finally:
                        signal.setitimer(signal.ITIMER_REAL, 0)
                except RewardTimeout:
                    res = error_result(f"reward timed out after {timeout_s:g}s", version=version)
                except MemoryError as exc:
                    res = exception_result(exc, version=version)
                    res = res.model_copy(update={"reason": f"reward exceeded the sandbox memory limit "
                                                           f"({args.memory_mb} MiB)"})
            try:
                frame = encode(("r", idx, (res.score, res.passed, res.components, res.reason, res.error,
                                           res.reward_version)))
            except Exception as exc:  # noqa: BLE001 - e.g. an unpicklable component
                frame = encode(("r", idx, (None, None, {}, f"result could not be sent: {exc}", repr(exc), version)))
            write_all(proto_out, frame)
        write_all(proto_out, encode(("done", chunk_id)))


if __name__ == "__main__":
    sys.exit(main())
