"""Reading a TrainConfig from YAML and the checks that need the file system (the schema itself does no I/O).

Relative paths in the YAML (dataset, reward file, audit report, output folder) are resolved against the YAML file's
folder first and the current directory second, so a config works from wherever `rlvr train` is run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from schemas.train_config import TrainConfig


class ConfigError(ValueError):
    """The config file is unreadable, invalid, or refers to something missing; the message says what to change."""


def _resolve(value: str | None, base: Path) -> str | None:
    if value is None or value == "" or Path(value).is_absolute():
        return value
    cwd = Path.cwd() / value
    if cwd.exists():
        return str(cwd)
    return str((base / value))


def _resolve_reward(ref: str, base: Path) -> str:
    if ":" not in ref:
        return ref
    target, name = ref.rsplit(":", 1)
    if not target.endswith(".py"):
        return ref
    return f"{_resolve(target, base)}:{name}"


def parse_train_config(data: dict[str, Any], where: str = "config") -> TrainConfig:
    try:
        return TrainConfig.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = ".".join(str(x) for x in err["loc"]) or "(top level)"
            msg = err["msg"].removeprefix("Value error, ")
            lines.append(f"{loc}: {msg}" if err["loc"] else msg)
        raise ConfigError(f"{where}: " + "\n".join(lines)) from exc


def load_train_config(path: str | Path, *, check_files: bool = True, overrides: dict[str, Any] | None = None) -> TrainConfig:
    """Load, validate and resolve a YAML config; with `check_files`, also check the audit verdict and the data."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc})") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of sections (model, data, reward, ...) at the top level")
    for dotted, value in (overrides or {}).items():
        node = data
        *parents, leaf = dotted.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    cfg = parse_train_config(data, where=str(path))
    base = path.resolve().parent
    update: dict[str, Any] = {}
    d = cfg.data.model_copy(update={"path": _resolve(cfg.data.path, base), "eval_path": _resolve(cfg.data.eval_path, base)})
    r = cfg.reward.model_copy(update={"function": _resolve_reward(cfg.reward.function, base),
                                      "audit_report": _resolve(cfg.reward.audit_report, base)})
    update.update(data=d, reward=r)  # output_dir stays relative to the working directory, like any output path
    if cfg.sft is not None:
        update["sft"] = cfg.sft.model_copy(update={"data_path": _resolve(cfg.sft.data_path, base)})
    if cfg.guidance.demonstrations:
        update["guidance"] = cfg.guidance.model_copy(update={"demonstrations": _resolve(cfg.guidance.demonstrations,
                                                                                        base)})
    cfg = cfg.model_copy(update=update)
    if check_files:
        check_config_files(cfg, where=str(path))
    return cfg


def check_config_files(cfg: TrainConfig, where: str = "config") -> None:
    """What the schema cannot check: the dataset exists and the audit report says the reward passed."""
    problems = []
    if not Path(cfg.data.path).exists():
        hint = " (build it with `rlvr env tasks --out DIR`)" if cfg.rollout.environment == "workplace" else ""
        problems.append(f"data.path: {cfg.data.path} does not exist{hint}")
    if cfg.sft is not None and not Path(cfg.sft.data_path).exists():
        problems.append(f"sft.data_path: {cfg.sft.data_path} does not exist")
    if cfg.guidance.demonstrations and not Path(cfg.guidance.demonstrations).exists():
        problems.append(f"guidance.demonstrations: {cfg.guidance.demonstrations} does not exist")
    if cfg.reward.audit_report and not cfg.reward.allow_unaudited:
        verdict = audit_verdict(Path(cfg.reward.audit_report))
        if verdict != "pass":
            problems.append(
                f"reward.audit_report: {cfg.reward.audit_report} has verdict {verdict!r}, not 'pass'; fix the reward "
                "and re-run the audit, or set reward.allow_unaudited: true to train on it knowingly"
            )
    if problems:
        raise ConfigError(f"{where}:\n  - " + "\n  - ".join(problems))


def audit_verdict(path: Path) -> str:
    """The `verdict` field of an audit report JSON (`rlvr audit ... --json OUT`); 'missing' when unreadable."""
    if not path.is_file():
        return "missing"
    try:
        report = json.loads(path.read_text())
    except ValueError:
        return "unreadable"
    verdict = report.get("verdict") if isinstance(report, dict) else None
    return str(verdict).lower() if verdict is not None else "missing"
