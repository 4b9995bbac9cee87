"""What a sandbox worker does to itself before running user code: leave the network, cap its memory.

Network: the worker calls `unshare(CLONE_NEWUSER | CLONE_NEWNET)` so it sits in an empty network namespace (not
even loopback to the host). That needs unprivileged user namespaces (Linux with
`kernel.unprivileged_userns_clone=1`, the default on most distributions; refused inside some containers). Where
refused, the worker falls back to replacing `socket.socket` and friends with a function that raises: that stops
accidental use (an HTTP client, a judge calling an API) but not deliberate code that reaches the OS another way,
so `network_isolation` in the worker's hello reports which of the two is in force ("namespace" or "socket-guard").

Memory: RLIMIT_AS caps the worker's address space; an allocation beyond it raises MemoryError inside the reward
(an error result) instead of taking the machine down.

Not isolated (documented limits): the filesystem (reward code runs as the calling user and can read and write what
that user can), process creation (a fork bomb is not stopped), and CPU use beyond the per-call wall-clock limit.
Treat the sandbox as protection against buggy and careless code, not against a determined attacker.
"""

from __future__ import annotations

import ctypes
import os
import resource
import socket

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000


def enter_network_namespace() -> str | None:
    """Move this (single-threaded) process into new user + network namespaces; None on success, else why not."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            return f"unshare refused: {os.strerror(err)}"
    except Exception as exc:  # noqa: BLE001 - any failure means: fall back
        return f"unshare unavailable: {exc}"
    return None


class NetworkDisabled(OSError):
    """Raised by the socket guard when reward code tries to open a network socket."""


def install_socket_guard() -> None:
    def _refuse(*args: object, **kwargs: object) -> None:
        raise NetworkDisabled("network access is disabled inside the reward sandbox")

    class _GuardedSocket(socket.socket):
        def __init__(self, family: int = -1, *args: object, **kwargs: object) -> None:
            if family in (socket.AF_INET, socket.AF_INET6, -1):
                raise NetworkDisabled("network access is disabled inside the reward sandbox")
            super().__init__(family, *args, **kwargs)  # type: ignore[arg-type]

    socket.socket = _GuardedSocket  # type: ignore[misc]
    socket.create_connection = _refuse  # type: ignore[assignment]
    socket.getaddrinfo = _refuse  # type: ignore[assignment]


def isolate_network() -> tuple[str, str]:
    """('namespace', '') when the kernel let us leave the network, else ('socket-guard', why)."""
    why = enter_network_namespace()
    if why is None:
        return "namespace", ""
    install_socket_guard()
    return "socket-guard", why


def limit_memory(memory_mb: int | None) -> None:
    """Cap the address space (RLIMIT_AS) at `memory_mb` MiB; no core dumps either."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if memory_mb:
        limit = int(memory_mb) * 1024 * 1024
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def restrict_child(memory_mb: int | None, network: bool) -> dict[str, str]:
    """Everything a throw-away child (e.g. model-written code under test) applies to itself before exec'ing."""
    info = {"network_isolation": "allowed", "why": ""}
    if not network:
        method, why = isolate_network()
        info = {"network_isolation": method, "why": why}
    limit_memory(memory_mb)
    return info
