"""Demo stage: held-out evaluation of the trained checkpoint against the base model, then the registry.

Reads the checkpoint the training stage left (`ctx.state["checkpoint"]`, a folder with manifest.json; or the
`final_checkpoint` of `ctx.state["train_result"]`), the dataset (`ctx.state["dataset"]`) and the reward
(`ctx.state["reward"]`), defaulting to the arithmetic example. Evaluates base and checkpoint on the test split
(pass@1, pass@k, per category, failure reasons; JSON + plots in `ctx.out/eval/`), compares them with a paired
bootstrap, registers both in the catalog (the base as the checkpoint's parent, hard-linked, never copied) and
promotes the checkpoint to `production`. The catalog is `ctx.state["registry_path"]`, else `$RLVR_REGISTRY`, else
the studio home's.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

ORDER = 50
TITLE = "evaluation + registry"

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_REWARD = str(ROOT / "examples" / "arithmetic" / "reward.py") + ":tagged_answer_shaped"
DEFAULT_DATASET = ROOT / "examples" / "arithmetic" / "tasks.jsonl"


def _trained_checkpoint(ctx) -> Path | None:
    for key in ("checkpoint", "checkpoint_dir", "final_checkpoint"):
        v = ctx.state.get(key)
        if v:
            return Path(str(v))
    res = ctx.state.get("train_result")
    folder = getattr(res, "final_checkpoint", None) if res is not None else None
    return Path(folder) if folder else None


def _link_base(dest: Path) -> Path:
    """The embedded model as a checkpoint folder: its files hard-linked (copied across file systems) + a manifest."""
    from training.model import ensure_embedded_cache
    from training.registry import make_manifest

    src = ensure_embedded_cache(full_hash=False)
    if not (dest / "manifest.json").is_file():
        dest.mkdir(parents=True, exist_ok=True)
        for f in src.iterdir():
            if f.is_file() and not (dest / f.name).exists():
                try:
                    os.link(f, dest / f.name)
                except OSError:
                    shutil.copy2(f, dest / f.name)
        make_manifest(dest, name="base", base_model="default", metrics={})
    return dest


def run(ctx) -> dict:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from generators.task_io import read_tasks
    from studio.demo import StageFailed
    from training.evaluation import (
        CompletionRunner, compare_reports, evaluate, load_eval_model, load_report, save_report, select_split,
    )
    from training.registry import Registry, RegistryError, file_digest, make_manifest, read_manifest
    from training.scoring import load_reward

    out = ctx.out / "eval"
    dataset = Path(ctx.state.get("dataset") or DEFAULT_DATASET)
    reward_ref = ctx.state.get("reward") or DEFAULT_REWARD
    reward = load_reward(reward_ref) if isinstance(reward_ref, str) else reward_ref
    n_tasks, n, tokens = (4, 2, 24) if ctx.quick else (16, 4, 48)
    tasks = select_split(read_tasks(dataset), ["test"])[:n_tasks]
    trained = _trained_checkpoint(ctx)
    if trained is not None and not (trained / "manifest.json").is_file():
        # a model folder saved without a manifest (e.g. the SFT result when no GRPO checkpoint was written):
        # describe the weights it holds, so that the registry can verify them later
        if not (trained / "config.json").is_file():
            raise StageFailed(f"the training stage's checkpoint {trained} is neither a checkpoint nor a model folder")
        make_manifest(trained, name=trained.name, base_model="default")

    manifest = read_manifest(trained) if trained is not None else None
    from training.model import EMBEDDED_NAME

    # the base is worth comparing against only when the run started from it (not a random-init CI model)
    embedded = ("default", "embedded", EMBEDDED_NAME)
    run_model = (manifest.config or {}).get("model", {}) if manifest is not None else {}
    with_base = manifest is None or manifest.base_model in embedded or (
        run_model.get("init", "pretrained") != "random" and run_model.get("name") in embedded)
    reg_path = ctx.state.get("registry_path") or os.environ.get("RLVR_REGISTRY") or None
    reg = Registry(reg_path)
    candidates = []
    base_rec = None
    if with_base:
        base_dir = _link_base(ctx.out / "checkpoints" / "base")
        try:
            base_rec = reg.register_checkpoint(base_dir, name=f"base-{read_manifest(base_dir).weights_hash[:8]}")
        except RegistryError as exc:
            raise StageFailed(f"could not register the base model: {exc}") from exc
        candidates.append(("base", str(base_dir)))
    if trained is not None:
        candidates.append(("trained", str(trained)))

    reports = {}
    for label, where in candidates:
        model, tok, _ = load_eval_model(where)
        runner = CompletionRunner(model, tok, reward, temperature=0.8, max_new_tokens=tokens)
        with Progress(TextColumn(f"evaluating {label}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=ctx.console, transient=True) as bar:
            job = bar.add_task(label, total=len(tasks))
            rep = evaluate(tasks, runner, n_samples=n, k=n, model=label, dataset=str(dataset), seed=0,
                           progress=lambda i, total: bar.update(job, completed=i), reward=getattr(reward, "version", None),
                           temperature=0.8, max_new_tokens=tokens, dataset_hash=file_digest(dataset))
        path = save_report(rep, out / f"{label}.json")
        rep = load_report(path)
        reports[label] = (path, rep)
        o = rep.overall
        ctx.console.print(f"{label}: pass@1 {o.pass_at_1:.3f}, pass@{n} {o.pass_at_k.get(str(n), 0):.3f}, mean reward "
                          f"{o.mean_reward if o.mean_reward is None else round(o.mean_reward, 3)}, failures "
                          f"{dict(list(o.failure_reasons.items())[:3])}", highlight=False)

    result: dict = {"tasks": f"{len(tasks)} test tasks x {n} samples", "reports": str(out)}
    promoted = base_rec.name if base_rec is not None else None
    if trained is not None:
        if "base" in reports:
            cmp = compare_reports(reports["base"][1], reports["trained"][1], n_resamples=5000, a_name="base",
                                  b_name="trained")
            (out / "compare.json").write_text(cmp.model_dump_json(indent=1))
            ctx.console.print(f"trained - base pass@1 {cmp.delta:+.3f} [95% CI {cmp.ci_low:+.3f} .. "
                              f"{cmp.ci_high:+.3f}], {sum(f.kind == 'fixed' for f in cmp.flips)} fixed, "
                              f"{sum(f.kind == 'broken' for f in cmp.flips)} broken", highlight=False)
            result["trained - base"] = f"{cmp.delta:+.3f} (95% CI {cmp.ci_low:+.3f}..{cmp.ci_high:+.3f})"
        try:
            rec = reg.register_checkpoint(trained, name=f"demo-{manifest.name}-{manifest.weights_hash[:8]}",
                                          parent=base_rec.name if base_rec is not None else None)
        except RegistryError as exc:
            raise StageFailed(f"could not register the trained checkpoint: {exc}") from exc
        promoted = rec.name
        reg.record_evaluation(reports["trained"][0], checkpoint=rec.name)
    if base_rec is not None:
        reg.record_evaluation(reports["base"][0], checkpoint=base_rec.name)
    current = reg.aliases().get("production")
    if current != promoted:
        reg.promote(promoted, note="rlvr demo")
    ok, msg = reg.verify("production")
    if not ok:
        raise StageFailed(f"the promoted checkpoint fails its hash check: {msg}")
    ctx.console.print(f"registry {reg.path}: production -> [bold]{promoted}[/bold] ({msg}); "
                      f"`rlvr checkpoints list` shows it, `rlvr checkpoints rollback` undoes it", highlight=False)
    ctx.state["eval_reports"] = {k: str(v[0]) for k, v in reports.items()}
    ctx.state["promoted_checkpoint"] = promoted
    result.update({"pass@1": ", ".join(f"{k} {v[1].overall.pass_at_1:.3f}" for k, v in reports.items()),
                   "plots": ", ".join(p for _, r in reports.values() for p in r.plots[:1]),
                   "registry": str(reg.path), "production": promoted})
    reg.close()
    return result
