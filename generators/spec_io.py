"""Loading a dataset spec from YAML/JSON or a dict, with every problem reported by path; the spec's hash.

Why collect all problems: a user fixing a spec one error per run wastes runs. Pydantic already gathers every field
error; we print each as `tables.tasks.columns[3] (estimate).high: expected high >= low (got 2)` and then run the
graph checks (unknown references, cycles) once the shapes are right.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from generators.expressions import ExpressionError
from generators.graph import SpecGraphError, check_spec
from schemas.dataset_spec import COLUMN_KINDS, DatasetSpec


class SpecError(ValueError):
    """The spec is invalid; `problems` lists every problem as 'path: what was expected'."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = problems
        super().__init__(f"{source}: {len(problems)} problem(s) in the dataset spec:\n" +
                         "\n".join(f"  - {p}" for p in problems))


def _path(loc: tuple, data: Any) -> str:
    out = ""
    node = data
    for i, part in enumerate(loc):
        if isinstance(part, int):
            out += f"[{part}]"
            name = node[part].get("name") if isinstance(node, list) and part < len(node) and isinstance(node[part], dict) else None
            if name and i >= 1 and loc[i - 1] == "columns":
                out += f" ({name})"
        elif part in COLUMN_KINDS and i >= 1 and isinstance(loc[i - 1], int):
            pass  # the discriminator tag pydantic inserts
        elif str(part).startswith(("function-", "literal[")):
            pass
        else:
            out += ("." if out else "") + str(part)
        try:
            node = node[part] if not (part in COLUMN_KINDS and isinstance(node, dict) and part not in node) else node
        except (KeyError, IndexError, TypeError):
            node = None
    return out or "(top level)"


def _describe(err: dict) -> str:
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        return "unknown key (not part of the spec; check the spelling)"
    if err["type"] == "union_tag_invalid":
        return f"unknown column kind {err.get('input', {}).get('kind') if isinstance(err.get('input'), dict) else ''!r}; expected one of {', '.join(COLUMN_KINDS)}"
    if err["type"] == "union_tag_not_found":
        return f"missing 'kind'; expected one of {', '.join(COLUMN_KINDS)}"
    got = err.get("input")
    if err["type"] == "missing":
        return "required field is missing"
    return f"{msg.removeprefix('Value error, ')} (got {got!r:.60})" if not isinstance(got, dict) else msg.removeprefix("Value error, ")


def parse_spec(data: Any, source: str = "<spec>") -> DatasetSpec:
    """Validate a spec dict fully (shapes, then references and cycles); raise SpecError listing every problem."""
    if not isinstance(data, dict):
        raise SpecError(source, [f"(top level): expected a mapping with 'tables', got {type(data).__name__}"])
    try:
        spec = DatasetSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(source, [f"{_path(e['loc'], data)}: {_describe(e)}" for e in exc.errors()]) from exc
    try:
        check_spec(spec)
    except (SpecGraphError, ExpressionError) as exc:
        raise SpecError(source, [str(exc)]) from exc
    return spec


def load_spec(path_or_spec: str | Path | dict | DatasetSpec) -> DatasetSpec:
    """A DatasetSpec from a YAML/JSON file, a dict, or an already built spec (re-checked)."""
    if isinstance(path_or_spec, DatasetSpec):
        return parse_spec(path_or_spec.model_dump(mode="json", exclude_defaults=False), "<DatasetSpec>")
    if isinstance(path_or_spec, dict):
        return parse_spec(path_or_spec)
    path = Path(path_or_spec)
    if not path.exists():
        raise SpecError(str(path), ["no such file"])
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (yaml.YAMLError, ValueError) as exc:
        raise SpecError(str(path), [f"not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {exc}"]) from exc
    return parse_spec(data, str(path))


def spec_hash(spec: DatasetSpec) -> str:
    """Digest of the spec's canonical JSON: a dataset's manifest records it, and resume refuses a changed spec."""
    canon = json.dumps(spec.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()
