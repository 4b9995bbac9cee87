"""Loading a reward from a spec string: `path/to/file.py:function`, `package.module:function`, or a registered name.

Why strict: a typo in a reward spec must stop the run with a message naming the file, module or attribute (the CLI
exits 2), not train against a reward that was never loaded.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import traceback
from pathlib import Path
from typing import Any

from rewards.reward import Reward


class RewardSpecError(ValueError):
    """A reward spec could not be resolved; the message says which part and what was expected."""


def _split(spec: str) -> tuple[str, str]:
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        raise RewardSpecError(
            f"reward spec {spec!r}: expected 'path/to/file.py:function', 'package.module:function' or a registered "
            f"reward name"
        )
    if not attr.isidentifier():
        raise RewardSpecError(f"reward spec {spec!r}: {attr!r} is not a Python identifier")
    return target, attr


def is_file_target(target: str) -> bool:
    """Whether a spec's target names a file ('x.py', a path) rather than an importable module."""
    return target.endswith(".py") or "/" in target or "\\" in target


def import_file(path: Path) -> Any:
    """Import a Python file as a module under a name derived from its absolute path (stable within a process)."""
    path = path.resolve()
    mod_name = "rlvr_user_" + hashlib.sha1(str(path).encode()).hexdigest()[:12] + "_" + path.stem.replace("-", "_")
    cached = sys.modules.get(mod_name)
    if cached is not None and getattr(cached, "__rlvr_mtime__", None) == path.stat().st_mtime_ns:
        return cached
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise RewardSpecError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    sys.path_importer_cache.pop(str(path.parent), None)
    if str(path.parent) not in sys.path:  # so the file may import its neighbours (appended: never shadows stdlib)
        sys.path.append(str(path.parent))
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:  # noqa: BLE001 - a crash while importing user code is the message to show
        sys.modules.pop(mod_name, None)
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()
        raise RewardSpecError(f"{path}: importing the file failed with {type(exc).__name__}: {exc}\n{tb}") from exc
    module.__rlvr_mtime__ = path.stat().st_mtime_ns
    return module


def resolve_callable(spec: str) -> tuple[Any, str]:
    """The object a `file.py:attr` / `module:attr` spec names and the normalised spec (absolute file path)."""
    target, attr = _split(spec)
    if is_file_target(target):
        path = Path(target).expanduser()
        if not path.exists():
            raise RewardSpecError(f"reward spec {spec!r}: file {path} does not exist")
        if path.suffix != ".py":
            raise RewardSpecError(f"reward spec {spec!r}: {path} is not a .py file")
        module = import_file(path)
        ref = f"{path.resolve()}:{attr}"
        where = str(path)
    else:
        try:
            module = importlib.import_module(target)
        except ModuleNotFoundError as exc:
            raise RewardSpecError(f"reward spec {spec!r}: no module named {exc.name!r}") from exc
        except BaseException as exc:  # noqa: BLE001
            tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()
            raise RewardSpecError(f"reward spec {spec!r}: importing {target} failed: {exc}\n{tb}") from exc
        ref = f"{target}:{attr}"
        where = f"module {target}"
    if not hasattr(module, attr):
        found = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
                       and getattr(v, "__module__", module.__name__) == module.__name__)
        raise RewardSpecError(f"reward spec {spec!r}: {where} has no attribute {attr!r} (callables defined there: "
                              f"{', '.join(found) or 'none'})")
    obj = getattr(module, attr)
    if not callable(obj):
        raise RewardSpecError(f"reward spec {spec!r}: {attr!r} in {where} is a {type(obj).__name__}, not callable")
    return obj, ref


def load_reward(spec: str, *, name: str | None = None, label: str = "") -> Reward:
    """A `Reward` from `path/to/file.py:function`, `package.module:function` or a registered name.

    The reward's name defaults to the attribute's name (or the registered name); raises RewardSpecError.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise RewardSpecError(f"reward spec must be a non-empty string, got {spec!r}")
    spec = spec.strip()
    if ":" not in spec:
        from rewards.registry import get_reward

        reward = get_reward(spec)
        return Reward(reward, name=name, label=label) if (name or label) else reward
    obj, ref = resolve_callable(spec)
    if isinstance(obj, type):
        raise RewardSpecError(f"reward spec {spec!r}: {obj.__name__} is a class; name a function or an instance")
    attr = ref.rpartition(":")[2]
    if isinstance(obj, Reward):
        return Reward(obj, name=name or obj.name, label=label or obj.label, ref=ref)
    own_name = vars(obj).get("name") if hasattr(obj, "__dict__") and not callable(vars(obj).get("name")) else None
    return Reward(obj, name=name or own_name or attr, label=label, ref=ref)
