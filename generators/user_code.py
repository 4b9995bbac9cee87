"""Loading and calling user code named in a spec (`"package.module:function"`): custom columns, validators,
pydantic models. A crash inside user code is raised as `UserCodeError` naming the function and the column, never
turned into empty values."""

from __future__ import annotations

import importlib
from typing import Any


class UserCodeError(RuntimeError):
    """User code could not be imported, raised, or returned the wrong shape."""


def resolve(ref: str, where: str) -> Any:
    mod_name, _, attr = ref.partition(":")
    try:
        mod = importlib.import_module(mod_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is the user's to see
        raise UserCodeError(f"{where}: cannot import module {mod_name!r} ({type(exc).__name__}: {exc})") from exc
    try:
        return getattr(mod, attr)
    except AttributeError as exc:
        raise UserCodeError(f"{where}: module {mod_name!r} has no attribute {attr!r}") from exc


def call(fn: Any, where: str, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - reported as a crash in user code
        raise UserCodeError(f"{where}: {getattr(fn, '__name__', fn)} raised {type(exc).__name__}: {exc}") from exc
