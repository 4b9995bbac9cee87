"""The studio's catalog: datasets, reward versions, audits, runs, checkpoints with lineage, promotions, evaluations.

Why SQLite in WAL mode with `BEGIN IMMEDIATE` transactions: several processes write at once (a training run
registering checkpoints while the user promotes one from the CLI, or two runs finishing together). WAL lets readers
proceed during a write; `BEGIN IMMEDIATE` takes the write lock at the start of a transaction, so two writers never
both read-then-upgrade and deadlock, and the busy timeout makes the second one wait instead of failing. Every
multi-statement change (promote, rollback, delete) is one transaction: a crash leaves the catalog before or after
it, never between.

Promote and rollback are catalog operations on an alias (`production` by default): promote pushes a checkpoint
onto the alias's history; rollback deactivates the newest entry and makes the previous promoted checkpoint current
again, after re-hashing its weight files against the hash recorded when it was registered, so a rollback never
points production at weights that changed or vanished. Nothing is deleted unless the caller says `yes=True`.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from schemas.checkpoint import CheckpointManifest
from schemas.registry import (
    AuditRecord, CheckpointRecord, DatasetRecord, EvaluationRecord, PromotionRecord, RewardVersionRecord, RunRecord,
)

SCHEMA_VERSION = 1
DEFAULT_ALIAS = "production"
MANIFEST_FILE = "manifest.json"

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS datasets (
    hash TEXT PRIMARY KEY, name TEXT NOT NULL, path TEXT NOT NULL, spec TEXT NOT NULL DEFAULT '{}',
    counts TEXT NOT NULL DEFAULT '{}', created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS reward_versions (
    name TEXT NOT NULL, content_hash TEXT NOT NULL, label TEXT NOT NULL DEFAULT '', created_at REAL NOT NULL,
    PRIMARY KEY (name, content_hash));
CREATE TABLE IF NOT EXISTS audits (
    id INTEGER PRIMARY KEY AUTOINCREMENT, reward_version TEXT NOT NULL, dataset_hash TEXT, passed INTEGER NOT NULL,
    report_path TEXT, summary TEXT NOT NULL DEFAULT '{}', created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY, name TEXT NOT NULL, kind TEXT NOT NULL, config TEXT NOT NULL DEFAULT '{}',
    dataset_hash TEXT, reward_version TEXT, status TEXT NOT NULL, metrics TEXT NOT NULL DEFAULT '{}',
    started_at REAL NOT NULL, finished_at REAL);
CREATE TABLE IF NOT EXISTS checkpoints (
    name TEXT PRIMARY KEY, path TEXT NOT NULL, base_model TEXT NOT NULL, weights_hash TEXT NOT NULL,
    parent TEXT, run_id TEXT, dataset_hash TEXT, reward_version TEXT, step INTEGER NOT NULL DEFAULT 0,
    metrics TEXT NOT NULL DEFAULT '{}', manifest TEXT NOT NULL, created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS promotions (
    id INTEGER PRIMARY KEY AUTOINCREMENT, alias TEXT NOT NULL, checkpoint TEXT NOT NULL REFERENCES checkpoints(name),
    action TEXT NOT NULL, previous TEXT, active INTEGER NOT NULL, note TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS promotions_alias ON promotions(alias, id);
CREATE TABLE IF NOT EXISTS aliases (
    alias TEXT PRIMARY KEY, checkpoint TEXT NOT NULL REFERENCES checkpoints(name), updated_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS evaluations (
    id INTEGER PRIMARY KEY AUTOINCREMENT, checkpoint TEXT, model TEXT NOT NULL, dataset_hash TEXT,
    splits TEXT NOT NULL DEFAULT '[]', report_path TEXT NOT NULL, pass_at_1 REAL NOT NULL, mean_reward REAL,
    created_at REAL NOT NULL);
"""


class RegistryError(RuntimeError):
    """A catalog operation was refused (unknown name, hash mismatch, nothing to roll back to, delete without yes)."""


