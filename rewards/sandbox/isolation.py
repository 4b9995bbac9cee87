"""What a sandbox worker does to itself before running user code: leave the network, cap its memory, confine its
writes to a private folder and give up creating processes.

Network: the worker calls `unshare(CLONE_NEWUSER | CLONE_NEWNET)` so it sits in an empty network namespace (not
even loopback to the host). That needs unprivileged user namespaces (Linux with
`kernel.unprivileged_userns_clone=1`, the default on most distributions; refused inside some containers). Where
refused, the worker falls back to replacing `socket.socket` and friends with a function that raises: that stops
accidental use (an HTTP client, a judge calling an API) but not deliberate code that reaches the OS another way,
so `network_isolation` in the worker's hello reports which of the two is in force ("namespace" or "socket-guard").

Memory: RLIMIT_AS caps the worker's address space; an allocation beyond it raises MemoryError inside the reward
(an error result) instead of taking the machine down.

Filesystem: a Landlock ruleset (Linux >= 5.13, no privileges needed) lets the process read everything it could
before (imports, data files a reward loads) but create, write, truncate, rename or delete files only under its own
temporary folder (also `TMPDIR`) and write to /dev/null: a reward cannot overwrite a checkpoint, a dataset or its
own source. `filesystem_isolation` reports "landlock", or "none" with why (an older kernel, Landlock disabled).

Processes: a seccomp filter makes fork, vfork, execve, execveat and clone without CLONE_THREAD fail with EPERM
(threads still work; clone3 answers ENOSYS so the C library falls back to clone, whose flags the filter can see),
so a reward cannot start programs or fork-bomb the machine; Python's own process functions raise a
`PermissionError` that says why. `process_isolation` reports "seccomp", or "none" with why (an architecture
other than x86-64 / arm64, seccomp unavailable).

Not isolated (documented limits): reading files the calling user can read, and CPU use beyond the per-call
wall-clock limit. Writes, process creation and the network can each be allowed again (`SandboxLimits`), e.g. for
a reward that runs a compiler.
"""

from __future__ import annotations

import ctypes
import os
import resource
import socket
import struct
import sys
from typing import Any

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000


