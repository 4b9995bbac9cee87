"""`rlvr reward test REWARD --dataset DATA --completions COMPLETIONS --json OUT`, `rlvr reward list`,
`rlvr reward versions [NAME]`.

`reward test` scores each completion against its dataset row and prints a summary (pass rate, score histogram,
errors). REWARD is `path/to/file.py:function`, `module:function` or a registered name; DATA a Parquet (file or
folder) or JSONL dataset with an `id` column; COMPLETIONS a JSONL of `{"id", "completion"}` (several lines may share
an id). For a trajectory-aware reward a line holds `{"id", "trajectory": {...}, "final_state": ...}` instead. OUT
(`.json`: an array; `.jsonl`: one line each) holds one record per completion (`schemas.reward_records.ScoredRecord`):
`id`, `score`, `passed`, `components`, `error`, `reason`, `reward_version`. Exit 0 whatever the rewards say (errors are counted and shown);
exit 2 only when the command is misused (bad spec, unreadable file, unknown id).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from studio.commands.errors import fail, print_error

console = Console()
reward_app = typer.Typer(help="Author and check rewards: score completions, list built-in verifiers, versions.",
                         no_args_is_help=True)


class UsageError(ValueError):
    """Misuse of `rlvr reward` (exit 2)."""



def read_completions(path: Path, trajectory: bool) -> list[dict[str, Any]]:
    """The completion records of a JSONL file, checked line by line (UsageError names the line and field)."""
    from generators.task_io import iter_jsonl
    from schemas.trajectory import Trajectory

    out = []
    for n, rec in iter_jsonl(path, UsageError, "completions file"):
        if not isinstance(rec, dict) or "id" not in rec:
            raise UsageError(f"{path}: line {n} has no 'id' (expected {{\"id\": ..., \"completion\": ...}})")
        if trajectory:
            if "trajectory" not in rec:
                raise UsageError(f"{path}: line {n}: the reward is trajectory-aware, so each line needs a "
                                 f"'trajectory' object (and optionally 'final_state')")
            try:
                rec["item"] = Trajectory.model_validate(rec["trajectory"])
            except Exception as exc:  # noqa: BLE001 - pydantic's message names the field
                raise UsageError(f"{path}: line {n}: 'trajectory' is not a valid trajectory: {exc}") from exc
        else:
            if "completion" not in rec:
                raise UsageError(f"{path}: line {n} has no 'completion'")
            rec["item"] = rec["completion"]
        rec["id"] = str(rec["id"])
        out.append(rec)
    if not out:
        raise UsageError(f"{path}: no completions")
    return out


def histogram(scores: list[float], bins: int = 10) -> list[tuple[float, float, int]]:
    """(low, high, count) bins over the score range (one bin when every score is equal)."""
    if not scores:
        return []
    lo, hi = min(scores), max(scores)
    if math.isclose(lo, hi):
        return [(lo, hi, len(scores))]
    width = (hi - lo) / bins
    counts = [0] * bins
    for s in scores:
        counts[min(bins - 1, int((s - lo) / width))] += 1
    return [(lo + i * width, lo + (i + 1) * width, c) for i, c in enumerate(counts)]


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    errors = [r for r in records if r["error"] is not None]
    scored = [r for r in records if r["error"] is None]
    verdicts = [r for r in scored if r["passed"] is not None]
    scores = [r["score"] for r in scored]
    return {
        "completions": len(records), "errors": len(errors), "scored": len(scored),
        "passed": sum(1 for r in verdicts if r["passed"]), "with_verdict": len(verdicts),
        "pass_rate": (sum(1 for r in verdicts if r["passed"]) / len(verdicts)) if verdicts else None,
        "mean_score": (sum(scores) / len(scores)) if scores else None,
        "min_score": min(scores) if scores else None, "max_score": max(scores) if scores else None,
        "histogram": histogram(scores),
    }


def _write(out: Path, records: list[dict[str, Any]]) -> None:
    from generators.task_io import atomic_write_bytes

    if out.suffix == ".jsonl":
        payload = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    else:
        payload = json.dumps(records, ensure_ascii=False, indent=1)
    atomic_write_bytes(out, payload.encode("utf-8"))


def run_reward_test(reward_spec: str, dataset: Path, completions: Path, *, sandbox: str = "auto",
                    timeout_s: float = 10.0, memory_mb: int = 2048, label: str = "", record_version: bool = True,
                    progress: Any = None, on_total: Any = None) -> tuple[Any, list[dict[str, Any]], dict[str, Any]]:
    """Score a completions file against a dataset with a reward: (reward, records, summary). UsageError on misuse."""
    from generators.task_io import DatasetError, read_records
    from rewards import RewardSpecError, Sandbox, SandboxLimits, VersionLog, load_reward, score_batch

    try:
        reward = load_reward(reward_spec, label=label)
    except RewardSpecError as exc:
        raise UsageError(str(exc)) from exc
    try:
        rows = read_records(dataset)
    except (DatasetError, OSError) as exc:
        raise UsageError(str(exc)) from exc
    by_id: dict[str, dict[str, Any]] = {}
    for i, row in enumerate(rows):
        if row.get("id") is None:
            raise UsageError(f"{dataset}: row {i} has no 'id' (completions are matched to rows by id)")
        rid = str(row["id"])
        if rid in by_id:
            raise UsageError(f"{dataset}: id {rid!r} appears twice (rows {list(by_id).index(rid)} and {i})")
        by_id[rid] = row
    comps = read_completions(completions, reward.kind == "trajectory")
    unknown = [c["id"] for c in comps if c["id"] not in by_id]
    if unknown:
        raise UsageError(f"{completions}: {len(unknown)} completion id(s) not in {dataset}, first {unknown[0]!r}")
    items = [c["item"] for c in comps]
    if on_total is not None:
        on_total(len(items))
    task_rows = [by_id[c["id"]] for c in comps]
    states = [c.get("final_state") for c in comps] if reward.kind == "trajectory" else None
    box: Any
    if sandbox == "off":
        box = False
    elif sandbox == "on" or (sandbox == "auto" and not reward.trusted):
        box = Sandbox(SandboxLimits(timeout_s=timeout_s, memory_mb=memory_mb))
    else:
        box = False
    try:
        results = score_batch(reward, items, task_rows, final_states=states, sandbox=box, progress=progress)
        info = box.info if box is not False else {"sandbox": "off (in-process)"}
    finally:
        if box is not False:
            box.close()
    from schemas.reward_records import ScoredRecord

    records = [ScoredRecord(id=c["id"], score=r.score, passed=r.passed, components=r.components, error=r.error,
                            reason=r.reason, reward_version=r.reward_version).model_dump()
               for c, r in zip(comps, results)]
    summary = summarize(records)
    summary["reward_version"] = reward.version_id
    summary["sandbox"] = info
    if record_version:
        try:
            VersionLog().record(reward)
        except Exception as exc:  # noqa: BLE001 - the version log is a convenience, never a reason to fail
            summary["version_log_error"] = str(exc)
    return reward, records, summary


def _print_summary(reward: Any, records: list[dict[str, Any]], s: dict[str, Any]) -> None:
    t = Table(title=f"reward {reward.version}", show_header=False)
    t.add_column("", style="bold")
    t.add_column("")
    t.add_row("completions", str(s["completions"]))
    pr = "n/a (the reward gives no verdict)" if s["pass_rate"] is None else \
        f"{s['pass_rate']:.1%} ({s['passed']}/{s['with_verdict']})"
    t.add_row("pass rate", pr)
    if s["mean_score"] is not None:
        t.add_row("score", f"mean {s['mean_score']:.4g}, min {s['min_score']:.4g}, max {s['max_score']:.4g}")
    t.add_row("errors", f"[red]{s['errors']}[/red]" if s["errors"] else "0")
    box = s["sandbox"]
    t.add_row("sandbox", box.get("sandbox") or f"{box.get('workers')} workers, network {box.get('network_isolation')}, "
                                               f"writes {box.get('filesystem_isolation')}, processes "
                                               f"{box.get('process_isolation')}, {box.get('memory_mb')} MiB, "
                                               f"{box.get('timeout_s')}s per call")
    console.print(t)
    if s["histogram"]:
        h = Table(title="score histogram")
        h.add_column("score")
        h.add_column("count", justify="right")
        h.add_column("")
        top = max(c for _, _, c in s["histogram"]) or 1
        for lo, hi, c in s["histogram"]:
            h.add_row(f"{lo:.3g} .. {hi:.3g}", str(c), "█" * max(0 if c == 0 else 1, round(30 * c / top)))
        console.print(h)
    errs = [r for r in records if r["error"] is not None]
    if errs:
        e = Table(title=f"errors (first {min(5, len(errs))} of {len(errs)})")
        e.add_column("id")
        e.add_column("reason")
        for r in errs[:5]:
            e.add_row(r["id"], r["reason"][:160])
        console.print(e)


@reward_app.command("test")
def test_cmd(
    reward: str = typer.Argument(..., help="path/to/file.py:function, module:function or a registered name."),
    dataset: Path = typer.Option(..., "--dataset", "-d", help="Parquet file/folder or JSONL with an 'id' column."),
    completions: Path = typer.Option(..., "--completions", "-c", help='JSONL of {"id", "completion"}.'),
    json_out: Path | None = typer.Option(None, "--json", help="Write one record per completion here (.json/.jsonl)."),
    sandbox: str = typer.Option("auto", help="auto (user code sandboxed, built-ins in-process) | on | off."),
    timeout: float = typer.Option(10.0, min=0.01, help="Per-call time limit in the sandbox (seconds)."),
    memory_mb: int = typer.Option(2048, min=256, help="Address-space cap of each sandbox worker (MiB)."),
    label: str = typer.Option("", help="A human label for this reward version."),
) -> None:
    """Score completions with a reward and summarise: pass rate, score histogram, errors."""
    if sandbox not in ("auto", "on", "off"):
        fail(console, f"--sandbox must be auto, on or off, got {sandbox!r}")
    if json_out is not None and json_out.suffix not in (".json", ".jsonl"):
        fail(console, f"--json {json_out}: expected a .json or .jsonl path")
    try:
        with Progress(TextColumn("scoring"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console, transient=True) as bar:
            task = bar.add_task("score", total=None)
            rw, records, summary = run_reward_test(
                reward, dataset, completions, sandbox=sandbox, timeout_s=timeout, memory_mb=memory_mb, label=label,
                progress=lambda k: bar.advance(task, k), on_total=lambda n: bar.update(task, total=n))
    except UsageError as exc:
        fail(console, str(exc))
        return
    except Exception as exc:  # noqa: BLE001 - the sandbox could not start: say so, not a traceback
        from rewards import SandboxError

        if not isinstance(exc, SandboxError):
            raise
        print_error(console, exc, label="sandbox error")
        raise typer.Exit(1) from exc
    if json_out is not None:
        _write(json_out, records)
    _print_summary(rw, records, summary)
    if json_out is not None:
        console.print(f"wrote {len(records)} records to {json_out}")


@reward_app.command("list")
def list_cmd() -> None:
    """The registered rewards (built-in verifiers) with their versions."""
    from rewards import list_rewards
    from rewards.builtins import SUMMARY

    t = Table(title="registered rewards")
    t.add_column("version (name@hash)")
    t.add_column("kind")
    t.add_column("checks")
    for r in list_rewards():
        doc = (type(r.fn).__doc__ or r.fn.__doc__ or "").strip().splitlines()
        t.add_row(r.version_id, r.kind, SUMMARY.get(r.name) or (doc[0][:34] if doc else ""))
    console.print(t)


@reward_app.command("versions")
def versions_cmd(name: str | None = typer.Argument(None, help="Only this reward name.")) -> None:
    """Every version of a reward seen by `rlvr reward test` (the version log under $RLVR_HOME)."""
    import datetime as dt

    from rewards import VersionLog

    log = VersionLog()
    rows = log.versions(name)
    t = Table(title=f"reward versions ({log.path})")
    for col in ("name", "hash", "label", "ref", "first seen"):
        t.add_column(col)
    for r in rows:
        t.add_row(r["name"], r["content_hash"][:12], r["label"] or "", r["ref"] or "",
                  dt.datetime.fromtimestamp(r["first_seen"], dt.timezone.utc).strftime("%Y-%m-%d %H:%M"))
    console.print(t)


def register(app: typer.Typer) -> None:
    app.add_typer(reward_app, name="reward")
