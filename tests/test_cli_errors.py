"""CLI errors reach the user verbatim: the file, field or value they name is the part the user has to fix."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from typer.testing import CliRunner

from studio.cli import app
from studio.commands.errors import print_error


def test_print_error_keeps_bracketed_text_and_long_lines_whole():
    console = Console(record=True, width=40, color_system=None)
    msg = ("/data/runs/exp[sft]/config.yaml: steps: Input should be greater than 0 "
           "[type=greater_than, input_value=-1, input_type=int]")
    print_error(console, msg, label="config error")
    text = console.export_text()
    assert text == f"config error: {msg}\n"  # nothing read as markup, no line break added at the 40-column width


def test_train_names_a_missing_config_path_with_brackets_in_full(tmp_path: Path):
    missing = tmp_path / "run[sft]" / "config[bold].yaml"
    result = CliRunner().invoke(app, ["train", str(missing)])
    assert result.exit_code == 2
    assert f"config error: {missing}: no such config file" in result.output
