"""Tool-call AST match in the style of BFCL: compare the calls a completion makes with the ground-truth calls.

A predicted call matches a ground-truth call when: the function name is equal; every ground-truth argument is
present with an equal value; no argument is present that the ground truth lacks (unless it equals the tool
schema's `default`). Values compare structurally: numbers by value (1 == 1.0), strings after the
`string_normalization` options (BFCL lowercases and trims), lists in order, objects key by key. A ground-truth
value `{"$any_of": [v1, v2]}` accepts any listed value (BFCL's "possible answers").

With the row's `tools` (OpenAI function schemas) each predicted call is also checked on its own: the tool exists,
required parameters are present, no parameter outside the schema, JSON types (integer/number/string/boolean/
array/object, recursively for array items and object properties) and `enum` allowed values.

Parallel calls are order-free by default: the best one-to-one assignment of predicted to ground-truth calls is
found (maximum bipartite matching), so reordered calls still pass; `order="strict"` compares position by position.
Text is parsed with THE tool-call parser of the environments (`rewards.environments.toolcalls.parse_reply`), so a
format error here means the same as in the tool loop.

Components (for shaping): `format_ok`, `calls_matched` (fraction of ground-truth calls matched), `name_recall`
(fraction of ground-truth function names called, as a multiset), `args_partial` (mean over ground-truth calls of the
best fraction of its arguments matched by a same-name call), `schema_valid` (fraction of predicted calls valid
against the tool schemas), `extra_calls` (predicted calls left unmatched).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, ClassVar, Literal

from rewards.normalization import TextNormalization, normalize_text
from rewards.verifiers.base import Verifier, verdict
from schemas.messages import ToolCall
from schemas.rewards import RewardResult

ANY_OF = "$any_of"


def _as_call(obj: Any, where: str) -> ToolCall:
    if isinstance(obj, ToolCall):
        return obj
    if isinstance(obj, dict):
        if "function" in obj and isinstance(obj["function"], dict):  # OpenAI chat-completions shape
            fn = obj["function"]
            args = fn.get("arguments", {})
            if isinstance(args, str):
                args = json.loads(args) if args.strip() else {}
            return ToolCall(name=fn.get("name", ""), arguments=args or {})
        args = obj.get("arguments", obj.get("parameters", {}))
        if isinstance(args, str):
            args = json.loads(args) if args.strip() else {}
        return ToolCall(name=obj.get("name", ""), arguments=args or {})
    raise TypeError(f"{where}: expected a tool call (dict or ToolCall), got {type(obj).__name__}")


def predicted_calls(completion: Any) -> tuple[list[ToolCall], list[str]]:
    """(calls, format errors) from model text, a list of calls, or chat messages with `tool_calls`."""
    if isinstance(completion, str):
        from rewards.environments.toolcalls import parse_reply

        parsed = parse_reply(completion)
        return list(parsed.calls), list(parsed.errors)
    if isinstance(completion, list):
        calls: list[ToolCall] = []
        errors: list[str] = []
        for i, item in enumerate(completion):
            if isinstance(item, dict) and "role" in item:
                for c in item.get("tool_calls") or []:
                    try:
                        calls.append(_as_call(c, f"message {i}"))
                    except (TypeError, ValueError) as exc:
                        errors.append(str(exc))
                if item.get("role") == "assistant" and not item.get("tool_calls") and item.get("content"):
                    more, errs = predicted_calls(item["content"])
                    calls.extend(more)
                    errors.extend(errs)
            else:
                try:
                    calls.append(_as_call(item, f"call {i}"))
                except (TypeError, ValueError) as exc:
                    errors.append(str(exc))
        return calls, errors
    return [], [f"completion is {type(completion).__name__}; expected text or a list of calls"]


_JSON_TYPES: dict[str, Any] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


def check_value(value: Any, schema: dict[str, Any], where: str) -> str | None:
    """The first way `value` breaks `schema` (type, enum, items, properties), or None."""
    types = schema.get("type")
    if types is not None:
        tlist = types if isinstance(types, list) else [types]
        if not any(_JSON_TYPES.get(t, lambda v: True)(value) for t in tlist):
            return f"{where} is {type(value).__name__} {json.dumps(value)[:40]}, expected {'/'.join(tlist)}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{where}={json.dumps(value)[:40]} is not one of the allowed values {schema['enum'][:8]}"
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(value):
            err = check_value(v, schema["items"], f"{where}[{i}]")
            if err:
                return err
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        for k, v in value.items():
            if k in schema["properties"]:
                err = check_value(v, schema["properties"][k], f"{where}.{k}")
                if err:
                    return err
        for k in schema.get("required", []):
            if k not in value:
                return f"{where} lacks required key {k!r}"
    return None


def check_call(call: ToolCall, tools: dict[str, dict[str, Any]]) -> str | None:
    """The first way `call` breaks its tool's schema, or None."""
    spec = tools.get(call.name)
    if spec is None:
        return f"tool {call.name!r} does not exist"
    params = spec.get("parameters") or {}
    props = params.get("properties") or {}
    for req in params.get("required", []):
        if req not in call.arguments:
            return f"{call.name}: required argument {req!r} is missing"
    for k, v in call.arguments.items():
        if k not in props:
            return f"{call.name}: unexpected argument {k!r}"
        err = check_value(v, props[k], f"{call.name}.{k}")
        if err:
            return err
    return None