def default_registry_path() -> Path:
    """`$RLVR_REGISTRY` when set (tests, a shared team catalog), else `registry.sqlite` in the studio home."""
    import os

    from training.model import rlvr_home

    env = os.environ.get("RLVR_REGISTRY")
    return Path(env).expanduser() if env else rlvr_home() / "registry.sqlite"


# ------------------------------------------------------------------------------------------------------ hashing

def file_digest(path: str | Path) -> str:
    """sha256 of a file, or of a folder's files (relative names and contents, sorted), as hex."""
    path = Path(path)
    h = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    if not files:
        raise RegistryError(f"{path}: no such file, or a folder without files")
    for p in files:
        if path.is_dir():
            h.update(str(p.relative_to(path)).encode() + b"\0")
        with open(p, "rb") as f:
            while chunk := f.read(1 << 22):
                h.update(chunk)
    return h.hexdigest()


def weights_digest(folder: str | Path, files: list[str]) -> str:
    """The weights hash a manifest records: sha256 over each listed file's name and bytes, in sorted name order.

    The same recipe as the trainer's `training.checkpoints.weights_digest` (a test keeps them equal), repeated here
    so that the catalog and `rlvr checkpoints` never import torch just to hash files.
    """
    folder = Path(folder)
    missing = [n for n in files if not (folder / n).is_file()]
    if missing:
        raise RegistryError(f"{folder}: weight file {missing[0]} is missing")
    h = hashlib.sha256()  # the same recipe as training.checkpoints.weights_digest
    for name in sorted(files):
        p = folder / name
        h.update(name.encode())
        with open(p, "rb") as f:
            while chunk := f.read(1 << 22):
                h.update(chunk)
    return h.hexdigest()


def default_weight_files(folder: str | Path) -> list[str]:
    folder = Path(folder)
    return sorted(p.name for p in folder.iterdir() if p.is_file() and p.suffix in (".safetensors", ".bin", ".pt"))


