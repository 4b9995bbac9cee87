"""The dependency graph of a spec: which column reads which, in what order to generate them, which tables first.

Why read it from the spec: the user lists columns in any order; every reference (a subcategory's parent, a
timedelta's reference, names in expressions, templates, conditions, constraints, foreign keys) is an edge. A cycle
is reported with the columns in it, and a reference to a column that does not exist is reported with its path.
"""

from __future__ import annotations

from collections.abc import Iterable

from generators.expressions import expr_columns, template_fields
from schemas.dataset_spec import DatasetSpec, TableSpec


class SpecGraphError(ValueError):
    """A reference to an unknown column or table, or a cycle; the message names the path and the columns."""


def column_refs(col) -> dict[str, list[str]]:
    """{what refers: [columns of the same table]} for one column."""
    refs: dict[str, list[str]] = {}
    kind = col.kind
    if kind == "subcategory":
        refs["parent"] = [col.parent]
    elif kind == "timedelta":
        refs["reference"] = [col.reference]
    elif kind == "foreign_key":
        refs["match"] = list(col.match.values())
    elif kind == "lookup":
        refs["via"] = [col.via]
    elif kind == "expression":
        refs["expr"] = expr_columns(col.expr)
    elif kind == "template":
        refs["template"] = [f for _, f in template_fields(col.template) if f]
    elif kind == "custom":
        refs["depends_on"] = list(col.depends_on)
    elif kind in ("llm_text", "llm_structured"):
        refs["prompt"] = [f for _, f in template_fields(col.prompt) if f]
        if col.system:
            refs["system"] = [f for _, f in template_fields(col.system) if f]
    for i, cond in enumerate(col.conditions):
        refs[f"conditions[{i}].when"] = expr_columns(cond.when)
    return refs


def column_deps(col) -> list[str]:
    return list(dict.fromkeys(c for cols in column_refs(col).values() for c in cols))


def _find_cycle(nodes: Iterable[str], edges: dict[str, list[str]]) -> list[str]:
    """One cycle among `nodes` (edges: node -> nodes it depends on), as a closed path."""
    color: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        color[n] = 1
        stack.append(n)
        for m in edges.get(n, []):
            if color.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if color.get(m) is None:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        color[n] = 2
        return None

    for n in nodes:
        if color.get(n) is None:
            found = visit(n)
            if found:
                return found
    return []


def topo_order(nodes: list[str], edges: dict[str, list[str]], what: str) -> list[str]:
    """Nodes ordered so that each comes after what it depends on; stable (spec order among independent ones)."""
    done: list[str] = []
    placed: set[str] = set()
    remaining = list(nodes)
    while remaining:
        progressed = False
        for n in list(remaining):
            if all(d in placed for d in edges.get(n, [])):
                done.append(n)
                placed.add(n)
                remaining.remove(n)
                progressed = True
        if not progressed:
            cycle = _find_cycle(remaining, edges)
            raise SpecGraphError(f"{what}: dependency cycle {' -> '.join(cycle)} (each reads the next)")
    return done


def table_column_order(name: str, table: TableSpec) -> list[str]:
    """Generation order of a table's columns; unknown references are errors naming the column and field."""
    names = [c.name for c in table.columns]
    known = set(names)
    edges: dict[str, list[str]] = {}
    for i, col in enumerate(table.columns):
        for field, cols in column_refs(col).items():
            for ref in cols:
                if ref not in known:
                    raise SpecGraphError(
                        f"tables.{name}.columns[{i}] ({col.name}).{field}: no column {ref!r} in table {name!r} "
                        f"(columns: {', '.join(names)})")
        edges[col.name] = column_deps(col)
    return topo_order(names, edges, f"tables.{name}")


def descendants(table: TableSpec, roots: set[str]) -> set[str]:
    """Every column that reads (directly or not) one of `roots`."""
    deps = {c.name: set(column_deps(c)) for c in table.columns}
    out = set(roots)
    changed = True
    while changed:
        changed = False
        for n, ds in deps.items():
            if n not in out and ds & out:
                out.add(n)
                changed = True
    return out