def _tool_index(tools: Any) -> dict[str, dict[str, Any]]:
    if isinstance(tools, str):
        tools = json.loads(tools)
    out: dict[str, dict[str, Any]] = {}
    for t in tools or []:
        t = t.model_dump() if hasattr(t, "model_dump") else t
        fn = t.get("function", t)
        out[fn["name"]] = fn
    return out


class ToolCallMatch(Verifier):
    """BFCL-style tool-call verifier (see the module docstring). Reads `calls_field` (default
    `ground_truth_calls`) and, when present, `tools_field` (default `tools`) from the row."""

    name: ClassVar[str] = "tool_call_match"
    order: Literal["any", "strict"] = "any"
    string_normalization: TextNormalization = TextNormalization(casefold=True)
    check_schema: bool = True
    allow_extra_calls: bool = False
    calls_field: str = "ground_truth_calls"
    tools_field: str = "tools"

    def _equal(self, got: Any, want: Any) -> bool:
        if isinstance(want, dict) and set(want) == {ANY_OF}:
            return any(self._equal(got, w) for w in want[ANY_OF])
        if isinstance(want, bool) or isinstance(got, bool):
            return isinstance(want, bool) and isinstance(got, bool) and got == want
        if isinstance(want, (int, float)) and isinstance(got, (int, float)):
            return got == want
        if isinstance(want, str) and isinstance(got, str):
            n = self.string_normalization
            return normalize_text(got, n) == normalize_text(want, n)
        if isinstance(want, list) and isinstance(got, list):
            return len(got) == len(want) and all(self._equal(g, w) for g, w in zip(got, want))
        if isinstance(want, dict) and isinstance(got, dict):
            return set(got) == set(want) and all(self._equal(got[k], want[k]) for k in want)
        return got is None and want is None

    def _arg_problems(self, pred: ToolCall, gt: ToolCall, spec: dict[str, Any] | None) -> list[str]:
        """Why `pred` does not match `gt` (same name assumed); empty when it matches."""
        problems = []
        props = ((spec or {}).get("parameters") or {}).get("properties") or {}
        for k, want in gt.arguments.items():
            if k not in pred.arguments:
                problems.append(f"argument {k!r} is missing")
            elif not self._equal(pred.arguments[k], want):
                problems.append(f"argument {k!r} is {json.dumps(pred.arguments[k])[:40]}, expected "
                                f"{json.dumps(want)[:40]}")
        for k, v in pred.arguments.items():
            if k not in gt.arguments and not ("default" in props.get(k, {}) and self._equal(v, props[k]["default"])):
                problems.append(f"unexpected argument {k!r}")
        return problems

    def _arg_fraction(self, pred: ToolCall, gt: ToolCall) -> float:
        keys = set(gt.arguments) | set(pred.arguments)
        if not keys:
            return 1.0
        good = sum(1 for k in gt.arguments if k in pred.arguments and self._equal(pred.arguments[k], gt.arguments[k]))
        return good / len(keys)

    def verify(self, completion: Any, fields: dict[str, Any]) -> RewardResult:
        raw_gt = self.field(fields, self.calls_field)
        if isinstance(raw_gt, str):
            raw_gt = json.loads(raw_gt)
        gt = [_as_call(c, f"{self.calls_field}[{i}]") for i, c in enumerate(raw_gt)]
        tools = _tool_index(fields.get(self.tools_field)) if self.check_schema else {}
        pred, errors = predicted_calls(completion)
        if errors:
            return verdict(False, f"format: {errors[0]}", format_ok=0.0, calls_matched=0.0, name_recall=0.0,
                           args_partial=0.0, schema_valid=0.0, extra_calls=float(len(pred)))
        schema_errs = [e for e in (check_call(c, tools) for c in pred) if e] if tools else []
        schema_valid = 1.0 - len(schema_errs) / len(pred) if pred else 1.0
        n, m = len(pred), len(gt)
        ok = [[p.name == g.name and not self._arg_problems(p, g, tools.get(g.name)) for g in gt] for p in pred]
        if self.order == "strict":
            pairs = [(i, i) for i in range(min(n, m)) if ok[i][i]]
        else:
            pairs = _max_matching(ok, n, m)
        matched = len(pairs)
        gt_names, pred_names = Counter(g.name for g in gt), Counter(p.name for p in pred)
        name_recall = sum((gt_names & pred_names).values()) / m if m else 1.0
        args_partial = (sum(max((self._arg_fraction(p, g) for p in pred if p.name == g.name), default=0.0)
                            for g in gt) / m) if m else 1.0
        extra = n - matched
        comps = dict(format_ok=1.0, calls_matched=(matched / m) if m else 1.0, name_recall=name_recall,
                     args_partial=args_partial, schema_valid=schema_valid, extra_calls=float(extra))
        passed = matched == m and (extra == 0 or self.allow_extra_calls) and not schema_errs
        if passed:
            return verdict(True, f"{m} call(s) match", **comps)
        return verdict(False, self._explain(pred, gt, pairs, schema_errs, tools), **comps)

    def _explain(self, pred: list[ToolCall], gt: list[ToolCall], pairs: list[tuple[int, int]],
                 schema_errs: list[str], tools: dict[str, dict[str, Any]]) -> str:
        if schema_errs:
            return f"schema: {schema_errs[0]}"
        used_p = {p for p, _ in pairs}
        used_g = {g for _, g in pairs}
        for j, g in enumerate(gt):
            if j in used_g:
                continue
            same = [i for i, p in enumerate(pred) if p.name == g.name and i not in used_p]
            if not same:
                args = ", ".join(f"{k}={json.dumps(v)[:30]}" for k, v in list(g.arguments.items())[:3])
                return f"expected call {g.name}({args}) was not made" + (
                    " in this position" if self.order == "strict" else "")
            problems = self._arg_problems(pred[same[0]], g, tools.get(g.name))
            if self.order == "strict" and not problems:
                return f"call {g.name} is out of order"
            return f"{g.name}: {problems[0] if problems else 'does not match'}"
        extra = [pred[i].name for i in range(len(pred)) if i not in used_p]
        return f"unexpected extra call(s): {', '.join(extra[:4])}"


def _max_matching(ok: list[list[bool]], n: int, m: int) -> list[tuple[int, int]]:
    """Maximum bipartite matching (Kuhn's augmenting paths): pairs (predicted index, ground-truth index)."""
    match_g: list[int] = [-1] * m

    def augment(i: int, seen: list[bool]) -> bool:
        for j in range(m):
            if ok[i][j] and not seen[j]:
                seen[j] = True
                if match_g[j] == -1 or augment(match_g[j], seen):
                    match_g[j] = i
                    return True
        return False

    for i in range(n):
        augment(i, [False] * m)
    return [(match_g[j], j) for j in range(m) if match_g[j] != -1]
