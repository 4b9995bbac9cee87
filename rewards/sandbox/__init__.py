"""Sandboxed execution of user reward code: persistent worker subprocesses with per-call time limits, a memory
cap and no network where the platform allows. See `pool.py` (the parent side), `worker.py` and `isolation.py`."""

from rewards.sandbox.pool import Sandbox, SandboxError, SandboxLimits, SandboxStats, default_sandbox

__all__ = ["Sandbox", "SandboxError", "SandboxLimits", "SandboxStats", "default_sandbox"]
