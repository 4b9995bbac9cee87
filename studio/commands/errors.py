"""The one way `rlvr` commands print an error: `error: <message>` in red, the message verbatim.

Why a helper: rich reads `[...]` in a printed string as markup, so a message such as pydantic's
`Input should be greater than 0 [type=greater_than, input_value=-1]` or `field [sft] missing` lost the bracketed
part (the very field or value the user has to fix), and rich hard-wraps at the terminal width, which broke paths a
user copies. Every command printed its errors by hand, each with a different subset of the fixes."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape


def print_error(console: Console, message: object, label: str = "error") -> None:
    """`label: message` with the label in red and the message exactly as given (no markup, no highlighting, no
    line breaks added)."""
    console.print(f"[red]{escape(label)}:[/red] {escape(str(message))}", highlight=False, soft_wrap=True)


def fail(console: Console, message: object, code: int = 2, label: str = "error") -> NoReturn:
    """Print the error and leave with `code` (2: bad usage or input, 1: the work itself failed)."""
    print_error(console, message, label)
    raise typer.Exit(code)
