"""Schema-constrained JSON decoding that never runs the model for tokens the schema forces ("jump-forward").

Why not only outlines: for a flat object schema, everything but the values is fixed text (`{"name": "`, `", "age": `,
`}`). outlines walks its automaton token by token, running a forward pass for each forced token and masking a
49k-entry vocabulary at every step (measured here 1.6x the time of plain decoding). Here the fixed text is appended
to the KV cache in one forward pass, and only value tokens are decoded, each under a precomputed vocabulary mask:
string-safe tokens (length-bounded by maxLength), digit tokens, or a token trie for enums, booleans and small integer
ranges. The result is still re-validated with jsonschema by the caller; schemas outside this subset (nested objects,
arrays, patterns) go to outlines.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

SMALL_INT_RANGE = 2000
PRESENCE_PENALTY = 2.0


class UnsupportedSchema(ValueError):
    """The schema is outside the jump-forward subset; use the outlines backend for it."""


@dataclass
class FieldPlan:
    name: str
    kind: str                 # string | choice | integer | number
    options: list[str] | None = None   # JSON texts, for choice
    min_len: int = 0
    max_len: int = 64
    minimum: float | None = None
    maximum: float | None = None


def plan_schema(schema: dict[str, Any]) -> list[FieldPlan]:
    """The fields of a flat object schema, in declared order; UnsupportedSchema for anything else."""
    if schema.get("type") != "object" or not isinstance(schema.get("properties"), dict) or not schema["properties"]:
        raise UnsupportedSchema("expected a JSON Schema of type object with properties")
    if "$ref" in json.dumps(schema) or "$defs" in schema and any("$ref" in json.dumps(v) for v in schema["properties"].values()):
        raise UnsupportedSchema("references ($ref) are not in the jump-forward subset")
    plans = []
    for name, prop in schema["properties"].items():
        t = prop.get("type")
        if "enum" in prop or "const" in prop:
            vals = prop.get("enum", [prop.get("const")])
            plans.append(FieldPlan(name, "choice", options=[json.dumps(v) for v in vals]))
        elif t == "boolean":
            plans.append(FieldPlan(name, "choice", options=["true", "false"]))
        elif t == "string":
            if "pattern" in prop or "format" in prop:
                raise UnsupportedSchema(f"{name}: string pattern/format is not in the jump-forward subset")
            plans.append(FieldPlan(name, "string", min_len=int(prop.get("minLength", 0)),
                                   max_len=int(prop.get("maxLength", 64))))
        elif t == "integer":
            lo, hi = prop.get("minimum"), prop.get("maximum")
            if lo is not None and hi is not None and hi - lo <= SMALL_INT_RANGE:
                plans.append(FieldPlan(name, "choice", options=[str(i) for i in range(int(lo), int(hi) + 1)]))
            else:
                plans.append(FieldPlan(name, "integer", minimum=lo, maximum=hi))
        elif t == "number":
            plans.append(FieldPlan(name, "number", minimum=prop.get("minimum"), maximum=prop.get("maximum")))
        else:
            raise UnsupportedSchema(f"{name}: type {t!r} is not in the jump-forward subset")
    return plans


class VocabMasks:
    """Per-tokenizer masks, built once (about 0.3 s for a 49k vocabulary)."""

    def __init__(self, tok: Any):
        import torch

        n = len(tok)
        texts = [tok.convert_tokens_to_string([t]) for t in tok.convert_ids_to_tokens(list(range(n)))]
        special = set(tok.all_special_ids)
        self.texts = texts
        self.length = torch.tensor([len(t) for t in texts])
        bad = set('"\\') | {chr(i) for i in range(32)}
        self.string_safe = torch.tensor([bool(t) and i not in special and not (set(t) & bad) and t.isprintable()
                                         for i, t in enumerate(texts)])
        self.digits = torch.tensor([bool(t) and t.isdigit() and t.isascii() and i not in special
                                    for i, t in enumerate(texts)])
        self.number_chars = torch.tensor([bool(t) and all(c in "0123456789." for c in t) and i not in special
                                          for i, t in enumerate(texts)])
        self.quote = tok.encode('"', add_special_tokens=False)
        if len(self.quote) != 1:
            raise UnsupportedSchema('the tokenizer has no single token for \'"\'')
        self.quote_id = self.quote[0]
        self.comma_id = tok.encode(",", add_special_tokens=False)[0]
        self.brace_id = tok.encode("}", add_special_tokens=False)[0]


class JumpForwardDecoder:
    """Decode one JSON object per prompt; reuse the instance (masks and tries are cached)."""

    def __init__(self, model: Any, tok: Any):
        import inspect

        self.model, self.tok = model, tok
        self.masks = VocabMasks(tok)
        params = inspect.signature(model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._keep = "logits_to_keep" in params
        self._tries: dict[tuple[str, ...], dict] = {}
        self.stats = {"forward_calls": 0, "decoded_tokens": 0, "forced_tokens": 0}

    # -- model steps ---------------------------------------------------------------------------------------
    def _feed(self, ids: list[int], past):
        import torch

        kw = {self._cache_kw: past, "use_cache": True}
        if self._keep:
            kw["logits_to_keep"] = 1
        out = self.model(input_ids=torch.tensor([ids], device=self.model.device), **kw)
        self.stats["forward_calls"] += 1
        cache = out.get("cache") if out.get("cache") is not None else out.get("past_key_values")
        return out.logits[0, -1].float(), cache

    def _pick(self, logits, allowed, gen) -> int:
        import torch

        masked = logits.masked_fill(~allowed, float("-inf"))
        if gen is None:
            return int(torch.argmax(masked))
        probs = torch.softmax(masked / 0.8, dim=-1)
        return int(torch.multinomial(probs, 1, generator=gen))

    def _trie(self, options: list[str]) -> dict:
        key = tuple(options)
        if key not in self._tries:
            root: dict = {}
            for opt in options:
                node = root
                for t in self.tok.encode(opt, add_special_tokens=False):
                    node = node.setdefault(t, {})
                node[None] = opt
            self._tries[key] = root
        return self._tries[key]

    # -- one object ----------------------------------------------------------------------------------------
    def decode(self, prompt_ids: list[int], plans: list[FieldPlan], gen=None) -> str:
        import torch

        m = self.masks
        vocab = len(m.texts)
        text = ""
        pending = ""           # forced text not yet fed
        logits, past = self._feed(prompt_ids, None)

        def flush(logits, past, pending):
            if pending:
                ids = self.tok.encode(pending, add_special_tokens=False)
                self.stats["forced_tokens"] += len(ids)
                logits, past = self._feed(ids, past)
            return logits, past

        for i, f in enumerate(plans):
            piece = ("{" if i == 0 else ", ") + json.dumps(f.name) + ": "
            text += piece
            pending += piece
            if f.kind == "choice":
                logits, past = flush(logits, past, pending)
                pending = ""
                node = self._trie(f.options)
                while True:
                    children = [t for t in node if t is not None]
                    if not children:
                        text += node[None]
                        break
                    if None in node and len(children) == 0:
                        text += node[None]
                        break
                    allowed = torch.zeros(vocab, dtype=torch.bool)
                    allowed[children] = True
                    if None in node:  # a complete option that others extend: end here if the model wants
                        t = self._pick(logits, allowed | self._end_mask(i, len(plans)), gen)
                        if t not in node:
                            text += node[None]
                            pending = ""
                            # the end token chosen belongs to the next forced piece; re-fed with it
                            break
                    else:
                        t = self._pick(logits, allowed, gen)
                    self.stats["decoded_tokens"] += 1
                    logits, past = self._feed([t], past)
                    node = node[t]
            elif f.kind == "string":
                pending += '"'
                text += '"'
                logits, past = flush(logits, past, pending)
                pending = ""
                chars = 0
                used: list[int] = []
                while True:
                    remaining = f.max_len - chars
                    allowed = m.string_safe & (m.length <= remaining)
                    if chars >= f.min_len:
                        allowed[m.quote_id] = True
                    if remaining <= 0 or not bool(allowed.any()):
                        t = m.quote_id
                    else:
                        if used:  # a presence penalty: small models loop ("1000000...") inside free strings
                            logits = logits.clone()
                            logits[used] -= PRESENCE_PENALTY
                        t = self._pick(logits, allowed, gen)
                    used.append(t)
                    self.stats["decoded_tokens"] += 1
                    if t == m.quote_id:
                        text += '"'
                        pending = '"'  # fed together with the next forced piece
                        break
                    logits, past = self._feed([t], past)
                    text += m.texts[t]
                    chars += len(m.texts[t])
                # the closing quote joins the next forced text
                text_tail = pending
                pending = text_tail
            else:  # integer / number: digits, then the model's choice to end
                logits, past = flush(logits, past, pending)
                pending = ""
                allowed_body = m.digits if f.kind == "integer" else m.number_chars
                digits = ""
                max_digits = 12
                while True:
                    allowed = allowed_body & (m.length <= max_digits - len(digits))
                    end = self._end_mask(i, len(plans)) if digits else torch.zeros(vocab, dtype=torch.bool)
                    if not bool(allowed.any()):
                        break
                    t = self._pick(logits, allowed | end, gen)
                    self.stats["decoded_tokens"] += 1
                    if bool(end[t]):
                        break
                    logits, past = self._feed([t], past)
                    digits += m.texts[t]
                if f.kind == "integer":
                    digits = digits.lstrip("0") or "0"
                text += digits
        text += "}"
        # `pending` (a closing quote, at most) needs no forward pass: nothing follows
        return text

    def _end_mask(self, i: int, n: int):
        import torch

        mask = torch.zeros(len(self.masks.texts), dtype=torch.bool)
        mask[self.masks.comma_id if i < n - 1 else self.masks.brace_id] = True
        return mask
