"""Runs model-written code against unit tests in a throw-away process: `python -I code_harness.py JOB.json`.

Executed as a script (not imported by the studio): it reads the job (code, tests, limits) and deletes it, then
leaves the network, caps its memory, confines its writes to its working folder (the job's temporary folder, which
the parent removes) and gives up starting processes (`restrict_child`). It reads a nonce from stdin *after*
executing the candidate code, and prints one `<nonce> <i> pass|fail <message>` line per test. The parent counts
only lines carrying the nonce, so code that exits early (`os._exit(0)`) or prints fake results at import time
cannot score; the tests run after the code.
Known limit: code that runs in the same process could in principle inspect the harness's memory during a test.
"""

import json
import os
import sys


def _isolate(memory_mb, network):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.path.insert(0, root)
    from rewards.sandbox.isolation import restrict_child

    info = restrict_child(memory_mb, network, writable=[os.getcwd()])  # the job's folder, which the parent removes
    sys.path.remove(root)
    for name in [m for m in sys.modules if m == "rewards" or m.startswith(("rewards.", "schemas"))]:
        del sys.modules[name]
    return info


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        job = json.load(f)
    os.unlink(sys.argv[1])
    _isolate(job.get("memory_mb"), job.get("network", False))
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    namespace = {"__name__": "solution"}
    try:
        exec(compile(job["code"], "<solution>", "exec"), namespace)
        loaded = None
    except BaseException as exc:  # noqa: BLE001 - the candidate's crash is its failure
        loaded = f"{type(exc).__name__}: {exc}"
    nonce = sys.stdin.readline().strip()
    if not nonce:
        return 3
    for i, test in enumerate(job["tests"]):
        if loaded is not None:
            out.write(f"{nonce} {i} fail code failed to run: {loaded[:200]}\n")
            continue
        try:
            exec(compile(test, f"<test {i}>", "exec"), dict(namespace))
            out.write(f"{nonce} {i} pass\n")
        except BaseException as exc:  # noqa: BLE001 - includes AssertionError and SystemExit
            msg = f"{type(exc).__name__}: {exc}".replace("\n", " ")[:200]
            out.write(f"{nonce} {i} fail {msg}\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
