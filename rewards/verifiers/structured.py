"""JSON Schema and pydantic validity verifiers for structured outputs.

Strict JSON: the extracted text must be one JSON value and nothing else (no trailing prose, no repair). Schemas
are checked with `jsonschema` (Draft 2020-12 unless the schema says otherwise); formats are checked too.
"""

from __future__ import annotations

import importlib
import json
from typing import Any, ClassVar

from pydantic import BaseModel, ValidationError

from rewards.extraction import Extraction, extract
from rewards.verifiers.base import Verifier, verdict
from schemas.rewards import RewardResult


def _parse_json(completion: Any, extraction: Extraction) -> tuple[Any, str | None]:
    text, why = extract(completion, extraction)
    if text is None:
        return None, why
    try:
        return json.loads(text.strip()), None
    except ValueError as exc:
        return None, f"not valid JSON ({str(exc)[:100]})"


class JsonSchemaMatch(Verifier):
    """Passes when the output parses as JSON and validates against `schema` (or the row's `schema_field`); with
    `reference_field`, the parsed value must also equal the row's reference (parsed if it is a JSON string)."""

    name: ClassVar[str] = "json_schema"
    schema_: dict[str, Any] | None = None
    schema_field: str | None = None
    reference_field: str | None = None
    extraction: Extraction = Extraction(method="whole")

    def __init__(self, schema: dict[str, Any] | None = None, **kw: Any) -> None:
        super().__init__(schema_=schema, **kw)

    def model_post_init(self, _: Any) -> None:
        import jsonschema

        if (self.schema_ is None) == (self.schema_field is None):
            raise ValueError("JsonSchemaMatch needs exactly one of schema= or schema_field=")
        if self.schema_ is not None:
            jsonschema.validators.validator_for(self.schema_).check_schema(self.schema_)

    def verify(self, completion: Any, fields: dict[str, Any]) -> RewardResult:
        import jsonschema

        schema = self.schema_
        if schema is None:
            schema = self.field(fields, self.schema_field or "")
            if isinstance(schema, str):
                schema = json.loads(schema)
        value, why = _parse_json(completion, self.extraction)
        if why:
            return verdict(False, f"format: {why}", format_ok=0.0, schema_valid=0.0)
        cls = jsonschema.validators.validator_for(schema)
        errors = sorted(cls(schema, format_checker=cls.FORMAT_CHECKER).iter_errors(value), key=lambda e: e.path)
        if errors:
            e = errors[0]
            where = "/".join(str(p) for p in e.absolute_path) or "(root)"
            return verdict(False, f"schema: at {where}: {e.message[:120]}", format_ok=1.0, schema_valid=0.0,
                           schema_errors=len(errors))
        if self.reference_field:
            ref = self.field(fields, self.reference_field)
            if isinstance(ref, str):
                ref = json.loads(ref)
            if value != ref:
                return verdict(False, "valid, but differs from the reference", format_ok=1.0, schema_valid=1.0)
        return verdict(True, "valid", format_ok=1.0, schema_valid=1.0)


class PydanticMatch(Verifier):
    """Passes when the output parses as JSON that validates as the pydantic model `model` ("module:Class"; a class
    may be given and is stored by reference so the version and the sandbox can find it)."""

    name: ClassVar[str] = "pydantic_model"
    model: str
    strict: bool = False
    extraction: Extraction = Extraction(method="whole")

    def __init__(self, model: str | type[BaseModel], **kw: Any) -> None:
        if isinstance(model, type):
            model = f"{model.__module__}:{model.__qualname__}"
        super().__init__(model=model, **kw)

    def model_post_init(self, _: Any) -> None:
        self._resolve()

    def _resolve(self) -> type[BaseModel]:
        mod, _, qual = self.model.partition(":")
        obj: Any = importlib.import_module(mod)
        for part in qual.split("."):
            obj = getattr(obj, part)
        if not (isinstance(obj, type) and issubclass(obj, BaseModel)):
            raise TypeError(f"{self.model} is not a pydantic model class")
        return obj

    def verify(self, completion: Any, fields: dict[str, Any]) -> RewardResult:
        value, why = _parse_json(completion, self.extraction)
        if why:
            return verdict(False, f"format: {why}", format_ok=0.0, schema_valid=0.0)
        try:
            self._resolve().model_validate(value, strict=self.strict)
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(x) for x in first["loc"]) or "(root)"
            return verdict(False, f"schema: at {loc}: {first['msg']}", format_ok=1.0, schema_valid=0.0,
                           schema_errors=exc.error_count())
        return verdict(True, "valid", format_ok=1.0, schema_valid=1.0)
