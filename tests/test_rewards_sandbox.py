"""The sandbox: crashing, hanging, memory-hungry, NaN-returning and network-using rewards become error results;
a hung or dead worker is replaced and the rest of the batch still scores."""

from __future__ import annotations

import socket
import textwrap

import pytest

from rewards import Sandbox, SandboxLimits, load_reward, score_batch

USER_CODE = '''
import math, os, time

def exact(completion, answer):
    return completion.strip() == answer

def crashes(completion):
    raise ValueError("bad input " + completion)

def returns_nan(completion):
    return math.nan

def hangs(completion):
    if completion == "hang":
        while True:
            pass
    return 1.0

def stubborn(completion):
    while True:  # swallows the soft alarm: only killing the worker stops it
        try:
            time.sleep(5)
        except BaseException:
            pass

def hogs_memory(completion):
    block = bytearray(3 * 1024 ** 3)
    return float(len(block))

def grows_memory(completion):
    chunks = []
    while True:
        chunks.append(bytes(50 * 1024 ** 2))  # calloc: fast, so the cap and not the clock stops it

def dies(completion):
    if completion == "die":
        os._exit(7)
    return 0.5

def prints(completion):
    print("noise on stdout must not break the protocol")
    return 1.0

def writes_file(completion, path):
    with open(path, "w") as f:
        f.write(completion)
    return 1.0

def writes_tmp(completion):
    import tempfile
    with tempfile.NamedTemporaryFile("w", delete=False) as f:
        f.write(completion)
    return float(open(f.name).read() == completion)

def starts_process(completion):
    import subprocess
    subprocess.run(["true"], check=True)
    return 1.0

def forks_raw(completion):
    import ctypes
    pid = ctypes.CDLL(None, use_errno=True).fork()  # past Python's guard: only the kernel's filter stops it
    if pid == 0:
        os._exit(0)
    return float(min(pid, 1))  # -1 refused, 1 a child started

def uses_threads(completion):
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(2) as ex:
        return float(sum(ex.map(len, [completion, completion])))

def connects(completion, port):
    import socket
    socket.create_connection(("127.0.0.1", port), timeout=1).close()
    return 1.0
'''


@pytest.fixture(scope="module")
def user_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("user") / "user_rewards.py"
    p.write_text(textwrap.dedent(USER_CODE))
    return p


@pytest.fixture(scope="module")
def box():
    with Sandbox(SandboxLimits(timeout_s=1.0, grace_s=0.5, memory_mb=1024), workers=2) as sb:
        yield sb


def _r(user_file, name):
    return load_reward(f"{user_file}:{name}")


def test_true_results_pass_through(box, user_file):
    res = score_batch(_r(user_file, "exact"), ["4", " 4 ", "5"], [{"answer": "4"}] * 3, sandbox=box)
    assert [r.score for r in res] == [1.0, 1.0, 0.0] and all(r.error is None for r in res)
    assert all(r.reward_version.startswith("exact@") for r in res)
    assert score_batch(_r(user_file, "prints"), ["x"], [{}], sandbox=box)[0].score == 1.0


def test_crash_is_an_error_with_traceback(box, user_file):
    (res,) = score_batch(_r(user_file, "crashes"), ["xyz"], [{}], sandbox=box)
    assert res.score is None and "ValueError: bad input xyz" in res.reason
    assert "Traceback" in res.error and "user_rewards.py" in res.error


def test_nan_is_an_error(box, user_file):
    (res,) = score_batch(_r(user_file, "returns_nan"), ["x"], [{}], sandbox=box)
    assert res.score is None and "non-finite" in res.reason


def test_hang_times_out_and_the_rest_of_the_batch_scores(box, user_file):
    res = score_batch(_r(user_file, "hangs"), ["a", "hang", "b", "c"], [{}] * 4, sandbox=box)
    assert [r.score for r in res] == [1.0, None, 1.0, 1.0]
    assert "timed out after 1s" in res[1].reason


def test_stubborn_hang_kills_and_replaces_the_worker(box, user_file):
    restarts = box.stats.restarts
    (res,) = score_batch(_r(user_file, "stubborn"), ["x"], [{}], sandbox=box)
    assert res.score is None and "worker was killed and replaced" in res.reason
    assert box.stats.restarts == restarts + 1
    assert score_batch(_r(user_file, "exact"), ["1"], [{"answer": "1"}], sandbox=box)[0].score == 1.0


