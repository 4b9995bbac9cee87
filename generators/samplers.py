"""Vectorised samplers: each draws a whole column of n values from a numpy Generator in one call.

Pure functions of (column params, n, rng, the already generated frame): no Python loop over rows, so a million
values cost milliseconds. Datetimes are microsecond `pl.Datetime`.
"""

from __future__ import annotations

from datetime import datetime

import numpy as np
import polars as pl

UNIT_US = {"s": 1_000_000, "m": 60_000_000, "h": 3_600_000_000, "D": 86_400_000_000}
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def _probs(weights: list[float] | None, k: int) -> np.ndarray | None:
    if weights is None:
        return None
    w = np.asarray(weights, dtype=float)
    return w / w.sum()


def sample_category(values: list, weights: list[float] | None, n: int, rng: np.random.Generator) -> pl.Series:
    idx = rng.choice(len(values), size=n, p=_probs(weights, len(values))) if n else np.zeros(0, dtype=np.int64)
    return pl.Series(values).gather(idx)


def sample_subcategory(col, parent: pl.Series, n: int, rng: np.random.Generator) -> pl.Series:
    """For each parent value, draw among the values allowed under it; an unknown parent value is an error."""
    keys = list(col.values)
    flat: list = []
    offsets = {}
    for k in keys:
        offsets[k] = len(flat)
        flat.extend(col.values[k])
    pstr = parent.cast(pl.String)
    unknown = set(pstr.unique().drop_nulls().to_list()) - set(keys)
    if unknown or pstr.null_count():
        raise ValueError(f"subcategory {col.name}: parent {col.parent} has values with no entry in values: "
                         f"{sorted(unknown)[:5]}{' and nulls' if pstr.null_count() else ''}")
    out = np.zeros(n, dtype=np.int64)
    pnp = pstr.to_numpy()
    for k in keys:
        rows = np.flatnonzero(pnp == k)
        if rows.size:
            w = (col.weights or {}).get(k)
            out[rows] = offsets[k] + rng.choice(len(col.values[k]), size=rows.size, p=_probs(w, len(col.values[k])))
    return pl.Series(flat).gather(out)


def sample_uniform(col, n: int, rng: np.random.Generator) -> pl.Series:
    if col.integer:
        lo, hi = int(np.ceil(col.low)), int(np.floor(col.high))
        if hi < lo:
            raise ValueError(f"uniform {col.name}: no integer in [{col.low}, {col.high}]")
        return pl.Series(rng.integers(lo, hi + 1, n, dtype=np.int64))
    v = rng.uniform(col.low, col.high, n)
    return pl.Series(np.round(v, col.decimals) if col.decimals is not None else v)


def sample_gaussian(col, n: int, rng: np.random.Generator) -> pl.Series:
    v = rng.normal(col.mean, col.std, n)
    return pl.Series(np.round(v, col.decimals) if col.decimals is not None else v)


def sample_bernoulli(col, n: int, rng: np.random.Generator) -> pl.Series:
    return pl.Series(rng.random(n) < col.p)


def sample_binomial(col, n: int, rng: np.random.Generator) -> pl.Series:
    return pl.Series(rng.binomial(col.n, col.p, n).astype(np.int64))


def sample_poisson(col, n: int, rng: np.random.Generator) -> pl.Series:
    return pl.Series(rng.poisson(col.lam, n).astype(np.int64))


def _epoch_us(iso: str) -> int:
    d = datetime.fromisoformat(iso)
    if d.tzinfo is not None:
        d = d.replace(tzinfo=None) - d.utcoffset()
    return int((d - datetime(1970, 1, 1)).total_seconds() * 1_000_000)


def sample_datetime(col, n: int, rng: np.random.Generator) -> pl.Series:
    """Uniform between start and end, at whole `unit`s after start."""
    start, end = _epoch_us(col.start), _epoch_us(col.end)
    step = UNIT_US[col.unit]
    k = (end - start) // step
    v = start + rng.integers(0, k + 1, n, dtype=np.int64) * step
    return pl.Series(v).cast(pl.Datetime("us"))


def sample_timedelta(col, reference: pl.Series, n: int, rng: np.random.Generator) -> pl.Series:
    """`reference` + uniform [low, high] `unit`s, rounded to the second."""
    if reference.dtype != pl.Datetime("us"):
        if not isinstance(reference.dtype, (pl.Datetime, pl.Date)):
            raise ValueError(f"timedelta {col.name}: reference {col.reference} is {reference.dtype}, expected a datetime")
        reference = reference.cast(pl.Datetime("us"))
    off = np.round(rng.uniform(col.low, col.high, n) * UNIT_US[col.unit] / 1_000_000).astype(np.int64) * 1_000_000
    return (reference.cast(pl.Int64) + pl.Series(off)).cast(pl.Datetime("us"))


def sample_uuid(col, n: int, rng: np.random.Generator) -> pl.Series:
    """Version-4 UUID strings from the seeded generator (reproducible, unlike uuid.uuid4)."""
    b = rng.integers(0, 256, (n, 16), dtype=np.uint8)
    b[:, 6] = (b[:, 6] & 0x0F) | 0x40
    b[:, 8] = (b[:, 8] & 0x3F) | 0x80
    h = np.empty((n, 32), np.uint8)
    h[:, 0::2] = _HEX[b >> 4]
    h[:, 1::2] = _HEX[b & 15]
    o = np.full((n, 36), ord("-"), np.uint8)
    o[:, 0:8], o[:, 9:13], o[:, 14:18], o[:, 19:23], o[:, 24:36] = (
        h[:, 0:8], h[:, 8:12], h[:, 12:16], h[:, 16:20], h[:, 20:32])
    s = pl.Series(o.view("S36").ravel() if n else np.zeros(0, "S36")).cast(pl.String)
    return (col.prefix + s) if col.prefix else s


def sample_sequence(col, n: int, row_offset: int) -> pl.Series:
    s = pl.Series(np.arange(row_offset + col.start, row_offset + col.start + n, dtype=np.int64))
    if not col.prefix and not col.width:
        return s
    text = s.cast(pl.String)
    if col.width:
        text = text.str.zfill(col.width)
    return col.prefix + text