def read_manifest(folder: str | Path) -> CheckpointManifest:
    folder = Path(folder)
    mpath = folder / MANIFEST_FILE
    if not mpath.is_file():
        raise RegistryError(f"{folder}: no {MANIFEST_FILE} (an incomplete checkpoint is never registered)")
    try:
        return CheckpointManifest.model_validate_json(mpath.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise RegistryError(f"{mpath}: not a valid checkpoint manifest ({exc})") from exc


def write_manifest(folder: str | Path, manifest: CheckpointManifest) -> Path:
    """Write `manifest.json` atomically (last, once the weights are complete)."""
    from generators.task_io import atomic_write_bytes

    return atomic_write_bytes(Path(folder) / MANIFEST_FILE, manifest.model_dump_json(indent=1).encode("utf-8"))


def _j(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


# ----------------------------------------------------------------------------------------------------- registry

def _folder_holds(folder: Path, manifest: dict, weights_hash: str) -> tuple[bool, str]:
    """Whether `folder` still holds the weights registered under `weights_hash`, and what was found: the one check
    behind `Registry.verify` and the move of a re-registered checkpoint's row."""
    if not folder.is_dir():
        return False, f"{folder} no longer exists"
    try:
        actual = weights_digest(folder, manifest.get("weights_files") or default_weight_files(folder))
    except RegistryError as exc:
        return False, str(exc)
    if actual != weights_hash:
        return False, f"weights hash is {actual[:16]}..., registered {weights_hash[:16]}..."
    return True, f"weights match {weights_hash[:16]}..."


class Registry:
    """The catalog at `path` (default `$RLVR_HOME/registry.sqlite`). One connection per instance and process."""

    def __init__(self, path: str | Path | None = None, *, timeout_s: float = 60.0) -> None:
        self.path = Path(path) if path else default_registry_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(str(self.path), timeout=timeout_s, isolation_level=None)
        self._conn.row_factory = sqlite3.Row
        self._conn.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
        mode = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if mode.lower() != "wal":
            raise RegistryError(f"{self.path}: could not switch the catalog to WAL mode (got {mode})")
        self._conn.execute("PRAGMA synchronous = NORMAL")
        self._conn.execute("PRAGMA foreign_keys = ON")
        with self.transaction() as c:
            for stmt in SCHEMA.split(";"):
                if stmt.strip():
                    c.execute(stmt)
            c.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "Registry":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """A write transaction that holds the write lock from its start (BEGIN IMMEDIATE); rolled back on error."""
        cur = self._conn.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            yield cur
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        else:
            cur.execute("COMMIT")

    def integrity_check(self) -> str:
        return self._conn.execute("PRAGMA integrity_check").fetchone()[0]

    # ------------------------------------------------------------------------------------- datasets & rewards

    def register_dataset(self, path: str | Path, *, name: str | None = None, spec: dict | None = None,
                         counts: dict[str, int] | None = None) -> DatasetRecord:
        """Record a dataset by its content hash (re-registering the same bytes is a no-op that returns the row)."""
        path = Path(path)
        digest = file_digest(path)
        if counts is None:
            counts = _split_counts(path)
        rec = DatasetRecord(hash=digest, name=name or path.stem, path=str(path.resolve()), spec=spec or {},
                            counts=counts, created_at=time.time())
        with self.transaction() as c:
            c.execute("INSERT OR IGNORE INTO datasets VALUES (?,?,?,?,?,?)",
                      (rec.hash, rec.name, rec.path, _j(rec.spec), _j(rec.counts), rec.created_at))
        return self.dataset(digest)

    def dataset(self, digest: str) -> DatasetRecord:
        row = self._conn.execute("SELECT * FROM datasets WHERE hash = ? OR hash LIKE ?", (digest, digest + "%")).fetchone()
        if row is None:
            raise RegistryError(f"no dataset with hash {digest!r} in {self.path}")
        return DatasetRecord(hash=row["hash"], name=row["name"], path=row["path"], spec=json.loads(row["spec"]),
                             counts=json.loads(row["counts"]), created_at=row["created_at"])

    def datasets(self) -> list[DatasetRecord]:
        return [self.dataset(r["hash"]) for r in self._conn.execute("SELECT hash FROM datasets ORDER BY created_at")]

    def register_reward_version(self, name: str, content_hash: str, label: str = "") -> RewardVersionRecord:
        with self.transaction() as c:
            c.execute("INSERT OR IGNORE INTO reward_versions VALUES (?,?,?,?)", (name, content_hash, label, time.time()))
        row = self._conn.execute("SELECT * FROM reward_versions WHERE name=? AND content_hash=?",
                                 (name, content_hash)).fetchone()
        return RewardVersionRecord(**dict(row))

    def reward_versions(self) -> list[RewardVersionRecord]:
        return [RewardVersionRecord(**dict(r)) for r in
                self._conn.execute("SELECT * FROM reward_versions ORDER BY created_at")]

    def record_audit(self, reward_version: str, passed: bool, *, dataset_hash: str | None = None,
                     report_path: str | None = None, summary: dict | None = None) -> AuditRecord:
        now = time.time()
        with self.transaction() as c:
            c.execute("INSERT INTO audits(reward_version, dataset_hash, passed, report_path, summary, created_at) "
                      "VALUES (?,?,?,?,?,?)", (reward_version, dataset_hash, int(passed), report_path,
                                               _j(summary or {}), now))
            rid = c.lastrowid
        return AuditRecord(id=rid, reward_version=reward_version, dataset_hash=dataset_hash, passed=passed,
                           report_path=report_path, summary=summary or {}, created_at=now)

    def audits(self, reward_version: str | None = None) -> list[AuditRecord]:
        q, args = "SELECT * FROM audits", ()
        if reward_version:
            q, args = q + " WHERE reward_version = ?", (reward_version,)
        return [AuditRecord(id=r["id"], reward_version=r["reward_version"], dataset_hash=r["dataset_hash"],
                            passed=bool(r["passed"]), report_path=r["report_path"], summary=json.loads(r["summary"]),
                            created_at=r["created_at"]) for r in self._conn.execute(q + " ORDER BY id", args)]

    # ------------------------------------------------------------------------------------------------- runs

    def start_run(self, name: str, *, kind: str = "grpo", config: dict | None = None, dataset_hash: str | None = None,
                  reward_version: str | None = None, run_id: str | None = None) -> RunRecord:
        rec = RunRecord(id=run_id or f"{name}-{uuid.uuid4().hex[:8]}", name=name, kind=kind, config=config or {},
                        dataset_hash=dataset_hash, reward_version=reward_version, started_at=time.time())
        with self.transaction() as c:
            c.execute("INSERT INTO runs VALUES (?,?,?,?,?,?,?,?,?,?)",
                      (rec.id, rec.name, rec.kind, _j(rec.config), rec.dataset_hash, rec.reward_version,
                       rec.status, _j(rec.metrics), rec.started_at, None))
        return rec

    def finish_run(self, run_id: str, *, status: str = "finished", metrics: dict[str, float] | None = None) -> RunRecord:
        with self.transaction() as c:
            n = c.execute("UPDATE runs SET status=?, metrics=?, finished_at=? WHERE id=?",
                          (status, _j(metrics or {}), time.time(), run_id)).rowcount
        if not n:
            raise RegistryError(f"no run {run_id!r} in {self.path}")
        return self.run(run_id)

    def run(self, run_id: str) -> RunRecord:
        r = self._conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if r is None:
            raise RegistryError(f"no run {run_id!r} in {self.path}")
        return _run(r)

    def runs(self) -> list[RunRecord]:
        return [_run(r) for r in self._conn.execute("SELECT * FROM runs ORDER BY started_at")]

    # ------------------------------------------------------------------------------------------ checkpoints

    def register_checkpoint(self, folder: str | Path, *, name: str | None = None, run_id: str | None = None,
                            parent: str | None = None, verify: bool = True) -> CheckpointRecord:
        """Register the checkpoint in `folder` from its manifest, after checking the weights match its hash.

        Registering the same name with the same hash again returns the existing row; when its recorded folder no
        longer holds those weights (deleted, moved, overwritten) and this one does (checked above), the row moves
        here: a deterministic run re-made in another folder (`rlvr demo` in a fresh clone) would otherwise leave
        the name pointing at nothing, and every promotion and rollback to it would fail its hash check. Names are
        identities (lineage and promotions refer to them): an explicit `name` taken by other weights is refused;
        the manifest's own name (`step-N`, the same in every run) gets the weights' hash appended instead.
        `parent` records the lineage when the manifest names none (a run started from a registered base model).
        """
        folder = Path(folder).resolve()
        manifest = read_manifest(folder)
        files = manifest.weights_files or default_weight_files(folder)
        if verify:
            actual = weights_digest(folder, files)
            if actual != manifest.weights_hash:
                raise RegistryError(f"{folder}: weights hash {actual[:16]}... does not match the manifest's "
                                    f"{manifest.weights_hash[:16]}... (files changed after the manifest was written)")
        explicit = name is not None
        name = name or manifest.name
        with self.transaction() as c:
            held = "SELECT weights_hash, path, manifest FROM checkpoints WHERE name = ?"
            row = c.execute(held, (name,)).fetchone()
            if row is not None and row[0] != manifest.weights_hash and not explicit:
                # trainer checkpoints are named step-N in every run: disambiguate by the weights' hash
                name = f"{name}-{manifest.weights_hash[:8]}"
                row = c.execute(held, (name,)).fetchone()
            if row is not None:
                if row[0] != manifest.weights_hash:
                    raise RegistryError(f"checkpoint name {name!r} is already registered with other weights; "
                                        "register this one under another name")
                if verify and row[1] != str(folder) and not _folder_holds(Path(row[1]), json.loads(row[2]), row[0])[0]:
                    c.execute("UPDATE checkpoints SET path = ?, manifest = ? WHERE name = ?",
                              (str(folder), manifest.model_dump_json(), name))
            else:
                c.execute("INSERT INTO checkpoints VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                          (name, str(folder), manifest.base_model, manifest.weights_hash, manifest.parent or parent, run_id,
                           manifest.dataset_hash, manifest.reward_version, manifest.step, _j(manifest.metrics),
                           manifest.model_dump_json(), manifest.created_at or time.time()))
        return self.checkpoint(name)

    def resolve(self, name_or_alias: str) -> str:
        """A checkpoint name from a name or an alias (`production`)."""
        row = self._conn.execute("SELECT checkpoint FROM aliases WHERE alias = ?", (name_or_alias,)).fetchone()
        if row is not None:
            return row[0]
        if self._conn.execute("SELECT 1 FROM checkpoints WHERE name = ?", (name_or_alias,)).fetchone():
            return name_or_alias
        raise RegistryError(f"no checkpoint or alias named {name_or_alias!r} in {self.path} "
                            "(see `rlvr checkpoints list`)")

    def checkpoint(self, name_or_alias: str) -> CheckpointRecord:
        name = self.resolve(name_or_alias)
        r = self._conn.execute("SELECT * FROM checkpoints WHERE name = ?", (name,)).fetchone()
        aliases = [a[0] for a in self._conn.execute("SELECT alias FROM aliases WHERE checkpoint = ? ORDER BY alias",
                                                     (name,))]
        return CheckpointRecord(
            name=r["name"], path=r["path"], base_model=r["base_model"], weights_hash=r["weights_hash"],
            parent=r["parent"], run_id=r["run_id"], dataset_hash=r["dataset_hash"],
            reward_version=r["reward_version"], step=r["step"], metrics=json.loads(r["metrics"]),
            manifest=json.loads(r["manifest"]), created_at=r["created_at"], aliases=aliases,
        )

    def checkpoints(self) -> list[CheckpointRecord]:
        return [self.checkpoint(r[0]) for r in self._conn.execute("SELECT name FROM checkpoints ORDER BY created_at, name")]

    def lineage(self, name_or_alias: str) -> list[CheckpointRecord]:
        """The checkpoint, its parent, the parent's parent... (parents not in the catalog end the chain)."""
        chain: list[CheckpointRecord] = []
        seen: set[str] = set()
        current: str | None = self.resolve(name_or_alias)
        while current and current not in seen:
            seen.add(current)
            try:
                rec = self.checkpoint(current)
            except RegistryError:
                break
            chain.append(rec)
            current = rec.parent
        return chain

    def verify(self, name_or_alias: str) -> tuple[bool, str]:
        """Re-hash a checkpoint's weight files against the registered hash: (ok, what was found)."""
        rec = self.checkpoint(name_or_alias)
        return _folder_holds(Path(rec.path), rec.manifest, rec.weights_hash)

    def _require_verified(self, name: str, what: str) -> None:
        ok, msg = self.verify(name)
        if not ok:
            raise RegistryError(f"refusing to {what} {name!r}: {msg}")

    def promote(self, name_or_alias: str, *, alias: str = DEFAULT_ALIAS, note: str = "") -> PromotionRecord:
        """Point `alias` at the checkpoint (weights verified first) and push it on the alias's history."""
        name = self.resolve(name_or_alias)
        self._require_verified(name, f"promote to {alias}")
        now = time.time()
        with self.transaction() as c:
            prev = c.execute("SELECT checkpoint FROM aliases WHERE alias = ?", (alias,)).fetchone()
            prev_name = prev[0] if prev else None
            c.execute("INSERT INTO promotions(alias, checkpoint, action, previous, active, note, created_at) "
                      "VALUES (?,?,?,?,?,?,?)", (alias, name, "promote", prev_name, 1, note, now))
            pid = c.lastrowid
            c.execute("INSERT INTO aliases VALUES (?,?,?) ON CONFLICT(alias) DO UPDATE SET checkpoint=excluded.checkpoint,"
                      " updated_at=excluded.updated_at", (alias, name, now))
        return self._promotion(pid)

    def rollback(self, *, alias: str = DEFAULT_ALIAS, note: str = "") -> PromotionRecord:
        """Make the previous promoted checkpoint of `alias` current again, after verifying its weights' hash.

        The entries of the current checkpoint at the top of the history are deactivated (so a second rollback goes
        one further back); a rollback is logged as its own history entry. The weights are hashed outside the write
        lock (seconds for a large model) and the history re-read under it: if another process changed the alias
        meanwhile, the rollback is planned again.
        """
        for _ in range(5):
            current, drop, target = self._rollback_plan(self._conn, alias)
            ok, msg = self.verify(target)
            if not ok:
                raise RegistryError(f"refusing to roll {alias} back to {target!r}: {msg}; {alias} stays on {current!r}")
            with self.transaction() as c:
                if self._rollback_plan(c, alias) != (current, drop, target):
                    continue  # the history moved while we hashed: plan again
                now = time.time()
                c.executemany("UPDATE promotions SET active=0 WHERE id=?", [(p,) for p in drop])
                c.execute("INSERT INTO promotions(alias, checkpoint, action, previous, active, note, created_at) "
                          "VALUES (?,?,?,?,?,?,?)", (alias, target, "rollback", current, 0, note, now))
                pid = c.lastrowid
                c.execute("UPDATE aliases SET checkpoint=?, updated_at=? WHERE alias=?", (target, now, alias))
            return self._promotion(pid)
        raise RegistryError(f"alias {alias!r} kept changing during the rollback; try again")

    @staticmethod
    def _rollback_plan(c: Any, alias: str) -> tuple[str, list[int], str]:
        """(current checkpoint, its history entries at the top, the previous promoted checkpoint)."""
        stack = c.execute("SELECT id, checkpoint FROM promotions WHERE alias=? AND action='promote' AND active=1 "
                          "ORDER BY id DESC", (alias,)).fetchall()
        if not stack:
            raise RegistryError(f"alias {alias!r} has never been promoted; nothing to roll back")
        current = stack[0][1]
        drop: list[int] = []
        for pid, ck in stack:
            if ck != current:
                return current, drop, ck
            drop.append(pid)
        raise RegistryError(f"alias {alias!r} has no earlier promoted checkpoint than {current!r} to roll back to")

    def history(self, alias: str = DEFAULT_ALIAS) -> list[PromotionRecord]:
        return [self._promotion(r[0]) for r in
                self._conn.execute("SELECT id FROM promotions WHERE alias=? ORDER BY id", (alias,))]

    def aliases(self) -> dict[str, str]:
        return {r[0]: r[1] for r in self._conn.execute("SELECT alias, checkpoint FROM aliases ORDER BY alias")}

    def _promotion(self, pid: int) -> PromotionRecord:
        r = self._conn.execute("SELECT * FROM promotions WHERE id=?", (pid,)).fetchone()
        return PromotionRecord(id=r["id"], alias=r["alias"], checkpoint=r["checkpoint"], action=r["action"],
                               previous=r["previous"], active=bool(r["active"]), note=r["note"],
                               created_at=r["created_at"])

    def delete_checkpoint(self, name: str, *, yes: bool = False, remove_files: bool = False) -> dict[str, Any]:
        """Remove a checkpoint from the catalog (and its folder with `remove_files`).

        Refused without `yes` (the error says what would go) and while an alias points at it; children keep their
        `parent` name, so lineage shows where the chain was cut."""
        name = self.resolve(name)
        rec = self.checkpoint(name)
        if rec.aliases:
            raise RegistryError(f"{name!r} is the current {', '.join(rec.aliases)}; promote another checkpoint first")
        plan = {"checkpoint": name, "path": rec.path, "remove_files": remove_files,
                "children": [r[0] for r in self._conn.execute("SELECT name FROM checkpoints WHERE parent=?", (name,))]}
        if not yes:
            raise RegistryError(f"would delete checkpoint {name!r} ({'and its folder ' + rec.path if remove_files else 'catalog entry only'}); "
                                "pass --yes to do it")
        with self.transaction() as c:
            c.execute("DELETE FROM promotions WHERE checkpoint=?", (name,))
            c.execute("DELETE FROM checkpoints WHERE name=?", (name,))
        if remove_files and Path(rec.path).is_dir():
            import shutil

            shutil.rmtree(rec.path)
        return plan

    # ---------------------------------------------------------------------------------------------- evaluations

    def record_evaluation(self, report_path: str | Path, *, checkpoint: str | None = None) -> EvaluationRecord:
        from training.evaluation import load_report

        report = load_report(report_path)
        if checkpoint is not None:
            checkpoint = self.resolve(checkpoint)
        now = time.time()
        with self.transaction() as c:
            c.execute("INSERT INTO evaluations(checkpoint, model, dataset_hash, splits, report_path, pass_at_1, "
                      "mean_reward, created_at) VALUES (?,?,?,?,?,?,?,?)",
                      (checkpoint, report.model, report.dataset_hash, _j(report.splits), str(Path(report_path).resolve()),
                       report.overall.pass_at_1, report.overall.mean_reward, now))
            eid = c.lastrowid
        return EvaluationRecord(id=eid, checkpoint=checkpoint, model=report.model, dataset_hash=report.dataset_hash,
                                splits=report.splits, report_path=str(report_path), pass_at_1=report.overall.pass_at_1,
                                mean_reward=report.overall.mean_reward, created_at=now)

    def evaluations(self, checkpoint: str | None = None) -> list[EvaluationRecord]:
        q, args = "SELECT * FROM evaluations", ()
        if checkpoint:
            q, args = q + " WHERE checkpoint = ?", (self.resolve(checkpoint),)
        return [EvaluationRecord(id=r["id"], checkpoint=r["checkpoint"], model=r["model"],
                                 dataset_hash=r["dataset_hash"], splits=json.loads(r["splits"]),
                                 report_path=r["report_path"], pass_at_1=r["pass_at_1"],
                                 mean_reward=r["mean_reward"], created_at=r["created_at"])
                for r in self._conn.execute(q + " ORDER BY id", args)]


def _run(r: sqlite3.Row) -> RunRecord:
    return RunRecord(id=r["id"], name=r["name"], kind=r["kind"], config=json.loads(r["config"]),
                     dataset_hash=r["dataset_hash"], reward_version=r["reward_version"], status=r["status"],
                     metrics=json.loads(r["metrics"]), started_at=r["started_at"], finished_at=r["finished_at"])


def _split_counts(path: Path) -> dict[str, int]:
    """Rows per split of a task dataset (empty when the file is not one)."""
    try:
        from generators.task_io import read_records

        rows = read_records(path)
    except Exception:  # noqa: BLE001 - a dataset we cannot read as tasks is still registrable by hash
        return {}
    counts: dict[str, int] = {}
    for r in rows:
        s = str(r.get("split") or "train")
        counts[s] = counts.get(s, 0) + 1
    counts["total"] = len(rows)
    return counts


def make_manifest(folder: str | Path, *, name: str, base_model: str, **fields: Any) -> CheckpointManifest:
    """A manifest for the weight files already in `folder` (hash computed here), written atomically, last."""
    folder = Path(folder)
    files = fields.pop("weights_files", None) or default_weight_files(folder)
    if not files:
        raise RegistryError(f"{folder}: no weight files (.safetensors/.bin/.pt) to describe")
    manifest = CheckpointManifest(name=name, base_model=base_model, weights_hash=weights_digest(folder, files),
                                  weights_files=files, created_at=fields.pop("created_at", time.time()), **fields)
    write_manifest(folder, manifest)
    return manifest


__all__ = ["Registry", "RegistryError", "file_digest", "weights_digest", "make_manifest", "read_manifest",
           "DEFAULT_ALIAS", "default_registry_path"]
