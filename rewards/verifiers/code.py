"""Code verifier: run the completion's code against the row's unit tests in an isolated child process.

Why a child process per sample even when the reward itself is trusted: the code under test is model-written.
The child leaves the network, has an address-space cap and a wall-clock limit, runs in a temporary folder (the
only place it may write), cannot start processes, and reports per-test results tagged with a nonce it only learns
after the candidate code has run (see `code_harness.py`). `tests` is a list of snippets (`assert f(2) == 4`) or one block of test code; components give the
fraction of tests passed (partial credit for shaping).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from rewards.extraction import Extraction, extract
from rewards.verifiers.base import Verifier, verdict
from schemas.rewards import RewardResult

HARNESS = Path(__file__).with_name("code_harness.py")


class CodeTests(Verifier):
    """Passes when every test passes. Reads the tests from `tests_field` (default `tests`)."""

    name: ClassVar[str] = "code_tests"
    tests_field: str = "tests"
    extraction: Extraction = Extraction(method="code_fence", language="python")
    timeout_s: float = Field(default=10.0, gt=0)
    memory_mb: int = Field(default=1024, ge=128)
    network: bool = False

    def verify(self, completion: Any, fields: dict[str, Any]) -> RewardResult:
        tests = self.field(fields, self.tests_field)
        if isinstance(tests, str):
            try:
                decoded = json.loads(tests)
                tests = decoded if isinstance(decoded, list) else [tests]
            except ValueError:
                tests = [tests]
        if not tests or not all(isinstance(t, str) for t in tests):
            raise ValueError(f"row field {self.tests_field!r} must be a non-empty list of test snippets")
        code, why = extract(completion, self.extraction)
        if code is None:
            return verdict(False, f"format: {why}", format_ok=0.0, tests_passed=0.0)
        outcomes, problem = run_tests(code, tests, timeout_s=self.timeout_s, memory_mb=self.memory_mb,
                                      network=self.network)
        passed = sum(1 for ok, _ in outcomes if ok)
        frac = passed / len(tests)
        if problem:
            return verdict(False, problem, format_ok=1.0, tests_passed=frac)
        if passed == len(tests):
            return verdict(True, f"{passed}/{len(tests)} tests pass", format_ok=1.0, tests_passed=1.0)
        first = next((i, msg) for i, (ok, msg) in enumerate(outcomes) if not ok)
        return verdict(False, f"{passed}/{len(tests)} tests pass; test {first[0]}: {first[1]}", format_ok=1.0,
                       tests_passed=frac)


def run_tests(code: str, tests: list[str], *, timeout_s: float, memory_mb: int,
              network: bool = False) -> tuple[list[tuple[bool, str]], str | None]:
    """[(passed, message)] per test, and a problem that failed the whole run (timeout, crash) or None."""
    nonce = secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix="rlvr_code_") as tmp:
        job = Path(tmp) / "job.json"
        job.write_text(json.dumps({"code": code, "tests": tests, "memory_mb": memory_mb, "network": network}))
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tmp, "PYTHONDONTWRITEBYTECODE": "1",
               "OMP_NUM_THREADS": "1"}
        try:
            proc = subprocess.run([sys.executable, "-I", str(HARNESS), str(job)], input=nonce + "\n",
                                  capture_output=True, text=True, timeout=timeout_s, cwd=tmp, env=env,
                                  start_new_session=True)
        except subprocess.TimeoutExpired:
            return [(False, "timeout")] * len(tests), f"code ran past the {timeout_s:g}s limit"
    results: dict[int, tuple[bool, str]] = {}
    for line in proc.stdout.splitlines():
        parts = line.split(" ", 3)
        if len(parts) >= 3 and parts[0] == nonce and parts[1].isdigit():
            results[int(parts[1])] = (parts[2] == "pass", parts[3] if len(parts) > 3 else "")
    outcomes = [results.get(i, (False, "no result")) for i in range(len(tests))]
    if len(results) < len(tests):
        tail = (proc.stderr or "").strip().splitlines()[-1:] or [""]
        return outcomes, f"the test process ended early (exit status {proc.returncode}) {tail[0][:160]}".strip()
    return outcomes, None
