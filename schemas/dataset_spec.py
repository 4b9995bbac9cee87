"""The dataset spec: tables of typed columns, their relations, constraints, splits and validators.

Why one pydantic model for both YAML and the Python builder: the engine, the validator (`rlvr validate`), the
spec hash in a dataset's manifest and the studio all read the same object, so a spec means the same thing however
it was written. Unknown keys are errors (a typo such as `weigths` must not silently fall back to a default).

Expressions (`expr`, `when`, `where`, constraint sides) are strings. By default they are SQL expressions as polars
parses them (`priority = 'high'`, `estimate_hours * 60`, `CASE WHEN ... END`); a `py:` prefix takes a polars
Python expression instead (`py:pl.col("title").str.len_chars()`), evaluated with only `pl`, `col`, `lit` and
`when` in scope. Either way it is compiled once per column and evaluated over whole columns.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

NAME_RE = r"^[A-Za-z_][A-Za-z0-9_]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Condition(_Strict):
    """Alternative params used where `when` holds (the first matching condition wins; the column's own params
    apply to every other row)."""

    when: str = Field(min_length=1)
    params: dict[str, Any]


class _ColumnBase(_Strict):
    name: str = Field(pattern=NAME_RE)
    description: str = ""
    drop: bool = Field(False, description="a helper column: generated and usable by others, not written")
    conditions: list[Condition] = Field(default_factory=list)

    # params a condition may override; each sampler lists its own
    PARAMS: ClassVar[tuple[str, ...]] = ()

    @model_validator(mode="after")
    def _check_conditions(self):
        for i, cond in enumerate(self.conditions):
            unknown = set(cond.params) - set(self.PARAMS)
            if unknown:
                raise ValueError(
                    f"conditions[{i}].params: {sorted(unknown)} not a param of kind {self.kind!r} "  # type: ignore[attr-defined]
                    f"(expected some of {list(self.PARAMS)})"
                )
            if not self.PARAMS:
                raise ValueError(f"conditions: kind {self.kind!r} takes no conditional params")  # type: ignore[attr-defined]
            # validate the merged params by building the variant
            merged = self.model_dump(exclude={"conditions"}) | cond.params
            try:
                type(self).model_validate(merged)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(x) for x in first["loc"])
                msg = first["msg"].removeprefix("Value error, ")
                raise ValueError(f"conditions[{i}].params: {where + ': ' if where else ''}{msg}") from None
        return self

    def with_params(self, params: dict[str, Any]) -> "_ColumnBase":
        """This column with a condition's params applied (validated)."""
        return type(self).model_validate(self.model_dump(exclude={"conditions"}) | params)


# ----------------------------------------------------------------------------------------------------- samplers
class CategoryColumn(_ColumnBase):
    kind: Literal["category"] = "category"
    values: list[Any] = Field(min_length=1)
    weights: list[float] | None = None
    PARAMS: ClassVar[tuple[str, ...]] = ("values", "weights")

    @model_validator(mode="after")
    def _weights(self):
        if self.weights is not None:
            if len(self.weights) != len(self.values):
                raise ValueError(f"weights: expected {len(self.values)} weights (one per value), got {len(self.weights)}")
            if any(w < 0 for w in self.weights) or sum(self.weights) <= 0:
                raise ValueError("weights: expected non-negative numbers with a positive sum")
        return self


class SubcategoryColumn(_ColumnBase):
    kind: Literal["subcategory"] = "subcategory"
    parent: str = Field(pattern=NAME_RE)
    values: dict[str, list[Any]] = Field(min_length=1, description="the values allowed under each parent value")
    weights: dict[str, list[float]] | None = None

    @model_validator(mode="after")
    def _check(self):
        for k, v in self.values.items():
            if not v:
                raise ValueError(f"values.{k}: expected at least one value")
        for k, w in (self.weights or {}).items():
            if k not in self.values:
                raise ValueError(f"weights.{k}: no such parent value in values")
            if len(w) != len(self.values[k]):
                raise ValueError(f"weights.{k}: expected {len(self.values[k])} weights, got {len(w)}")
        return self