def table_order(spec: DatasetSpec) -> list[str]:
    """Tables ordered parents first (foreign keys and lookups point at parents)."""
    edges: dict[str, list[str]] = {}
    for tname, table in spec.tables.items():
        by_name = {c.name: c for c in table.columns}
        parents: list[str] = []
        for i, col in enumerate(table.columns):
            if col.kind == "foreign_key":
                if col.table not in spec.tables:
                    raise SpecGraphError(f"tables.{tname}.columns[{i}] ({col.name}).table: no table {col.table!r} "
                                         f"(tables: {', '.join(spec.tables)})")
                parent = spec.tables[col.table]
                pcols = {c.name: c for c in parent.columns}
                for field, ref in [("column", col.column), *[("match", k) for k in col.match]]:
                    if ref not in pcols:
                        raise SpecGraphError(f"tables.{tname}.columns[{i}] ({col.name}).{field}: no column {ref!r} "
                                             f"in table {col.table!r}")
                    if pcols[ref].drop:
                        raise SpecGraphError(f"tables.{tname}.columns[{i}] ({col.name}).{field}: column "
                                             f"{col.table}.{ref} is dropped (drop: true) and cannot be referenced")
                if col.where:
                    for ref in expr_columns(col.where):
                        if ref not in pcols:
                            raise SpecGraphError(f"tables.{tname}.columns[{i}] ({col.name}).where: no column {ref!r} "
                                                 f"in table {col.table!r}")
                parents.append(col.table)
            elif col.kind == "lookup":
                fk = by_name.get(col.via)
                if fk is None or fk.kind != "foreign_key":
                    raise SpecGraphError(f"tables.{tname}.columns[{i}] ({col.name}).via: expected a foreign_key "
                                         f"column of table {tname!r}, got {col.via!r}")
                if fk.table in spec.tables:
                    pcols = {c.name: c for c in spec.tables[fk.table].columns}
                    if col.column not in pcols or pcols[col.column].drop:
                        raise SpecGraphError(f"tables.{tname}.columns[{i}] ({col.name}).column: no (kept) column "
                                             f"{col.column!r} in table {fk.table!r}")
        edges[tname] = list(dict.fromkeys(parents))
    return topo_order(list(spec.tables), edges, "tables")


def check_spec(spec: DatasetSpec) -> dict[str, list[str]]:
    """Every cross-reference of the spec, checked; returns each table's column order."""
    orders = {}
    for tname, table in spec.tables.items():
        orders[tname] = table_column_order(tname, table)
        known = {c.name for c in table.columns}
        for i, c in enumerate(table.constraints):
            for f in ("column", "other"):
                ref = getattr(c, f)
                if ref is not None and ref not in known:
                    raise SpecGraphError(f"tables.{tname}.constraints[{i}].{f}: no column {ref!r} in table {tname!r}")
        for i, v in enumerate(table.validators):
            if v.column is not None and v.column not in known:
                raise SpecGraphError(f"tables.{tname}.validators[{i}].column: no column {v.column!r}")
        if table.split:
            for f in ("stratify_by", "group_by"):
                ref = getattr(table.split, f)
                if ref is not None and ref not in known:
                    raise SpecGraphError(f"tables.{tname}.split.{f}: no column {ref!r}")
            for ref in table.split.held_out:
                if ref not in known:
                    raise SpecGraphError(f"tables.{tname}.split.held_out: no column {ref!r}")
            if table.split.column in known:
                raise SpecGraphError(f"tables.{tname}.split.column: {table.split.column!r} is already a column")
        for ref in table.dedup_by:
            if ref not in known:
                raise SpecGraphError(f"tables.{tname}.dedup_by: no column {ref!r}")
    table_order(spec)
    return orders
