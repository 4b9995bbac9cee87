"""Compiling spec expressions into polars expressions, once per column, and finding the columns they read.

Why SQL by default: `priority = 'high'` and `due_at > created_at` read well in YAML and polars parses them into a
vectorised expression without executing any Python. The `py:` form gives the full polars API where SQL is not
enough; it is evaluated with no builtins and only `pl`, `col`, `lit`, `when` in scope.
"""

from __future__ import annotations

import string
from functools import lru_cache

import polars as pl


class ExpressionError(ValueError):
    """An expression or template does not parse; the message names the expression and the reason."""


@lru_cache(maxsize=4096)
def compile_expr(text: str) -> pl.Expr:
    """A polars expression for `text` (SQL, or polars Python after a `py:` prefix)."""
    src = text.strip()
    try:
        if src.startswith("py:"):
            scope = {"pl": pl, "col": pl.col, "lit": pl.lit, "when": pl.when, "__builtins__": {}}
            expr = eval(src[3:].strip(), scope, {})  # noqa: S307 - restricted scope, spec-author code
            if not isinstance(expr, pl.Expr):
                raise ExpressionError(f"{text!r}: expected a polars expression, got {type(expr).__name__}")
            return expr
        return pl.sql_expr(src)
    except ExpressionError:
        raise
    except Exception as exc:  # noqa: BLE001 - polars raises several types for bad SQL
        raise ExpressionError(f"{text!r}: not a valid expression ({exc})") from exc


def expr_columns(text: str) -> list[str]:
    """The column names an expression reads."""
    try:
        return list(dict.fromkeys(compile_expr(text).meta.root_names()))
    except ExpressionError:
        raise
    except Exception:  # noqa: BLE001 - e.g. pl.lit(...) alone has no root names
        return []


def template_fields(template: str) -> list[tuple[str, str | None]]:
    """[(literal, field or None), ...] of a `{name}` template; format specs and conversions are rejected."""
    parts: list[tuple[str, str | None]] = []
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ExpressionError(f"template {template!r}: {exc} (write a literal brace as {{{{ or }}}})") from exc
    for literal, field, spec, conv in parsed:
        if field is not None:
            if spec or conv:
                raise ExpressionError(
                    f"template {template!r}: {{{field}{'!' + conv if conv else ''}{':' + spec if spec else ''}}} "
                    "has a format spec; format the value in an expression column instead")
            if not field.isidentifier():
                raise ExpressionError(f"template {template!r}: {{{field}}} is not a column name")
        parts.append((literal, field))
    return parts


def compile_template(template: str) -> pl.Expr:
    """One `concat_str` over the columns: the template is parsed once, never per row."""
    pieces: list[pl.Expr] = []
    for literal, field in template_fields(template):
        if literal:
            pieces.append(pl.lit(literal))
        if field is not None:
            pieces.append(pl.col(field).cast(pl.String).fill_null(""))
    if not pieces:
        return pl.lit("")
    return pl.concat_str(pieces)