class UniformColumn(_ColumnBase):
    kind: Literal["uniform"] = "uniform"
    low: float
    high: float
    integer: bool = False
    decimals: int | None = Field(None, ge=0, le=12)
    PARAMS: ClassVar[tuple[str, ...]] = ("low", "high")

    @model_validator(mode="after")
    def _range(self):
        if self.high < self.low:
            raise ValueError(f"high: expected high >= low ({self.low}), got {self.high}")
        return self


class GaussianColumn(_ColumnBase):
    kind: Literal["gaussian"] = "gaussian"
    mean: float = 0.0
    std: float = Field(1.0, ge=0)
    decimals: int | None = Field(None, ge=0, le=12)
    PARAMS: ClassVar[tuple[str, ...]] = ("mean", "std")


class BernoulliColumn(_ColumnBase):
    kind: Literal["bernoulli"] = "bernoulli"
    p: float = Field(ge=0, le=1)
    PARAMS: ClassVar[tuple[str, ...]] = ("p",)


class BinomialColumn(_ColumnBase):
    kind: Literal["binomial"] = "binomial"
    n: int = Field(ge=0)
    p: float = Field(ge=0, le=1)
    PARAMS: ClassVar[tuple[str, ...]] = ("n", "p")


class PoissonColumn(_ColumnBase):
    kind: Literal["poisson"] = "poisson"
    lam: float = Field(ge=0)
    PARAMS: ClassVar[tuple[str, ...]] = ("lam",)


Unit = Literal["s", "m", "h", "D"]


class DatetimeColumn(_ColumnBase):
    kind: Literal["datetime"] = "datetime"
    start: str = Field(description="ISO date or datetime")
    end: str
    unit: Unit = "s"
    PARAMS: ClassVar[tuple[str, ...]] = ("start", "end")

    @model_validator(mode="after")
    def _range(self):
        from datetime import datetime

        try:
            s, e = datetime.fromisoformat(self.start), datetime.fromisoformat(self.end)
        except ValueError as exc:
            raise ValueError(f"start/end: expected ISO dates such as 2026-01-31 or 2026-01-31T09:00 ({exc})") from exc
        if e < s:
            raise ValueError(f"end: expected end >= start ({self.start}), got {self.end}")
        return self


class TimedeltaColumn(_ColumnBase):
    """A datetime `reference` column plus a uniform offset in [low, high] units."""

    kind: Literal["timedelta"] = "timedelta"
    reference: str = Field(pattern=NAME_RE)
    low: float
    high: float
    unit: Unit = "D"
    PARAMS: ClassVar[tuple[str, ...]] = ("low", "high")

    @model_validator(mode="after")
    def _range(self):
        if self.high < self.low:
            raise ValueError(f"high: expected high >= low ({self.low}), got {self.high}")
        return self


class UuidColumn(_ColumnBase):
    kind: Literal["uuid"] = "uuid"
    prefix: str = ""


class SequenceColumn(_ColumnBase):
    """A running id: `prefix` + zero-padded row number (global across batches, so ids stay unique)."""

    kind: Literal["sequence"] = "sequence"
    prefix: str = ""
    start: int = 1
    width: int = Field(0, ge=0)


PersonField = Literal["name", "first_name", "last_name", "email", "company", "locale", "job"]


class PersonColumn(_ColumnBase):
    """A person field from Faker pools. Columns with the same `person` key describe the same person per row,
    so `name` and `email` agree."""

    kind: Literal["person"] = "person"
    field: PersonField
    person: str = "person"
    locales: list[str] = Field(default_factory=lambda: ["en_US"], min_length=1)
    email_domain: str | None = Field(None, description="default: derived from the company")


# ---------------------------------------------------------------------------------------------- relations/derived
class ForeignKeyColumn(_ColumnBase):
    """A value of `table.column`, drawn uniformly from the parent rows that pass `where` and, for each key in
    `match`, whose parent column equals this row's column (`match: {team: team}`: an assignee from the task's team)."""

    kind: Literal["foreign_key"] = "foreign_key"
    table: str = Field(pattern=NAME_RE)
    column: str = Field(pattern=NAME_RE)
    where: str | None = None
    match: dict[str, str] = Field(default_factory=dict, description="parent column -> this table's column")


class LookupColumn(_ColumnBase):
    """Copy `column` of the parent row that foreign key column `via` points at (`team` of the chosen project)."""

    kind: Literal["lookup"] = "lookup"
    via: str = Field(pattern=NAME_RE)
    column: str = Field(pattern=NAME_RE)


