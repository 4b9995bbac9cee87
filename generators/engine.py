"""Generating one batch of a table: columns in dependency order, conditional params, constraints, validators,
split. Everything is columnar; the only per-row Python is validators and LLM calls, which are per-row by nature.

Reproducibility: every random draw comes from a numpy Generator seeded by (spec seed, table, batch, column,
branch/round), so a batch's content depends only on the spec, the seed and the batch's position, never on what ran
before in the process. That is what makes a killed-and-resumed run byte-identical to an uninterrupted one.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable

import numpy as np
import polars as pl

from generators import relations, samplers
from generators.expressions import compile_expr, compile_template
from generators.graph import check_spec, column_deps, descendants, table_order
from generators.persons import sample_person
from generators.user_code import UserCodeError, call, resolve
from schemas.dataset_spec import Constraint, DatasetSpec, SplitSpec, TableSpec

ROW = "__row"
REASON = "_quarantine_reason"
STOCHASTIC = {"category", "subcategory", "uniform", "gaussian", "bernoulli", "binomial", "poisson", "datetime",
              "timedelta", "uuid", "person", "foreign_key", "custom"}
DTYPES = {"int": pl.Int64, "float": pl.Float64, "str": pl.String, "bool": pl.Boolean,
          "datetime": pl.Datetime("us"), "date": pl.Date}


class GenerationError(RuntimeError):
    """Generation could not satisfy the spec (an unsatisfiable constraint, a bad value); the message says where."""


class ConstraintUnsatisfiable(GenerationError):
    pass


def stable_hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=4).digest(), "little")


def rng_for(seed: int, table: str, batch: int, stream: str, extra: int = 0) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, stable_hash(table), batch, stable_hash(stream), extra]))


@dataclass
class TableRuntime:
    """What generating a table needs: its spec, column order, parent tables and an optional LLM runner."""

    name: str
    spec: TableSpec
    order: list[str]
    seed: int
    parents: dict[str, pl.DataFrame] = field(default_factory=dict)
    llm: Any = None  # generators.llm.LLMRunner, created on demand
    llm_factory: Callable[[], Any] | None = None

    def __post_init__(self) -> None:
        self.cols = {c.name: c for c in self.spec.columns}
        self.targets = {i: constraint_targets(self.spec, self.order, c) for i, c in enumerate(self.spec.constraints)}

    def get_llm(self):
        if self.llm is None:
            if self.llm_factory is None:
                raise GenerationError(f"table {self.name}: LLM columns need a model provider (rlvr generate wires the "
                                      "embedded model; in Python pass llm=generators.llm.LLMRunner(...))")
            self.llm = self.llm_factory()
        return self.llm


def runtimes(spec: DatasetSpec) -> dict[str, TableRuntime]:
    orders = check_spec(spec)
    return {t: TableRuntime(t, spec.tables[t], orders[t], spec.seed) for t in table_order(spec)}


# --------------------------------------------------------------------------------------------------- one column
def _plain(rt: TableRuntime, col, frame: pl.DataFrame, rng: np.random.Generator, cache: dict,
           batch: int, extra: int) -> tuple[pl.Series, pl.Series | None]:
    n = frame.height
    k = col.kind
    if k == "category":
        return samplers.sample_category(col.values, col.weights, n, rng), None
    if k == "subcategory":
        return samplers.sample_subcategory(col, frame[col.parent], n, rng), None
    if k == "uniform":
        return samplers.sample_uniform(col, n, rng), None
    if k == "gaussian":
        return samplers.sample_gaussian(col, n, rng), None
    if k == "bernoulli":
        return samplers.sample_bernoulli(col, n, rng), None
    if k == "binomial":
        return samplers.sample_binomial(col, n, rng), None
    if k == "poisson":
        return samplers.sample_poisson(col, n, rng), None
    if k == "datetime":
        return samplers.sample_datetime(col, n, rng), None
    if k == "timedelta":
        return samplers.sample_timedelta(col, frame[col.reference], n, rng), None
    if k == "uuid":
        return samplers.sample_uuid(col, n, rng), None
    if k == "sequence":
        rows = frame[ROW] + col.start
        if not col.prefix and not col.width:
            return rows, None
        text = rows.cast(pl.String)
        return (col.prefix + (text.str.zfill(col.width) if col.width else text)), None
    if k == "person":
        key = ("person", col.person)
        if key not in cache:
            prng = rng_for(rt.seed, rt.name, batch, f"person:{col.person}", extra)
            group = [c for c in rt.spec.columns if c.kind == "person" and c.person == col.person]
            domain = next((c.email_domain for c in group if c.email_domain), None)
            cache[key] = sample_person(group[0].locales, rt.seed, n, prng, domain)
        return cache[key][col.field], None
    if k == "foreign_key":
        return relations.sample_foreign_key(col, frame, rt.parents[col.table], n, rng), None
    if k == "lookup":
        fk = rt.cols[col.via]
        return relations.lookup(col, fk, frame, rt.parents[fk.table]), None
    if k == "expression":
        try:
            s = frame.select(compile_expr(col.expr).alias(col.name)).to_series()
        except Exception as exc:  # noqa: BLE001 - polars raises many kinds
            raise GenerationError(f"tables.{rt.name}.{col.name}: expression {col.expr!r} failed: {exc}") from exc
        if s.len() == 1 and n != 1:
            s = s.extend_constant(s[0], n - 1)
        return (s.cast(DTYPES[col.dtype]) if col.dtype else s), None
    if k == "template":
        return frame.select(compile_template(col.template)).to_series(), None
    if k == "custom":
        fn = resolve(col.function, f"tables.{rt.name}.{col.name}.function")
        user = frame.drop(ROW, strict=False)
        out = call(fn, f"custom column {rt.name}.{col.name} ({col.function})", user, rng)
        s = out if isinstance(out, pl.Series) else pl.Series(list(out) if not isinstance(out, np.ndarray) else out)
        if s.len() != n:
            raise UserCodeError(f"custom column {rt.name}.{col.name} ({col.function}): returned {s.len()} values "
                                f"for {n} rows")
        return (s.cast(DTYPES[col.dtype]) if col.dtype else s), None
    if k in ("llm_text", "llm_structured"):
        values, reasons = rt.get_llm().run_column(col, frame.drop(ROW, strict=False), seed=rt.seed)
        return pl.Series(values, dtype=pl.String), pl.Series(reasons, dtype=pl.String)
    raise GenerationError(f"column kind {k!r} has no sampler")


def sample_column(rt: TableRuntime, col, frame: pl.DataFrame, batch: int, extra: int = 0,
                  cache: dict | None = None) -> tuple[pl.Series, pl.Series | None]:
    """Values of `col` for every row of `frame`; conditional params are applied branch by branch (first match
    wins), each branch a single vectorised draw over its rows."""
    cache = {} if cache is None else cache
    rng = rng_for(rt.seed, rt.name, batch, col.name, extra)
    if not col.conditions or frame.height == 0:
        s, r = _plain(rt, col, frame, rng, cache, batch, extra)
        return s.alias(col.name), r
    chain = None
    for i, cond in enumerate(col.conditions, 1):
        chain = (pl.when(compile_expr(cond.when).fill_null(False)).then(pl.lit(i)) if chain is None
                 else chain.when(compile_expr(cond.when).fill_null(False)).then(pl.lit(i)))
    try:
        branch = frame.select(chain.otherwise(pl.lit(0)).alias("b")).to_series().to_numpy()
    except Exception as exc:  # noqa: BLE001
        raise GenerationError(f"tables.{rt.name}.{col.name}.conditions: {exc}") from exc
    parts, idx = [], []
    for b in range(len(col.conditions) + 1):
        rows = np.flatnonzero(branch == b)
        if rows.size == 0:
            continue
        variant = col if b == 0 else col.with_params(col.conditions[b - 1].params)
        brng = rng_for(rt.seed, rt.name, batch, col.name, extra * 1000 + b + 1)
        s, _ = _plain(rt, variant, frame[rows], brng, {}, batch, extra)
        parts.append(s.alias(col.name).to_frame())
        idx.append(rows)
    allv = pl.concat(parts, how="vertical_relaxed").to_series()
    order = np.argsort(np.concatenate(idx), kind="stable")
    return allv.gather(order), None


# ---------------------------------------------------------------------------------------------------- constraints
def constraint_targets(table: TableSpec, order: list[str], c: Constraint) -> list[str]:
    """The random columns to redraw when `c` fails: the constraint's column latest in generation order, or, when
    that one is derived (expression, template, lookup), the random columns it is computed from."""
    cols = {x.name: x for x in table.columns}
    names = [c.column] + ([c.other] if c.other else [])
    latest = max(names, key=order.index)
    out: list[str] = []
    todo = [latest]
    seen = set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if cols[n].kind in STOCHASTIC:
            out.append(n)
        else:
            todo.extend(column_deps(cols[n]))
    if not out and len(names) == 2:
        other = min(names, key=order.index)
        if cols[other].kind in STOCHASTIC:
            out.append(other)
    if not out:
        raise GenerationError(f"constraint {c.label()!r}: none of its columns is random, so resampling cannot fix it")
    return sorted(out, key=order.index)


def constraint_expr(c: Constraint, schema: dict[str, pl.DataType]) -> pl.Expr:
    """True where the constraint holds (null counts as not holding)."""
    lhs = pl.col(c.column)
    if c.other is not None:
        rhs = pl.col(c.other)
    else:
        v: Any = c.value
        dt = schema.get(c.column)
        if isinstance(v, str) and dt is not None and isinstance(dt, (pl.Datetime, pl.Date)):
            v = datetime.fromisoformat(v)
        rhs = pl.lit(v)
    op = {"<": lhs < rhs, "<=": lhs <= rhs, ">": lhs > rhs, ">=": lhs >= rhs, "==": lhs == rhs, "!=": lhs != rhs}
    return op[c.op].fill_null(False)


def enforce_constraints(rt: TableRuntime, frame: pl.DataFrame, batch: int) -> tuple[pl.DataFrame, dict]:
    """Redraw only the violating rows (their target columns and everything computed from them) until every
    constraint holds; after `max_rounds` an error names the constraint and the fraction still violating."""
    stats = {c.label(): 0 for c in rt.spec.constraints}
    if not rt.spec.constraints or frame.height == 0:
        return frame, stats
    max_rounds = max(c.max_rounds for c in rt.spec.constraints)
    for rnd in range(1, max_rounds + 1):
        any_bad = False
        for ci, c in enumerate(rt.spec.constraints):
            ok = frame.select(constraint_expr(c, frame.schema)).to_series()
            bad = np.flatnonzero(~ok.to_numpy())
            if bad.size == 0:
                continue
            any_bad = True
            if rnd > c.max_rounds:
                continue
            stats[c.label()] += int(bad.size)
            redo = descendants(rt.spec, set(rt.targets[ci]))
            sub = frame[bad]
            cache: dict = {}
            for name in rt.order:
                if name in redo:
                    s, _ = sample_column(rt, rt.cols[name], sub, batch, extra=rnd * 64 + ci + 1, cache=cache)
                    sub = sub.with_columns(s.alias(name))
            idx = pl.Series(bad)
            cols = []
            for name in rt.order:
                if name in redo:
                    full = frame[name].clone()
                    full.scatter(idx, sub[name].cast(full.dtype))
                    cols.append(full)
            frame = frame.with_columns(cols)
        if not any_bad:
            return frame, stats
    for c in rt.spec.constraints:
        ok = frame.select(constraint_expr(c, frame.schema)).to_series()
        frac = 1.0 - ok.mean()
        if frac > 0:
            raise ConstraintUnsatisfiable(
                f"tables.{rt.name}: constraint {c.label()!r} still fails for {frac:.1%} of rows after {c.max_rounds} "
                f"rounds of resampling {', '.join(rt.targets[rt.spec.constraints.index(c)])}; widen the "
                "distributions or drop the constraint")
    return frame, stats


# ---------------------------------------------------------------------------------------------------- validators
def run_validators(rt: TableRuntime, frame: pl.DataFrame) -> tuple[pl.Series, dict[str, dict[str, int]]]:
    """(reason per row or null, {validator: {checked, failed}}); only `on_fail: quarantine` validators set reasons."""
    import json

    reasons: list[str | None] = [None] * frame.height
    stats: dict[str, dict[str, int]] = {}
    for v in rt.spec.validators:
        where = f"tables.{rt.name}.validators.{v.name}"
        fails: list[str | None]
        if v.kind == "callable":
            fn = resolve(v.function, where)
            out = call(fn, f"validator {v.name} ({v.function})", frame.drop(ROW, strict=False))
            ok = list(out)
            if len(ok) != frame.height:
                raise UserCodeError(f"validator {v.name}: returned {len(ok)} values for {frame.height} rows")
            fails = [None if bool(x) else f"validator {v.name} returned False" for x in ok]
        else:
            values = frame[v.column].to_list()
            if v.kind == "jsonschema":
                from jsonschema import Draft202012Validator

                checker = Draft202012Validator(v.json_schema)

                def check(x: Any) -> str | None:
                    try:
                        obj = json.loads(x) if isinstance(x, str) else x
                    except ValueError as exc:
                        return f"not JSON ({exc})"
                    err = next(iter(checker.iter_errors(obj)), None)
                    return None if err is None else f"{'/'.join(map(str, err.path)) or '$'}: {err.message}"
            else:
                model = resolve(v.model, where)

                def check(x: Any) -> str | None:
                    try:
                        (model.model_validate_json(x) if isinstance(x, str) else model.model_validate(x))
                        return None
                    except Exception as exc:  # noqa: BLE001 - pydantic ValidationError or bad JSON
                        return str(exc).splitlines()[0] + ": " + " ".join(str(exc).splitlines()[1:3])
            fails = [f"validator {v.name} ({v.column}): {r}" if (r := check(x)) else None
                     if x is not None else f"validator {v.name} ({v.column}): value is null" for x in values]
        n_fail = sum(f is not None for f in fails)
        stats[v.name] = {"checked": frame.height, "failed": n_fail}
        if v.on_fail == "quarantine":
            reasons = [r or f for r, f in zip(reasons, fails)]
    return pl.Series(reasons, dtype=pl.String), stats


# ---------------------------------------------------------------------------------------------------- split
def _unit_hash(values: pl.Series, seed: int, salt: str) -> np.ndarray:
    h = values.cast(pl.String).fill_null("<null>").hash(seed=seed + stable_hash(salt)).to_numpy()
    return (h >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def assign_split(rt: TableRuntime, frame: pl.DataFrame, batch: int) -> pl.DataFrame:
    sp: SplitSpec = rt.spec.split
    names = list(sp.ratios)
    cum = np.cumsum([sp.ratios[k] for k in names])
    cum[-1] = 1.0 + 1e-12
    n = frame.height
    if sp.group_by:
        u = _unit_hash(frame[sp.group_by], rt.seed, f"{rt.name}:split")
        code = np.searchsorted(cum, u, side="right")
    elif sp.stratify_by:
        code = np.zeros(n, dtype=np.int64)
        rng = rng_for(rt.seed, rt.name, batch, "__split")
        strata = frame[sp.stratify_by].cast(pl.String).fill_null("<null>").to_numpy()
        for s in sorted(set(strata.tolist())):
            rows = np.flatnonzero(strata == s)
            rows = rows[rng.permutation(rows.size)]
            bounds = np.round(cum * rows.size).astype(np.int64)
            code[rows] = np.searchsorted(bounds, np.arange(rows.size), side="right")
    else:
        u = rng_for(rt.seed, rt.name, batch, "__split").random(n)
        code = np.searchsorted(cum, u, side="right")
    code = np.minimum(code, len(names) - 1)
    split = pl.Series(names).gather(code)
    for colname, vals in sp.held_out.items():
        mask = frame[colname].is_in(pl.Series(vals).cast(frame[colname].dtype, strict=False))
        split = pl.select(pl.when(mask).then(pl.lit(sp.held_out_split)).otherwise(split)).to_series()
    return frame.with_columns(split.alias(sp.column))


# ---------------------------------------------------------------------------------------------------- one batch
@dataclass
class BatchResult:
    frame: pl.DataFrame           # kept rows, helper columns still present (ROW, dropped columns)
    quarantine: pl.DataFrame      # rows set aside, with REASON
    resampled: dict[str, int]
    validators: dict[str, dict[str, int]]


def generate_batch(rt: TableRuntime, batch: int, n: int, row_offset: int) -> BatchResult:
    frame = pl.DataFrame({ROW: np.arange(row_offset, row_offset + n, dtype=np.int64)})
    reasons: pl.Series | None = None
    cache: dict = {}
    for name in rt.order:
        col = rt.cols[name]
        try:
            s, r = sample_column(rt, col, frame, batch, cache=cache)
        except (GenerationError, UserCodeError):
            raise
        except (ValueError, relations.RelationError) as exc:
            raise GenerationError(f"tables.{rt.name}.{name}: {exc}") from exc
        frame = frame.with_columns(s.alias(name))
        if r is not None:
            tagged = pl.select(pl.when(r.is_not_null()).then(pl.lit(f"column {name}: ") + r)).to_series()
            reasons = tagged if reasons is None else reasons.fill_null(tagged)
    frame, resampled = enforce_constraints(rt, frame, batch)
    vreasons, vstats = run_validators(rt, frame) if rt.spec.validators else (None, {})
    if vreasons is not None:
        reasons = vreasons if reasons is None else reasons.fill_null(vreasons)
    if reasons is not None and reasons.null_count() < frame.height:
        bad = reasons.is_not_null()
        quarantine = frame.filter(bad).with_columns(reasons.filter(bad).alias(REASON))
        frame = frame.filter(~bad)
    else:
        quarantine = frame.clear().with_columns(pl.lit(None, dtype=pl.String).alias(REASON))
    return BatchResult(frame, quarantine, resampled, vstats)


def public_columns(rt: TableRuntime) -> list[str]:
    cols = [c.name for c in rt.spec.columns if not c.drop]
    if rt.spec.split:
        cols.append(rt.spec.split.column)
    return cols