@pytest.mark.parametrize("name", ["hogs_memory", "grows_memory"])
def test_memory_hog_hits_the_limit(box, user_file, name):
    (res,) = score_batch(_r(user_file, name), ["x"], [{}], sandbox=box)
    assert res.score is None and "memory limit (1024 MiB)" in res.reason and "MemoryError" in res.error


def test_worker_death_is_an_error_and_others_still_score(box, user_file):
    res = score_batch(_r(user_file, "dies"), ["ok", "die", "ok"], [{}] * 3, sandbox=box)
    assert [r.score for r in res] == [0.5, None, 0.5]
    assert "exited with status 7" in res[1].reason


def test_no_network(box, user_file):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        (res,) = score_batch(_r(user_file, "connects"), ["x"], [{"port": port}], sandbox=box)
        assert res.score is None and res.is_error, res
        assert box.info["network_isolation"] in ("namespace", "socket-guard")
        # the same function outside the sandbox does reach the port: the test can fail
        assert score_batch(_r(user_file, "connects"), ["x"], [{"port": port}], sandbox=False)[0].score == 1.0
    finally:
        server.close()


def _landlock_missing() -> str:
    import ctypes

    abi = ctypes.CDLL(None, use_errno=True).syscall(444, None, 0, 1)  # landlock_create_ruleset(VERSION)
    return "" if abi >= 1 else "this kernel has no Landlock"


def test_rewards_write_only_in_their_private_tmpdir(box, user_file, tmp_path):
    if _landlock_missing():
        pytest.skip(_landlock_missing())
    target = tmp_path / "checkpoint.bin"
    target.write_text("weights")
    new = tmp_path / "new.txt"
    res = score_batch(_r(user_file, "writes_file"), ["x", "y"], [{"path": str(target)}, {"path": str(new)}],
                      sandbox=box)
    assert all(r.score is None and "Permission denied" in r.reason for r in res), res
    assert target.read_text() == "weights" and not new.exists()
    assert score_batch(_r(user_file, "writes_tmp"), ["x"], [{}], sandbox=box)[0].score == 1.0
    assert box.info["filesystem_isolation"] == "landlock", box.info
    with Sandbox(SandboxLimits(filesystem=True), workers=1) as open_box:  # allowed again, explicitly
        assert score_batch(_r(user_file, "writes_file"), ["x"], [{"path": str(new)}], sandbox=open_box)[0].score == 1.0
        tmpdir = open_box.info["writable"]
    assert new.read_text() == "x" and tmpdir == ""


def test_rewards_cannot_start_processes_but_can_use_threads(box, user_file):
    (res,) = score_batch(_r(user_file, "starts_process"), ["x"], [{}], sandbox=box)
    assert res.score is None and "starting processes is disabled inside the reward sandbox" in res.reason
    assert box.info["process_isolation"] == "seccomp", box.info
    assert score_batch(_r(user_file, "forks_raw"), ["x"], [{}], sandbox=box)[0].score == -1.0
    assert score_batch(_r(user_file, "uses_threads"), ["abc"], [{}], sandbox=box)[0].score == 6.0
    with Sandbox(SandboxLimits(subprocesses=True), workers=1) as open_box:
        assert score_batch(_r(user_file, "starts_process"), ["x"], [{}], sandbox=open_box)[0].score == 1.0
        assert score_batch(_r(user_file, "forks_raw"), ["x"], [{}], sandbox=open_box)[0].score == 1.0


def test_a_stopped_workers_private_tmpdir_is_removed(user_file):
    import os

    with Sandbox(SandboxLimits(), workers=1) as sb:
        assert score_batch(_r(user_file, "writes_tmp"), ["x"], [{}], sandbox=sb)[0].score == 1.0
        tmpdir = sb.info["writable"]
        assert os.path.isdir(tmpdir) and os.listdir(tmpdir)
    assert not os.path.exists(tmpdir)


def test_closures_are_shipped_by_value(box):
    threshold = 3

    def longer_than(completion):
        return len(completion) > threshold

    res = score_batch(longer_than, ["ab", "abcd"], [{}, {}], sandbox=box)
    assert [r.passed for r in res] == [False, True]