def _libc() -> ctypes.CDLL:
    """The C library, errno kept for ctypes.get_errno; `syscall` returns a long (Landlock's fds, -1 on error)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def enter_network_namespace() -> str | None:
    """Move this (single-threaded) process into new user + network namespaces; None on success, else why not."""
    try:
        libc = _libc()
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


# ---- filesystem: Landlock (include/uapi/linux/landlock.h); the syscall numbers are the same on every arch
_LANDLOCK_CREATE_RULESET, _LANDLOCK_ADD_RULE, _LANDLOCK_RESTRICT_SELF = 444, 445, 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1
_FS_WRITE_FILE, _FS_TRUNCATE = 1 << 1, 1 << 14
# everything that changes the filesystem: write, remove dir/file, make char/dir/reg/sock/fifo/block/sym
_FS_CHANGES_V1 = (1 << 1) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) \
    | (1 << 12)
_FS_REFER = 1 << 13  # ABI 2: renames and links across folders
_PR_SET_NO_NEW_PRIVS = 38


def _no_new_privs(libc: ctypes.CDLL) -> None:
    """Landlock and seccomp both require it of an unprivileged process (and it is what they are for)."""
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(ctypes.get_errno())}")


def restrict_filesystem(writable: list[str]) -> tuple[str, str]:
    """Allow creating, writing and deleting files only beneath the folders (or at the files) in `writable`; reading
    stays as it was. ('landlock', '') when in force, else ('none', why)."""
    try:
        libc = _libc()
        abi = libc.syscall(_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                           ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION))
        if abi < 1:
            return "none", f"Landlock unavailable: {os.strerror(ctypes.get_errno())}"
        handled = _FS_CHANGES_V1 | (_FS_REFER if abi >= 2 else 0) | (_FS_TRUNCATE if abi >= 3 else 0)
        attr = struct.pack("=Q", handled)  # struct landlock_ruleset_attr, handled_access_fs only
        ruleset = libc.syscall(_LANDLOCK_CREATE_RULESET, ctypes.c_char_p(attr), ctypes.c_size_t(len(attr)),
                               ctypes.c_uint32(0))
        if ruleset < 0:
            return "none", f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}"
        try:
            for path in writable:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                try:
                    # a file takes only the rights that apply to files
                    allowed = handled if os.path.isdir(path) else handled & (_FS_WRITE_FILE | _FS_TRUNCATE)
                    rule = struct.pack("=Qi", allowed, fd)  # struct landlock_path_beneath_attr (packed)
                    if libc.syscall(_LANDLOCK_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH),
                                    ctypes.c_char_p(rule), ctypes.c_uint32(0)) != 0:
                        return "none", f"landlock_add_rule({path}): {os.strerror(ctypes.get_errno())}"
                finally:
                    os.close(fd)
            _no_new_privs(libc)
            if libc.syscall(_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
                return "none", f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}"
        finally:
            os.close(ruleset)
    except Exception as exc:  # noqa: BLE001 - any failure means: not isolated, and the hello says why
        return "none", f"Landlock unavailable: {exc}"
    return "landlock", ""


# ---- processes: a seccomp BPF filter (include/uapi/linux/seccomp.h, filter.h)
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# syscalls that start a process or replace the program: (blocked, clone, clone3)
_SYSCALLS = {"x86_64": ((57, 58, 59, 322), 56, 435),  # fork, vfork, execve, execveat
             "aarch64": ((221, 281), 220, 435)}  # execve, execveat (no fork/vfork there)
_CLONE_THREAD = 0x00010000
_X32_BIT = 0x40000000  # x86-64's x32 ABI numbers: refused outright, so they cannot be a way around the filter
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_EPERM, _ENOSYS = 1, 38
_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2


def _process_filter(machine: str) -> list[tuple[int, int, int, int]]:
    """The BPF program (code, jt, jf, k): wrong architecture or a blocked syscall -> EPERM, clone3 -> ENOSYS,
    clone -> EPERM unless it makes a thread, anything else allowed."""
    blocked, clone, clone3 = _SYSCALLS[machine]
    deny, enosys, allow = "deny", "enosys", "allow"
    prog: list[tuple[int, Any, Any, int]] = [(_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
                                             (_JEQ, 1, 0, _AUDIT_ARCH[machine]),
                                             (_RET, 0, 0, _RET_ERRNO | _EPERM),
                                             (_LD_W_ABS, 0, 0, 0)]  # seccomp_data.nr
    if machine == "x86_64":
        prog.append((_JGE, deny, 0, _X32_BIT))
    prog += [(_JEQ, deny, 0, nr) for nr in blocked]
    prog += [(_JEQ, enosys, 0, clone3), (_JEQ, 0, allow, clone),
             (_LD_W_ABS, 0, 0, 16),  # seccomp_data.args[0], low half: clone's flags
             (_JSET, allow, deny, _CLONE_THREAD)]
    labels = {deny: len(prog), enosys: len(prog) + 1, allow: len(prog) + 2}
    prog += [(_RET, 0, 0, _RET_ERRNO | _EPERM), (_RET, 0, 0, _RET_ERRNO | _ENOSYS), (_RET, 0, 0, _RET_ALLOW)]

    def offset(i: int, target: Any) -> int:
        return labels[target] - i - 1 if isinstance(target, str) else target

    return [(code, offset(i, jt), offset(i, jf), k) for i, (code, jt, jf, k) in enumerate(prog)]


class ProcessesDisabled(PermissionError):
    """Raised by the process guard when reward code tries to start a process."""


def install_process_guard() -> None:
    """Python-level refusals with a message that says why; the seccomp filter is what enforces it."""
    import subprocess

    def _refuse(*args: object, **kwargs: object) -> Any:
        raise ProcessesDisabled("starting processes is disabled inside the reward sandbox "
                                "(SandboxLimits(subprocesses=True) allows it)")

    for name in ("fork", "forkpty", "vfork", "system", "posix_spawn", "posix_spawnp", "execv", "execve", "execvp",
                 "execvpe", "execl", "execle", "execlp", "execlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe"):
        if hasattr(os, name):
            setattr(os, name, _refuse)
    subprocess.Popen._execute_child = _refuse  # type: ignore[attr-defined]


def forbid_processes() -> tuple[str, str]:
    """Make every later fork/exec of this process fail (threads still work). ('seccomp', '') when in force, else
    ('none', why); the Python guard is installed either way."""
    install_process_guard()
    machine = os.uname().machine
    if machine not in _SYSCALLS or not sys.platform.startswith("linux"):
        return "none", f"no seccomp filter for {sys.platform}/{machine}"
    try:
        libc = _libc()
        prog = _process_filter(machine)
        raw = b"".join(struct.pack("=HBBI", *ins) for ins in prog)
        buf = ctypes.create_string_buffer(raw, len(raw))

        class SockFprog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

        fprog = SockFprog(len(prog), ctypes.cast(buf, ctypes.c_void_p))
        _no_new_privs(libc)
        if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
            return "none", f"seccomp: {os.strerror(ctypes.get_errno())}"
    except Exception as exc:  # noqa: BLE001 - not isolated, and the hello says why
        return "none", f"seccomp unavailable: {exc}"
    return "seccomp", ""


TMPDIR_PREFIX = "rlvr_sandbox_"  # + the worker's pid + "_": whose folder it is, for remove_orphaned_tmpdirs


def private_tmpdir(path: str | None = None) -> str:
    """`path` (default: a new temporary folder) made this process's TMPDIR (and `tempfile`'s): the place it may
    write."""
    import tempfile

    path = path or tempfile.mkdtemp(prefix=f"{TMPDIR_PREFIX}{os.getpid()}_")
    os.environ["TMPDIR"] = path
    tempfile.tempdir = path
    return path


def remove_private_tmpdir(path: str) -> None:
    """Delete a worker's private TMPDIR (a folder `private_tmpdir` made); any other path is left alone."""
    import shutil

    if path and os.path.basename(path).startswith(TMPDIR_PREFIX):
        shutil.rmtree(path, ignore_errors=True)


