"""The `rlvr` command line: a thin face over the library.

Each module in `studio/commands/` defines `register(app)` and adds its own commands, so that every area of the
studio owns its CLI surface without editing this file.
"""

from __future__ import annotations

import importlib
import pkgutil

import typer

import studio.commands

app = typer.Typer(
    name="rlvr",
    help="RLVR Studio: datasets, rewards, audits and GRPO training for small domain agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)


def _register_commands() -> None:
    for info in sorted(pkgutil.iter_modules(studio.commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"studio.commands.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(app)


_register_commands()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
