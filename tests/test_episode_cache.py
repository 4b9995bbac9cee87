"""benchmarks/greedy_episode_diff.py's episode cache: a policy's greedy episodes are reused only for the same
weights, dataset, tasks, settings and evaluation code, and a hit never loads the model."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from greedy_episode_diff import episode_cache_key, episodes  # noqa: E402

SETTINGS = {"tools": "relevant", "max_turns": 6, "max_new_tokens": 96, "precision": "fp32", "batch": 48, "threads": 2}


def _folders(tmp_path: Path) -> tuple[Path, Path, list]:
    model, data = tmp_path / "model", tmp_path / "data"
    model.mkdir()
    data.mkdir()
    (model / "model.safetensors").write_bytes(b"weights-1")
    (model / "config.json").write_text("{}")
    (data / "test.parquet").write_bytes(b"tasks-1")
    return model, data, [SimpleNamespace(id="wp-a"), SimpleNamespace(id="wp-b")]


def test_the_key_follows_weights_data_tasks_and_settings(tmp_path):
    model, data, tasks = _folders(tmp_path)
    key = episode_cache_key(str(model), data, tasks, SETTINGS)
    assert key == episode_cache_key(str(model), data, tasks, dict(SETTINGS))
    (model / "config.json").write_text('{"note": 1}')  # not a weight file: the same policy
    assert episode_cache_key(str(model), data, tasks, SETTINGS) == key
    assert episode_cache_key(str(model), data, tasks[:1], SETTINGS) != key
    assert episode_cache_key(str(model), data, tasks, {**SETTINGS, "max_turns": 8}) != key
    (data / "test.parquet").write_bytes(b"tasks-2")
    assert episode_cache_key(str(model), data, tasks, SETTINGS) != key
    (data / "test.parquet").write_bytes(b"tasks-1")
    (model / "model.safetensors").write_bytes(b"weights-2")
    assert episode_cache_key(str(model), data, tasks, SETTINGS) != key


def test_a_cached_evaluation_is_returned_without_loading_the_model(tmp_path):
    model, data, tasks = _folders(tmp_path)
    key = episode_cache_key(str(model), data, tasks, SETTINGS)
    cache = tmp_path / "episode_cache"
    cache.mkdir()
    stored = {"wp-a": {"task_id": "wp-a", "passed": True, "reason": "", "first_call": "x", "text": "t"}}
    (cache / f"{key}.json").write_text(json.dumps(stored))
    # model.safetensors holds no real weights: any attempt to load or run the policy would raise
    got, seconds, hit = episodes(str(model), None, tasks, threads=1, batch=48, cache=cache, key=key)
    assert hit and got == stored and seconds == 0.0
