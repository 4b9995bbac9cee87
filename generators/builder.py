"""The Python way to write a dataset spec: the same `DatasetSpec` the YAML loads into, built with calls.

    spec = (SpecBuilder("world", seed=7)
            .table("employees", rows=40)
                .column("email", "person", field="email")
                .column("team", "category", values=["data", "platform"])
            .table("tasks")
                .column("assignee", "foreign_key", table="employees", column="email")
                .column("estimate", "uniform", low=1, high=8, integer=True)
                .when("estimate", "assignee LIKE 'a%'", low=2)
                .constraint("estimate >= 2")
            .build())

`build()` validates exactly as `load_spec` does (every problem with its path), so a typo fails here, not mid-run.
"""

from __future__ import annotations

from typing import Any

from generators.spec_io import parse_spec
from schemas.dataset_spec import DatasetSpec


class SpecBuilder:
    def __init__(self, name: str = "dataset", *, seed: int = 0, batch_size: int = 100_000, description: str = ""):
        self._data: dict[str, Any] = {"name": name, "seed": seed, "batch_size": batch_size,
                                      "description": description, "tables": {}}
        self._table: dict[str, Any] | None = None

    def table(self, name: str, rows: int | None = None, **options: Any) -> "SpecBuilder":
        self._table = {"columns": [], **({"rows": rows} if rows else {}), **options}
        self._data["tables"][name] = self._table
        return self

    def _cur(self) -> dict[str, Any]:
        if self._table is None:
            raise ValueError("call .table(name) before adding columns or rules")
        return self._table

    def column(self, name: str, kind: str, **params: Any) -> "SpecBuilder":
        self._cur()["columns"].append({"name": name, "kind": kind, **params})
        return self

    def when(self, column: str, condition: str, **params: Any) -> "SpecBuilder":
        """Conditional params for an existing column (first matching condition wins)."""
        for c in self._cur()["columns"]:
            if c["name"] == column:
                c.setdefault("conditions", []).append({"when": condition, "params": params})
                return self
        raise ValueError(f"when({column!r}): no such column in the current table")

    def constraint(self, rule: str | dict) -> "SpecBuilder":
        self._cur().setdefault("constraints", []).append(rule)
        return self

    def validator(self, name: str, kind: str, **params: Any) -> "SpecBuilder":
        self._cur().setdefault("validators", []).append({"name": name, "kind": kind, **params})
        return self

    def split(self, **params: Any) -> "SpecBuilder":
        self._cur()["split"] = params
        return self

    def dedup_by(self, *columns: str) -> "SpecBuilder":
        self._cur()["dedup_by"] = list(columns)
        return self

    def to_dict(self) -> dict[str, Any]:
        return self._data

    def build(self) -> DatasetSpec:
        return parse_spec(self._data, f"<SpecBuilder {self._data['name']}>")
