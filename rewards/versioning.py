"""Content hashes of rewards: the code that runs plus the configuration it runs with.

Why the whole module's source and not only the function's: a reward calls helpers defined next to it (an answer
extractor, a normaliser); editing one changes what the reward measures and must change its version. Rewards
without source on disk (a lambda typed into a REPL) fall back to their compiled code object.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import marshal
import re
import sys
from typing import Any

VERSION_HOOK = "__rlvr_version_payload__"


def _config_text(config: Any) -> str:
    if config is None:
        return ""
    if hasattr(config, "model_dump"):
        config = config.model_dump(mode="json")
    elif dataclasses.is_dataclass(config) and not isinstance(config, type):
        config = dataclasses.asdict(config)
    return json.dumps(config, sort_keys=True, default=repr)


def _module_source(obj: Any) -> str | None:
    module = sys.modules.get(getattr(obj, "__module__", "") or "")
    if module is None:
        return None
    try:
        return inspect.getsource(module)
    except (OSError, TypeError):
        return None


def code_payload(fn: Any) -> str:
    """The text that identifies the code of `fn` (see the module docstring)."""
    hook = getattr(fn, VERSION_HOOK, None)
    if callable(hook):
        return str(hook())
    target = fn if (inspect.isfunction(fn) or inspect.ismethod(fn)) else type(fn)
    if inspect.ismethod(target):
        target = target.__func__
    qualname = getattr(target, "__qualname__", repr(target))
    source = _module_source(target)
    if source is None:
        try:
            source = inspect.getsource(target)
        except (OSError, TypeError):
            code = getattr(target, "__code__", None)
            source = marshal.dumps(code).hex() if code is not None else repr(target)
    payload = f"{getattr(target, '__module__', '')}:{qualname}\n{source}"
    if inspect.isfunction(fn) and fn.__closure__:  # a closure's captured values are part of its behaviour
        cells = []
        for cell in fn.__closure__:
            try:
                cells.append(_stable_repr(cell.cell_contents))
            except ValueError:
                cells.append("<empty>")
        payload += "\nclosure:" + "|".join(cells)
    if not inspect.isfunction(fn) and not inspect.ismethod(fn):
        config = getattr(fn, "config", None)
        if config is None and hasattr(fn, "__dict__"):  # a plain callable object: its state is its configuration
            payload += "\nstate:" + _stable_repr(vars(fn))
        payload += "\nconfig:" + _config_text(config)
    return payload


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _stable_repr(value: Any, depth: int = 0) -> str:
    """A repr that is the same in every process: functions by their code, no memory addresses."""
    if depth < 3 and (inspect.isfunction(value) or inspect.ismethod(value)):
        return "fn:" + hashlib.sha256(code_payload(value).encode("utf-8", "surrogatepass")).hexdigest()
    if depth < 3 and isinstance(value, dict):
        return "{" + ",".join(f"{k!r}:{_stable_repr(v, depth + 1)}" for k, v in sorted(value.items(), key=repr)) + "}"
    if depth < 3 and isinstance(value, (list, tuple)):
        return "[" + ",".join(_stable_repr(v, depth + 1) for v in value) + "]"
    return _ADDRESS.sub("", repr(value))[:500]


def content_hash(fn: Any, config: Any = None) -> str:
    """SHA-256 over the code payload of `fn` and `config` (JSON with sorted keys)."""
    h = hashlib.sha256()
    h.update(code_payload(fn).encode("utf-8", "surrogatepass"))
    h.update(b"\0config\0")
    h.update(_config_text(config).encode("utf-8"))
    return h.hexdigest()
