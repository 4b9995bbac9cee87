"""User code referenced by test specs (custom columns, validators) as `tests.generators_support.user_fns:NAME`."""

import numpy as np
import polars as pl
from pydantic import BaseModel, field_validator


def double_plus_noise(frame: pl.DataFrame, rng: np.random.Generator):
    return frame["x"] * 2 + rng.integers(0, 1, frame.height)


def crashes(frame: pl.DataFrame, rng):
    raise KeyError("no_such_field")


def even_only(frame: pl.DataFrame):
    return (frame["k"] % 2 == 0).to_list()


class Ticket(BaseModel):
    title: str
    priority: str

    @field_validator("title")
    @classmethod
    def _needs_marker(cls, v: str) -> str:
        if "ZZQ" not in v:
            raise ValueError("title must contain the marker ZZQ")
        return v