def remove_orphaned_tmpdirs(root: str | None = None) -> list[str]:
    """Delete the private TMPDIRs under `root` (default: the system's temporary folder) whose worker is gone, and
    return them. Why: a worker whose parent was killed empties its folder itself, but its write confinement does not
    let it remove the folder from the shared temporary folder; the next sandbox started on the machine does. The
    owner is the pid in the folder's name; a live pid (even one reused by another process) keeps the folder."""
    import re
    import shutil
    import tempfile

    import psutil

    root = root or tempfile.gettempdir()
    pattern = re.compile(re.escape(TMPDIR_PREFIX) + r"(\d+)_")
    removed = []
    try:
        names = os.listdir(root)
    except OSError:
        return removed
    for name in names:
        m = pattern.match(name)
        if m is None or psutil.pid_exists(int(m.group(1))):
            continue
        shutil.rmtree(os.path.join(root, name), ignore_errors=True)
        removed.append(os.path.join(root, name))
    return removed


def confine(filesystem: bool, subprocesses: bool, writable: list[str] | None = None) -> dict[str, str]:
    """Writes only beneath `writable` (default: a new private folder; the first one becomes TMPDIR) unless
    `filesystem`; no new processes unless `subprocesses`. Returns what is in force, for the worker's hello."""
    info = {"filesystem_isolation": "allowed", "filesystem_why": "", "writable": "",
            "process_isolation": "allowed", "process_why": ""}
    if not filesystem:
        paths = [private_tmpdir(writable[0]), *writable[1:]] if writable else [private_tmpdir()]
        paths = [*paths, os.devnull]
        method, why = restrict_filesystem(paths)
        info.update(filesystem_isolation=method, filesystem_why=why, writable=os.pathsep.join(paths[:-1]))
    if not subprocesses:
        method, why = forbid_processes()
        info.update(process_isolation=method, process_why=why)
    return info


def restrict_child(memory_mb: int | None, network: bool, filesystem: bool = False, subprocesses: bool = False,
                   writable: list[str] | None = None) -> dict[str, str]:
    """Everything a throw-away child (e.g. model-written code under test) applies to itself before running it."""
    info = {"network_isolation": "allowed", "why": ""}
    if not network:
        method, why = isolate_network()
        info = {"network_isolation": method, "why": why}
    limit_memory(memory_mb)
    info.update(confine(filesystem, subprocesses, writable))
    return info
