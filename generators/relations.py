"""Foreign keys and lookups across tables, vectorised with joins.

Why joins: an assignee "from the task's team" is a draw among the parent rows whose key equals the child's; grouping
the parent once by the match key and indexing each child row's group list with one uniform draw keeps this a handful
of columnar operations for any number of rows.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from generators.expressions import compile_expr


class RelationError(ValueError):
    """A foreign key or lookup cannot be drawn (no parent rows, no row for a match key, a non-unique key)."""


def parent_candidates(col, parent: pl.DataFrame) -> pl.DataFrame:
    if col.where:
        parent = parent.filter(compile_expr(col.where))
    if parent.height == 0:
        raise RelationError(f"foreign key {col.name}: no row of table {col.table!r}"
                            + (f" satisfies where {col.where!r}" if col.where else " (it is empty)"))
    return parent


def sample_foreign_key(col, frame: pl.DataFrame, parent: pl.DataFrame, n: int, rng: np.random.Generator) -> pl.Series:
    cand = parent_candidates(col, parent)
    if not col.match:
        return cand[col.column].gather(rng.integers(0, cand.height, n))
    pkeys = list(col.match)
    groups = cand.group_by(pkeys, maintain_order=True).agg(pl.col(col.column).alias("__vals"))
    child = frame.select([pl.col(c).alias(p) for p, c in col.match.items()])
    for p in pkeys:
        if child[p].dtype != groups[p].dtype:
            groups = groups.with_columns(pl.col(p).cast(child[p].dtype, strict=False))
    joined = child.join(groups, on=pkeys, how="left", maintain_order="left", nulls_equal=False)
    lens = joined["__vals"].list.len().fill_null(0).to_numpy()
    missing = lens == 0
    if missing.any():
        bad = child.filter(pl.Series(missing)).unique().head(3).to_dicts()
        raise RelationError(f"foreign key {col.name}: {int(missing.sum())} rows have no row of table {col.table!r} "
                            f"with {', '.join(f'{p} = {c}' for p, c in col.match.items())}"
                            f"{' and ' + repr(col.where) if col.where else ''} (e.g. {bad})")
    pick = np.floor(rng.random(n) * lens).astype(np.int64)
    return joined["__vals"].list.get(pl.Series(pick), null_on_oob=False)


def lookup(col, fk_col, frame: pl.DataFrame, parent: pl.DataFrame) -> pl.Series:
    key = fk_col.column
    pairs = parent.select(pl.col(key), pl.col(col.column).alias("__val"))
    if pairs[key].n_unique() != pairs.height:
        raise RelationError(f"lookup {col.name}: {fk_col.table}.{key} is not unique, so foreign key {fk_col.name} "
                            f"does not name one row (make the parent key a uuid or sequence column)")
    joined = frame.select(pl.col(fk_col.name).alias(key)).join(pairs, on=key, how="left", maintain_order="left")
    return joined["__val"]