class ExpressionColumn(_ColumnBase):
    kind: Literal["expression"] = "expression"
    expr: str = Field(min_length=1)
    dtype: Literal["int", "float", "str", "bool", "datetime", "date"] | None = None


class TemplateColumn(_ColumnBase):
    """`"{title} ({priority})"`: `{name}` placeholders over other columns, compiled once into a concat."""

    kind: Literal["template"] = "template"
    template: str


class CustomColumn(_ColumnBase):
    """`function: "package.module:fn"`, called once per batch as fn(frame, rng) -> a sequence of len(frame)."""

    kind: Literal["custom"] = "custom"
    function: str = Field(pattern=r"^[\w.]+:\w+$")
    depends_on: list[str] = Field(default_factory=list)
    dtype: Literal["int", "float", "str", "bool"] | None = None


class LLMBackendSpec(_Strict):
    kind: Literal["embedded", "outlines", "openai", "vllm"] = "embedded"
    model: str = "default"
    base_url: str | None = None
    api_key_env: str | None = Field(None, description="name of the environment variable holding the key")
    batch_size: int = Field(8, ge=1)


class LLMTextColumn(_ColumnBase):
    kind: Literal["llm_text"] = "llm_text"
    prompt: str = Field(min_length=1)
    system: str | None = None
    max_new_tokens: int = Field(64, ge=1)
    backend: LLMBackendSpec = Field(default_factory=LLMBackendSpec)


class LLMStructuredColumn(_ColumnBase):
    """JSON output matching `json_schema` (or the pydantic model `model: "pkg.mod:Class"`), re-validated after
    generation, retried up to `max_retries`; rows still invalid go to the quarantine file with the reason."""

    kind: Literal["llm_structured"] = "llm_structured"
    prompt: str = Field(min_length=1)
    system: str | None = None
    json_schema: dict[str, Any] | None = None
    model: str | None = Field(None, pattern=r"^[\w.]+:\w+$")
    max_new_tokens: int = Field(96, ge=1)
    max_retries: int = Field(2, ge=0)
    backend: LLMBackendSpec = Field(default_factory=LLMBackendSpec)

    @model_validator(mode="after")
    def _one_schema(self):
        if (self.json_schema is None) == (self.model is None):
            raise ValueError("expected exactly one of json_schema or model")
        return self


Column = Annotated[
    Union[
        CategoryColumn, SubcategoryColumn, UniformColumn, GaussianColumn, BernoulliColumn, BinomialColumn,
        PoissonColumn, DatetimeColumn, TimedeltaColumn, UuidColumn, SequenceColumn, PersonColumn,
        ForeignKeyColumn, LookupColumn, ExpressionColumn, TemplateColumn, CustomColumn, LLMTextColumn,
        LLMStructuredColumn,
    ],
    Field(discriminator="kind"),
]

COLUMN_KINDS = (
    "category", "subcategory", "uniform", "gaussian", "bernoulli", "binomial", "poisson", "datetime", "timedelta",
    "uuid", "sequence", "person", "foreign_key", "lookup", "expression", "template", "custom", "llm_text",
    "llm_structured",
)

# ------------------------------------------------------------------------------------------- table-level rules
_CONSTRAINT_RE = re.compile(r"^\s*([A-Za-z_]\w*)\s*(<=|>=|<|>|==|!=)\s*(.+?)\s*$")
Op = Literal["<", "<=", ">", ">=", "==", "!="]


