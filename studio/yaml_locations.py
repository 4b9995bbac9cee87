"""Where in a YAML text a spec problem's path points, so the editor can show the error at the field.

The spec loader reports problems as paths (`tables.tasks.columns[3] (estimate).high: ...`); a person editing YAML
wants the line. We walk the YAML node tree (yaml.compose keeps line marks) along the path; when a key is missing
(a required field) the deepest node found is used, so the message still lands next to the right block.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

_PART = re.compile(r"\[(\d+)\](?:\s*\([^)]*\))?|([^.\[\]]+)")


def path_parts(path: str) -> list[str | int]:
    """`tables.tasks.columns[3] (estimate).high` -> ['tables', 'tasks', 'columns', 3, 'high']."""
    parts: list[str | int] = []
    for m in _PART.finditer(path.strip()):
        if m.group(1) is not None:
            parts.append(int(m.group(1)))
        else:
            name = m.group(2).strip()
            if name:
                parts.append(name)
    return parts


def line_of(text: str, path: str) -> int | None:
    """1-based line of the node `path` names in the YAML `text` (or of its deepest existing ancestor)."""
    try:
        node: Any = yaml.compose(text)
    except yaml.YAMLError:
        return None
    if node is None:
        return None
    line = node.start_mark.line + 1
    for part in path_parts(path):
        nxt = None
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            for k, v in node.value:
                if getattr(k, "value", None) == part:
                    line, nxt = k.start_mark.line + 1, v
                    break
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            nxt = node.value[part]
            line = nxt.start_mark.line + 1
        if nxt is None:
            break
        node = nxt
    return line


def split_problem(problem: str) -> tuple[str, str]:
    """'path: message' -> (path, message); a problem without a path gets ''."""
    head, sep, rest = problem.partition(": ")
    if sep and " " not in head.replace(") ", ")").split("(")[0].strip():
        return head, rest
    return "", problem


def yaml_error_line(exc: yaml.YAMLError) -> int | None:
    mark = getattr(exc, "problem_mark", None)
    return mark.line + 1 if mark is not None else None


def annotate(text: str, problems: list[tuple[int | None, str]]) -> str:
    """The YAML with each problem written under its line as a `# ^ error:` comment (what the editor shows)."""
    by_line: dict[int, list[str]] = {}
    for line, msg in problems:
        if line is not None:
            by_line.setdefault(line, []).append(msg)
    out = []
    for i, row in enumerate(text.splitlines(), 1):
        out.append(row)
        indent = len(row) - len(row.lstrip())
        for msg in by_line.get(i, []):
            out.append(" " * indent + f"# ^ error: {msg}")
    return "\n".join(out)
