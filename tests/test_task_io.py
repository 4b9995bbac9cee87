"""Task datasets round-trip through Parquet and JSONL, and bad rows are named."""

from __future__ import annotations

import json

import pytest

from generators.task_io import DatasetError, read_records, read_tasks, write_tasks
from schemas import Message, TaskRow, ToolCall


def _tasks():
    return [
        TaskRow(id="t1", split="train", prompt=[Message(role="user", content="Delete email 12")],
                ground_truth_calls=[ToolCall(name="email_delete", arguments={"email_id": "12"})],
                metadata={"category": "email", "difficulty": 1}),
        TaskRow(id="t2", split="test", prompt=[Message(role="user", content="2+2?")], answer="4"),
    ]


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_round_trip(tmp_path, suffix):
    path = write_tasks(_tasks(), tmp_path / f"tasks{suffix}")
    assert read_tasks(path) == _tasks()


def test_plain_dataset_with_string_prompt_and_extra_columns(tmp_path):
    p = tmp_path / "math.jsonl"
    p.write_text(json.dumps({"id": "m1", "prompt": "What is 6*7?", "answer": "42", "difficulty": 2}) + "\n")
    (task,) = read_tasks(p)
    assert task.prompt[0].content == "What is 6*7?" and task.metadata["difficulty"] == 2
    assert read_records(p)[0]["answer"] == "42"


def test_bad_row_is_named(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text(json.dumps({"id": "ok", "prompt": "x"}) + "\n" + json.dumps({"id": "b", "prompt": 5}) + "\n")
    with pytest.raises(DatasetError, match=r"bad.jsonl: row 1: field prompt"):
        read_tasks(p)


def test_bad_json_line_is_named(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"id": "a", "prompt": "x"}\n{oops\n')
    with pytest.raises(DatasetError, match="line 2"):
        read_records(p)
