"""Person fields (name, email, company, job, locale) sampled from Faker pools built once per locale and seed.

Why pools: calling Faker per row costs ~20 µs a field, the slowest part of a per-row engine. A pool of a few hundred
first names, last names and companies per locale, drawn once with the spec's seed, then indexed with numpy, gives
the same realism at vectorised speed. Columns sharing a `person` key index the same draw, so name and email agree.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import polars as pl

POOL = 400


@lru_cache(maxsize=64)
def person_pool(locale: str, seed: int) -> dict[str, pl.Series]:
    from faker import Faker

    try:
        fake = Faker(locale)
    except AttributeError as exc:
        raise ValueError(f"person locale {locale!r}: Faker has no such locale") from exc
    fake.seed_instance(seed)
    firsts = list(dict.fromkeys(fake.first_name() for _ in range(POOL)))
    lasts = list(dict.fromkeys(fake.last_name() for _ in range(POOL)))
    companies = list(dict.fromkeys(fake.company() for _ in range(POOL // 2)))
    jobs = list(dict.fromkeys(fake.job() for _ in range(POOL // 2)))
    return {"first_name": pl.Series(firsts), "last_name": pl.Series(lasts),
            "company": pl.Series(companies), "job": pl.Series(jobs)}


def _ascii_slug(s: pl.Series, sep: str = "") -> pl.Series:
    return (s.str.normalize("NFKD").str.to_lowercase().str.replace_all(r"[^a-z0-9 ]", "")
            .str.strip_chars().str.replace_all(r"\s+", sep))


def sample_person(locales: list[str], seed: int, n: int, rng: np.random.Generator,
                  email_domain: str | None = None) -> pl.DataFrame:
    """All person fields for n rows (one draw; each column picks its field)."""
    loc_idx = rng.integers(0, len(locales), n)
    frames = []
    order = []
    for li, loc in enumerate(locales):
        rows = np.flatnonzero(loc_idx == li)
        if rows.size == 0:
            continue
        pool = person_pool(loc, seed)
        k = rows.size
        pick = {f: pool[f].gather(rng.integers(0, len(pool[f]), k)) for f in pool}
        first, last, company = pick["first_name"], pick["last_name"], pick["company"]
        domain = (pl.Series([email_domain] * k) if email_domain else
                  _ascii_slug(company.str.split(" ").list.first().str.replace_all(r"[,.]", "")) + ".example.com")
        email = _ascii_slug(first) + "." + _ascii_slug(last, "-") + "@" + domain
        frames.append(pl.DataFrame({
            "first_name": first, "last_name": last, "name": first + " " + last, "email": email,
            "company": company, "job": pick["job"], "locale": pl.Series([loc] * k)}))
        order.append(rows)
    frame = pl.concat(frames)
    idx = np.concatenate(order)
    return frame[np.argsort(idx, kind="stable")]