def test_module_rewards_resolve_on_the_callers_path_at_each_call(box, tmp_path, monkeypatch):
    """The workers started before these folders existed (the process-wide sandbox serves a whole session): a
    'module:function' reward still resolves as it does in the caller, and after the caller's path changes to a
    folder with another module of the same name, the workers load that one, not the copy they imported first."""
    import sys

    for i, score in enumerate((1.0, 0.25)):
        folder = tmp_path / f"version{i}"
        folder.mkdir()
        (folder / "late_module_reward.py").write_text(f"def score(completion):\n    return {score}\n")
        monkeypatch.syspath_prepend(str(folder))
        monkeypatch.delitem(sys.modules, "late_module_reward", raising=False)  # the caller re-imports it too
        (res,) = score_batch(load_reward("late_module_reward:score"), ["x"], [{}], sandbox=box)
        assert res.error is None, res.reason
        assert res.score == score


def test_auto_sandboxes_user_code_but_not_builtin_verifiers(user_file):
    from rewards.scoring import _use_sandbox

    assert _use_sandbox(_r(user_file, "exact"), "auto") is not None
    from rewards.reward import Reward

    class Trusted:
        trusted = True

        def __call__(self, completion, **kw):
            return 1.0

    assert _use_sandbox(Reward(Trusted()), "auto") is None


def test_unpicklable_inputs_are_a_clear_sandbox_error(box, user_file):
    import threading

    from rewards import SandboxError

    with pytest.raises(SandboxError, match="cannot be sent to sandbox workers"):
        score_batch(_r(user_file, "exact"), ["1"], [{"answer": "1", "lock": threading.Lock()}], sandbox=box)
    assert score_batch(_r(user_file, "exact"), ["1"], [{"answer": "1"}], sandbox=box)[0].score == 1.0


def test_workers_exit_when_the_parent_dies(tmp_path, user_file):
    import os
    import subprocess
    import sys
    import time

    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent(f"""
        import os, sys
        from rewards import Sandbox, SandboxLimits, load_reward, score_batch
        box = Sandbox(SandboxLimits(timeout_s=60), workers=1).start()
        print(box._workers[0].proc.pid, flush=True)
        score_batch(load_reward("{user_file}:stubborn"), ["x"], [{{}}], sandbox=box)
    """))
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    worker_pid = int(parent.stdout.readline())
    time.sleep(0.5)
    parent.kill()
    parent.wait()
    for _ in range(40):
        try:
            os.kill(worker_pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(worker_pid, 9)
        raise AssertionError("the worker outlived its parent by 4 s")


def test_a_worker_killed_while_idle_is_replaced(user_file):
    import os
    import signal

    with Sandbox(SandboxLimits(timeout_s=2), workers=2) as sb:
        assert score_batch(_r(user_file, "exact"), ["1"] * 4, [{"answer": "1"}] * 4, sandbox=sb)[0].passed
        for w in sb._workers:
            os.kill(w.proc.pid, signal.SIGKILL)
            w.proc.wait()
        res = score_batch(_r(user_file, "exact"), ["1", "2"] * 8, [{"answer": "1"}] * 16, sandbox=sb)
        assert [r.passed for r in res] == [True, False] * 8 and sb.stats.restarts >= 2


def test_a_killed_parents_worker_folder_is_removed_by_the_next_sandbox(tmp_path):
    """A worker whose parent was killed (SIGKILL: no atexit, no close) empties its private TMPDIR but, confined,
    cannot remove the folder itself; the next sandbox's sweep removes it. A live worker's folder is kept."""
    import os
    import subprocess
    import sys

    from rewards.sandbox.isolation import TMPDIR_PREFIX, remove_orphaned_tmpdirs

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone = tmp_path / f"{TMPDIR_PREFIX}{int(dead.stdout)}_abc"
    (gone / "sub").mkdir(parents=True)
    live = tmp_path / f"{TMPDIR_PREFIX}{os.getpid()}_def"
    live.mkdir()
    other = tmp_path / "rlvr_sandbox_notapid"
    other.mkdir()
    assert remove_orphaned_tmpdirs(str(tmp_path)) == [str(gone)]
    assert not gone.exists() and live.exists() and other.exists()
