"""LLM text and structured columns: prompts rendered per column (vectorised), generation on a backend, every
structured output re-validated, invalid rows retried, then quarantined with the reason.

Backends:
  embedded  the local transformers model (SmolLM2-135M by default); structured output by jump-forward decoding
            (`json_decoding`) for flat object schemas, by outlines for anything else;
  outlines  outlines 1.x `Generator` over the local model, compiled once per column and reused;
  openai    any OpenAI-compatible server (`response_format: json_schema`), e.g. `vllm serve`;
  vllm      in-process vLLM with structured outputs, imported only when selected.

Why re-validate: outlines' default backend silently drops `pattern` when `maxLength`/`minLength` is also set and does
not enforce integer `minimum`/`maximum`; a server may ignore `response_format`. The constraint is a speed-up, the
jsonschema (and pydantic) check is the contract.

The model is not loaded here: `LLMRunner(load_model)` takes a loader (the CLI passes `training.model.load_model`), so
`generators` does not import the training stage.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Callable

import polars as pl

from generators.expressions import compile_template
from generators.json_decoding import JumpForwardDecoder, UnsupportedSchema, plan_schema
from generators.user_code import resolve


class LLMError(RuntimeError):
    """A backend could not be used (not installed, unreachable); raised, never turned into empty values."""


def column_schema(col) -> tuple[dict, Any]:
    """(JSON Schema, pydantic model or None) of a structured column."""
    if col.model:
        model = resolve(col.model, f"column {col.name}.model")
        return model.model_json_schema(), model
    return col.json_schema, None


def validate_output(text: str, schema: dict, model: Any = None) -> tuple[Any, str | None]:
    """(parsed object, None) or (None, reason)."""
    from jsonschema import Draft202012Validator

    try:
        obj = json.loads(text)
    except ValueError as exc:
        return None, f"not JSON ({exc.msg} at {exc.pos}): {text[:80]!r}"
    err = next(iter(Draft202012Validator(schema).iter_errors(obj)), None)
    if err is not None:
        return None, f"schema: {'/'.join(map(str, err.path)) or '$'}: {err.message}"
    if model is not None:
        try:
            model.model_validate(obj)
        except Exception as exc:  # noqa: BLE001 - pydantic ValidationError
            return None, f"pydantic {model.__name__}: {str(exc).splitlines()[1:3]}"
    return obj, None


def structured_system(schema: dict, extra: str | None) -> str:
    props = schema.get("properties", {})
    fields = ", ".join(f"{k} ({v.get('type', 'value')})" for k, v in props.items())
    base = f"Reply with one JSON object with the fields: {fields}. JSON schema: {json.dumps(schema)}"
    return (extra + "\n" + base) if extra else base


def _seed_for(seed: int, prompt: str, attempt: int) -> int:
    return int.from_bytes(hashlib.blake2b(f"{seed}:{attempt}:{prompt}".encode(), digest_size=8).digest(), "little") >> 1


class LLMRunner:
    """Runs LLM columns. One instance per generation run: loaded models, compiled generators and vocabulary masks
    are reused across batches and columns."""

    def __init__(self, load_model: Callable[[str], tuple[Any, Any]] | None = None, model: Any = None,
                 tokenizer: Any = None):
        self._load = load_model
        self._models: dict[str, tuple[Any, Any]] = {}
        if model is not None:
            self._models["default"] = (model, tokenizer)
        self._decoders: dict[str, JumpForwardDecoder] = {}
        self._outlines: dict[tuple, Any] = {}
        self.stats: dict[str, int] = {"calls": 0, "retries": 0, "invalid": 0}

    def model(self, name: str):
        if name not in self._models:
            if self._load is None:
                raise LLMError(f"model {name!r} is not loaded and no loader was given")
            self._models[name] = self._load(name)
        return self._models[name]

    # ------------------------------------------------------------------------------------------------ entry
    def run_column(self, col, frame: pl.DataFrame, seed: int = 0) -> tuple[list[str | None], list[str | None]]:
        prompts = frame.select(compile_template(col.prompt)).to_series().to_list()
        systems = (frame.select(compile_template(col.system)).to_series().to_list() if col.system
                   else [None] * frame.height)
        if col.kind == "llm_text":
            outs = self._text(col, prompts, systems)
            return outs, [None if o.strip() else "empty output" for o in outs]
        schema, pmodel = column_schema(col)
        values: list[str | None] = [None] * len(prompts)
        reasons: list[str | None] = ["not generated"] * len(prompts)
        todo = list(range(len(prompts)))
        for attempt in range(col.max_retries + 1):
            if not todo:
                break
            if attempt:
                self.stats["retries"] += len(todo)
            outs = self._structured(col, schema, [prompts[i] for i in todo], [systems[i] for i in todo], seed, attempt)
            still = []
            for i, text in zip(todo, outs):
                obj, why = validate_output(text, schema, pmodel)
                if why is None:
                    values[i] = json.dumps(obj, ensure_ascii=False)
                    reasons[i] = None
                else:
                    reasons[i] = f"invalid after {attempt + 1} attempt(s): {why}"
                    still.append(i)
            todo = still
        self.stats["invalid"] += len(todo)
        return values, reasons

    # ------------------------------------------------------------------------------------------------ text
    def _messages(self, system: str | None, prompt: str) -> list[dict]:
        return ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]

    def _text(self, col, prompts: list[str], systems: list[str | None]) -> list[str]:
        b = col.backend
        self.stats["calls"] += len(prompts)
        if b.kind == "openai":
            return [self._openai(b, self._messages(s, p), col.max_new_tokens, None) for p, s in zip(prompts, systems)]
        if b.kind == "vllm":
            return self._vllm(b, [self._messages(s, p) for p, s in zip(prompts, systems)], col.max_new_tokens, None)
        import torch

        model, tok = self.model(b.model)
        outs: list[str] = []
        tok.padding_side = "left"
        for start in range(0, len(prompts), b.batch_size):
            chunk = [tok.apply_chat_template(self._messages(s, p), add_generation_prompt=True, tokenize=False)
                     for p, s in zip(prompts[start:start + b.batch_size], systems[start:start + b.batch_size])]
            enc = tok(chunk, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
            with torch.no_grad():
                gen = model.generate(**enc, max_new_tokens=col.max_new_tokens, do_sample=False, temperature=None,
                                     top_p=None, top_k=None, pad_token_id=tok.pad_token_id)
            outs.extend(tok.decode(g[enc["input_ids"].shape[1]:], skip_special_tokens=True).strip() for g in gen)
        return outs

    # ------------------------------------------------------------------------------------------------ structured
    def _structured(self, col, schema: dict, prompts: list[str], systems: list[str | None], seed: int,
                    attempt: int) -> list[str]:
        b = col.backend
        self.stats["calls"] += len(prompts)
        msgs = [self._messages(structured_system(schema, s), p) for p, s in zip(prompts, systems)]
        if b.kind == "openai":
            return [self._openai(b, m, col.max_new_tokens, schema) for m in msgs]
        if b.kind == "vllm":
            return self._vllm(b, msgs, col.max_new_tokens, schema)
        model, tok = self.model(b.model)
        if b.kind == "embedded":
            try:
                plans = plan_schema(schema)
            except UnsupportedSchema:
                plans = None
            if plans is not None:
                return self._jump_forward(b.model, model, tok, plans, msgs, prompts, seed, attempt)
        return self._outlines_generate(col, b.model, model, tok, schema, msgs, attempt, seed)

    def decoder(self, name: str, model: Any, tok: Any) -> JumpForwardDecoder:
        if name not in self._decoders:
            self._decoders[name] = JumpForwardDecoder(model, tok)
        return self._decoders[name]

    def _jump_forward(self, name, model, tok, plans, msgs, prompts, seed, attempt) -> list[str]:
        import torch

        dec = self.decoder(name, model, tok)
        outs = []
        with torch.no_grad():
            for m, p in zip(msgs, prompts):
                ids = tok.apply_chat_template(m, add_generation_prompt=True, tokenize=True)
                ids = list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)
                gen = None
                if attempt:
                    gen = torch.Generator().manual_seed(_seed_for(seed, p, attempt))
                outs.append(dec.decode(ids, plans, gen))
        return outs

    def _outlines_generate(self, col, name, model, tok, schema, msgs, attempt, seed) -> list[str]:
        import outlines
        import torch
        from outlines.types import JsonSchema

        key = (name, json.dumps(schema, sort_keys=True))
        if key not in self._outlines:
            om = outlines.from_transformers(model, tok)
            self._outlines[key] = outlines.Generator(om, JsonSchema(json.dumps(schema)))
        gen = self._outlines[key]
        outs = []
        for m in msgs:
            prompt = tok.apply_chat_template(m, add_generation_prompt=True, tokenize=False)
            kwargs: dict[str, Any] = {"max_new_tokens": col.max_new_tokens}
            if attempt:
                torch.manual_seed(_seed_for(seed, prompt, attempt))
                kwargs.update(do_sample=True, temperature=0.8)
            outs.append(gen(prompt, **kwargs))
        return outs

    # ------------------------------------------------------------------------------------------------ remote
    def _openai(self, b, messages: list[dict], max_tokens: int, schema: dict | None) -> str:
        import urllib.error
        import urllib.request

        if not b.base_url:
            raise LLMError("backend openai: base_url is required (e.g. http://localhost:8000/v1)")
        body: dict[str, Any] = {"model": b.model, "messages": messages, "max_tokens": max_tokens, "temperature": 0}
        if schema is not None:
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "row", "schema": schema, "strict": True}}
        headers = {"Content-Type": "application/json"}
        if b.api_key_env:
            key = os.environ.get(b.api_key_env)
            if not key:
                raise LLMError(f"backend openai: environment variable {b.api_key_env} is not set")
            headers["Authorization"] = f"Bearer {key}"
        req = urllib.request.Request(b.base_url.rstrip("/") + "/chat/completions", data=json.dumps(body).encode(),
                                     headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                data = json.loads(r.read())
        except (urllib.error.URLError, TimeoutError) as exc:
            raise LLMError(f"backend openai at {b.base_url}: {exc}") from exc
        return data["choices"][0]["message"].get("content") or ""

    def _vllm(self, b, msgs: list[list[dict]], max_tokens: int, schema: dict | None) -> list[str]:
        try:
            import vllm
        except ImportError as exc:
            raise LLMError("backend vllm: vllm is not installed (pip install 'rlvr-studio[vllm]' on a GPU machine)") from exc
        key = ("vllm", b.model)
        if key not in self._outlines:
            self._outlines[key] = vllm.LLM(model=b.model)
        llm = self._outlines[key]
        params: dict[str, Any] = {"max_tokens": max_tokens, "temperature": 0}
        if schema is not None:
            try:
                from vllm.sampling_params import StructuredOutputsParams
                params["structured_outputs"] = StructuredOutputsParams(json=schema)
            except ImportError:
                from vllm.sampling_params import GuidedDecodingParams
                params["guided_decoding"] = GuidedDecodingParams(json=schema)
        outs = llm.chat(msgs, vllm.SamplingParams(**params))
        return [o.outputs[0].text for o in outs]
