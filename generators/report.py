"""The dataset report: per-column profile, every declared relation and constraint re-checked on the output,
validator pass rates and quarantine counts.

Why re-check on the output rather than trust the engine: the report is the evidence a dataset is what the spec
says. It reads the written Parquet (or frames in memory), recomputes each relation with independent columnar
checks, and `ok` is False (the CLI exits non-zero) when any declared relation fails on any row.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from generators.engine import constraint_expr
from generators.expressions import compile_expr
from schemas.dataset_spec import DatasetSpec

NUMERIC = (pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8, pl.UInt16, pl.UInt32, pl.UInt64, pl.Float32, pl.Float64)


def profile_column(s: pl.Series) -> dict[str, Any]:
    out: dict[str, Any] = {"dtype": str(s.dtype), "count": s.len(), "nulls": s.null_count()}
    if s.len() == 0:
        return out
    try:
        out["unique"] = s.n_unique()
    except Exception:  # noqa: BLE001 - nested types
        pass
    if s.dtype in NUMERIC:
        nn = s.drop_nulls().cast(pl.Float64)
        out.update(min=nn.min(), max=nn.max(), mean=round(nn.mean(), 6) if nn.len() else None,
                   std=round(nn.std(), 6) if nn.len() > 1 else None,
                   p50=nn.quantile(0.5) if nn.len() else None)
    elif s.dtype == pl.Boolean:
        out["true_rate"] = round(float(s.mean() or 0.0), 6)
    elif isinstance(s.dtype, (pl.Datetime, pl.Date)):
        out.update(min=str(s.min()), max=str(s.max()))
    if s.dtype in (pl.String, pl.Boolean) or (s.dtype in NUMERIC and out.get("unique", 99) <= 20):
        vc = s.value_counts(sort=True).head(10)
        out["top"] = {str(r[0]): round(r[1] / s.len(), 6) for r in vc.iter_rows()}
    if s.dtype == pl.String:
        lens = s.drop_nulls().str.len_chars()
        out["length"] = {"min": lens.min(), "max": lens.max(), "mean": round(lens.mean() or 0.0, 3)}
    return out


def _check(name: str, kind: str, failed: int, total: int, detail: str = "") -> dict[str, Any]:
    return {"name": name, "kind": kind, "ok": failed == 0, "failed": int(failed), "checked": int(total),
            "detail": detail}


def check_relations(spec: DatasetSpec, frames: dict[str, pl.DataFrame]) -> list[dict[str, Any]]:
    """One record per declared relation: ok, failed rows, checked rows."""
    checks: list[dict[str, Any]] = []
    for tname, table in spec.tables.items():
        df = frames.get(tname)
        if df is None or df.height == 0:
            continue
        cols = {c.name: c for c in table.columns}
        n = df.height
        for c in table.columns:
            if c.drop or c.name not in df.columns:
                continue
            where = f"{tname}.{c.name}"
            # the params that apply to each row: conditions first match wins
            branch = np.zeros(n, dtype=np.int64)
            if c.conditions:
                try:
                    chain = None
                    for i, cond in enumerate(c.conditions, 1):
                        e = compile_expr(cond.when).fill_null(False)
                        chain = pl.when(e).then(pl.lit(i)) if chain is None else chain.when(e).then(pl.lit(i))
                    branch = df.select(chain.otherwise(pl.lit(0))).to_series().to_numpy()
                except Exception:  # noqa: BLE001 - condition reads a dropped column: check default only
                    branch = None
            variants = [c] + [c.with_params(cond.params) for cond in c.conditions]
            if branch is None:
                continue
            fails = 0
            kind = c.kind
            for b, v in enumerate(variants):
                rows = np.flatnonzero(branch == b)
                if rows.size == 0:
                    continue
                s = df[c.name][rows]
                if kind == "category":
                    fails += int((~s.is_in(pl.Series(v.values).cast(s.dtype, strict=False))).sum())
                elif kind == "uniform":
                    fails += int(((s < v.low) | (s > v.high)).sum())
                elif kind == "bernoulli":
                    fails += int(s.null_count())
                elif kind in ("binomial",):
                    fails += int(((s < 0) | (s > v.n)).sum())
                elif kind == "poisson":
                    fails += int((s < 0).sum())
                elif kind == "datetime":
                    from datetime import datetime as dt
                    lo, hi = dt.fromisoformat(v.start), dt.fromisoformat(v.end)
                    fails += int(((s < lo) | (s > hi)).sum())
                elif kind == "timedelta" and c.reference in df.columns:
                    from generators.samplers import UNIT_US
                    delta = (s.cast(pl.Int64) - df[c.reference][rows].cast(pl.Datetime("us")).cast(pl.Int64))
                    lo, hi = v.low * UNIT_US[v.unit] - 1_000_000, v.high * UNIT_US[v.unit] + 1_000_000
                    fails += int(((delta < lo) | (delta > hi)).sum())
            if kind in ("category", "uniform", "datetime", "timedelta", "binomial", "poisson", "bernoulli"):
                label = "value within its params" + (" (per condition branch)" if c.conditions else "")
                checks.append(_check(f"{where} {label}", kind, fails, n))
            if kind == "subcategory" and c.parent in df.columns:
                allowed = pl.DataFrame({"__p": [k for k, vs in c.values.items() for _ in vs],
                                        "__v": [x for vs in c.values.values() for x in vs]})
                pair = df.select(pl.col(c.parent).cast(pl.String).alias("__p"), pl.col(c.name).alias("__v"))
                allowed = allowed.with_columns(pl.col("__v").cast(pair["__v"].dtype, strict=False), ok=pl.lit(True))
                j = pair.join(allowed, on=["__p", "__v"], how="left", maintain_order="left")
                checks.append(_check(f"{where} in the values of its parent {c.parent}", "subcategory",
                                     int(j["ok"].null_count()), n))
            if kind == "foreign_key" and c.table in frames:
                parent = frames[c.table]
                if c.where:
                    parent = parent.filter(compile_expr(c.where))
                keys = [c.column] + list(c.match)
                pk = parent.select([pl.col(k).alias(f"__{k}") for k in keys]).unique().with_columns(ok=pl.lit(True))
                child = df.select([pl.col(c.name).alias(f"__{c.column}")] +
                                  [pl.col(cc).alias(f"__{pc}") for pc, cc in c.match.items() if cc in df.columns])
                on = [x for x in pk.columns if x != "ok" and x in child.columns]
                for k in on:
                    child = child.with_columns(pl.col(k).cast(pk[k].dtype, strict=False))
                j = child.join(pk, on=on, how="left", maintain_order="left")
                desc = f"{where} -> {c.table}.{c.column}" + (f" where {c.where}" if c.where else "") + \
                    (f" matching {c.match}" if c.match else "")
                checks.append(_check(desc, "foreign_key", int(j["ok"].null_count()), n))
            if kind == "lookup" and cols.get(c.via) is not None and c.via in df.columns:
                fk = cols[c.via]
                parent = frames.get(fk.table)
                if parent is not None:
                    pk = parent.select(pl.col(fk.column).alias("__k"), pl.col(c.column).alias("__v"))
                    j = df.select(pl.col(c.via).alias("__k"), pl.col(c.name).alias("__mine")).join(
                        pk, on="__k", how="left", maintain_order="left")
                    bad = (j["__mine"] != j["__v"]).fill_null(True) & ~(j["__mine"].is_null() & j["__v"].is_null())
                    checks.append(_check(f"{where} == {fk.table}.{c.column} of {c.via}", "lookup", int(bad.sum()), n))
            if kind in ("uuid", "sequence"):
                checks.append(_check(f"{where} unique", kind, n - df[c.name].n_unique(), n))
        for con in table.constraints:
            if con.column in df.columns and (con.other is None or con.other in df.columns):
                ok = df.select(constraint_expr(con, df.schema)).to_series()
                checks.append(_check(f"{tname}: {con.label()}", "constraint", int((~ok).sum()), n))
        if table.dedup_by and all(k in df.columns for k in table.dedup_by):
            dups = n - df.select(table.dedup_by).unique().height
            checks.append(_check(f"{tname}: unique by {table.dedup_by}", "dedup", dups, n))
        if table.split and table.split.column in df.columns:
            sp = table.split
            if sp.group_by and sp.group_by in df.columns:
                per = df.group_by(sp.group_by).agg(pl.col(sp.column).n_unique().alias("k"))
                checks.append(_check(f"{tname}: each {sp.group_by} in one split", "split_groups",
                                     int((per["k"] > 1).sum()), per.height))
            for hcol, vals in sp.held_out.items():
                if hcol in df.columns:
                    m = df[hcol].is_in(pl.Series(vals).cast(df[hcol].dtype, strict=False))
                    wrong = int((m & (df[sp.column] != sp.held_out_split)).sum())
                    checks.append(_check(f"{tname}: held-out {hcol} in {sp.held_out_split}", "split_held_out", wrong, n))
    return checks


def build_report(spec: DatasetSpec, frames: dict[str, pl.DataFrame], manifest: dict | None = None) -> dict[str, Any]:
    tables = {}
    for tname in spec.tables:
        df = frames.get(tname, pl.DataFrame())
        entry: dict[str, Any] = {"rows": df.height, "columns": {c: profile_column(df[c]) for c in df.columns}}
        sp = spec.tables[tname].split
        if sp and sp.column in df.columns and df.height:
            entry["split"] = {str(k): round(v / df.height, 6) for k, v in df[sp.column].value_counts().iter_rows()}
        if manifest and tname in manifest.get("tables", {}):
            m = manifest["tables"][tname]
            entry["quarantined"] = m["quarantined"]
            entry["duplicates_dropped"] = m["duplicates_dropped"]
            entry["resampled"] = m["resampled"]
            entry["validators"] = {k: {**v, "pass_rate": round(1 - v["failed"] / v["checked"], 6) if v["checked"] else None}
                                   for k, v in m["validators"].items()}
            entry["short_by"] = max(0, m["wanted"] - m["rows"])
        tables[tname] = entry
    checks = check_relations(spec, frames)
    return {"name": spec.name, "ok": all(c["ok"] for c in checks), "relations": checks, "tables": tables}


def report_for_dir(out: str | Path) -> dict[str, Any]:
    from generators.writer import MANIFEST, read_table

    out = Path(out)
    if not (out / MANIFEST).exists():
        raise FileNotFoundError(f"{out}: no {MANIFEST} (the dataset is incomplete; run generate with --resume)")
    manifest = json.loads((out / MANIFEST).read_text())
    spec = DatasetSpec.model_validate(manifest["spec"])
    frames = {t: read_table(out, t) for t in spec.tables}
    return build_report(spec, frames, manifest)


def summary_lines(report: dict[str, Any]) -> list[str]:
    lines = [f"dataset {report['name']}: {'all relations hold' if report['ok'] else 'RELATIONS FAIL'}"]
    for t, e in report["tables"].items():
        extra = []
        for k in ("quarantined", "duplicates_dropped", "short_by"):
            if e.get(k):
                extra.append(f"{k.replace('_', ' ')} {e[k]}")
        if e.get("split"):
            extra.append("split " + ", ".join(f"{k} {v:.0%}" for k, v in sorted(e["split"].items())))
        lines.append(f"  {t}: {e['rows']} rows" + (f" ({'; '.join(extra)})" if extra else ""))
        for v, st in (e.get("validators") or {}).items():
            lines.append(f"    validator {v}: pass rate {st['pass_rate']:.1%} of {st['checked']}")
    for c in report["relations"]:
        mark = "ok  " if c["ok"] else "FAIL"
        lines.append(f"  [{mark}] {c['name']}" + (f": {c['failed']} of {c['checked']} rows" if not c["ok"] else ""))
    return lines