class Constraint(_Strict):
    """`column op other_column` or `column op value`. Written in YAML as a short string (`due_at > created_at`,
    `budget >= 0`) or as a mapping. Enforced by resampling only the violating rows."""

    column: str = Field(pattern=NAME_RE)
    op: Op
    other: str | None = Field(None, pattern=NAME_RE)
    value: float | str | None = None
    max_rounds: int = Field(50, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _parse_string(cls, data: Any) -> Any:
        if isinstance(data, str):
            m = _CONSTRAINT_RE.match(data)
            if not m:
                raise ValueError(f"expected 'column OP column' or 'column OP number' (OP one of < <= > >= == !=), got {data!r}")
            col, op, rhs = m.groups()
            if re.fullmatch(r"[A-Za-z_]\w*", rhs):
                return {"column": col, "op": op, "other": rhs}
            try:
                val: Any = float(rhs)
            except ValueError:
                val = rhs.strip("'\"")
            return {"column": col, "op": op, "value": val}
        return data

    @model_validator(mode="after")
    def _one_side(self):
        if (self.other is None) == (self.value is None):
            raise ValueError("expected exactly one of other (a column) or value (a constant)")
        return self

    def label(self) -> str:
        rhs = self.other if self.other is not None else repr(self.value)
        return f"{self.column} {self.op} {rhs}"


class Validator(_Strict):
    """Check rows after generation. `jsonschema`/`pydantic` validate the JSON in `column`; `callable` is
    `function: "pkg.mod:fn"` called as fn(frame) -> bool sequence. Failing rows go to quarantine (`on_fail:
    quarantine`) or are only counted (`report`)."""

    name: str = Field(pattern=NAME_RE)
    kind: Literal["jsonschema", "pydantic", "callable"]
    column: str | None = None
    json_schema: dict[str, Any] | None = None
    model: str | None = Field(None, pattern=r"^[\w.]+:\w+$")
    function: str | None = Field(None, pattern=r"^[\w.]+:\w+$")
    on_fail: Literal["quarantine", "report"] = "quarantine"

    @model_validator(mode="after")
    def _needs(self):
        need = {"jsonschema": ("column", "json_schema"), "pydantic": ("column", "model"), "callable": ("function",)}
        for f in need[self.kind]:
            if getattr(self, f) is None:
                raise ValueError(f"{f}: required for a {self.kind} validator")
        return self


class SplitSpec(_Strict):
    """Adds a `column` (default `split`) with train/validation/test. `stratify_by` keeps each stratum's ratios;
    `group_by` keeps all rows of a group in one split (hash of the group value: stable across batches and
    runs); `held_out` sends the listed values of a column to one split, whatever the ratios say."""

    column: str = Field("split", pattern=NAME_RE)
    ratios: dict[Literal["train", "validation", "test"], float] = Field(
        default_factory=lambda: {"train": 0.8, "validation": 0.1, "test": 0.1})
    stratify_by: str | None = None
    group_by: str | None = None
    held_out: dict[str, list[Any]] = Field(default_factory=dict, description="column -> values sent to held_out_split")
    held_out_split: Literal["train", "validation", "test"] = "test"

    @field_validator("ratios")
    @classmethod
    def _ratios(cls, v: dict[str, float]) -> dict[str, float]:
        if not v or any(r < 0 for r in v.values()) or abs(sum(v.values()) - 1.0) > 1e-6:
            raise ValueError(f"expected non-negative ratios summing to 1, got {v}")
        return v

    @model_validator(mode="after")
    def _exclusive(self):
        if self.stratify_by and self.group_by:
            raise ValueError("stratify_by and group_by: choose one (a group cannot be split across strata quotas)")
        return self


class TableSpec(_Strict):
    rows: int | None = Field(None, ge=1, description="fixed row count; None = the count asked for (-n)")
    columns: list[Column] = Field(min_length=1)
    constraints: list[Constraint] = Field(default_factory=list)
    validators: list[Validator] = Field(default_factory=list)
    split: SplitSpec | None = None
    dedup_by: list[str] = Field(default_factory=list, description="drop later rows whose key repeats an earlier one")

    @model_validator(mode="after")
    def _names(self):
        seen: set[str] = set()
        for i, c in enumerate(self.columns):
            if c.name in seen:
                raise ValueError(f"columns[{i}].name: {c.name!r} is defined twice")
            seen.add(c.name)
        return self


class DatasetSpec(_Strict):
    """The whole dataset: named tables (a single table or a world of related ones)."""

    name: str = Field("dataset", pattern=r"^[\w.-]+$")
    description: str = ""
    seed: int = 0
    batch_size: int = Field(100_000, ge=1, description="rows per batch and per Parquet part")
    tables: dict[str, TableSpec] = Field(min_length=1)

    @field_validator("tables")
    @classmethod
    def _table_names(cls, v: dict[str, TableSpec]) -> dict[str, TableSpec]:
        for name in v:
            if not re.fullmatch(NAME_RE, name):
                raise ValueError(f"table name {name!r}: expected letters, digits and _ (not starting with a digit)")
        return v
