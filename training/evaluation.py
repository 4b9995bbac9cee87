"""Held-out evaluation: sample each task n times, score every sample, aggregate pass@1 / pass@k, reward,
components, per category, per split and per failure reason; compare two reports with a paired bootstrap.

Why the split into *runners* and *aggregation*: how a sample is produced differs (one completion scored by a
reward function, or a multi-turn episode in a tool environment judged by its verifier), but what a report says
about the samples does not. `build_report` is pure, so the numbers are tested without a model; runners are the
only part that touches one.
"""

from __future__ import annotations

import inspect
import json
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol, Sequence

from schemas.evaluation import CompareReport, EvalReport, GroupStats, SampleResult, TaskEval, TaskFlip
from schemas.rewards import RewardResult
from schemas.task import TaskRow
from training.bootstrap import paired_bootstrap
from training.passk import ks_to_report, mean_pass_at_k
from training.signatures import reason_label

ERROR_REASON = "reward_error"


class EvaluationError(RuntimeError):
    """Evaluation could not run (no tasks in the split, k larger than the samples, an unreadable report)."""


class SampleRunner(Protocol):
    """Produces `n` scored samples of one task."""

    def __call__(self, task: TaskRow, n: int, seed: int) -> list[SampleResult]: ...


# --------------------------------------------------------------------------------------------- reward calling

def task_reward_kwargs(task: TaskRow) -> dict[str, Any]:
    """The keyword arguments a reward receives for a task: its reference fields and its metadata columns."""
    kwargs: dict[str, Any] = dict(task.metadata)
    kwargs.update(
        id=task.id,
        answer=task.answer,
        ground_truth_calls=[c.model_dump() for c in task.ground_truth_calls] if task.ground_truth_calls else None,
        tools=[t.model_dump() for t in task.tools] if task.tools else None,
        prompt=[m.model_dump(exclude_none=True) for m in task.prompt],
    )
    return kwargs


def _accepted_kwargs(fn: Callable[..., Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Only the keywords `fn` accepts (all of them when it takes **kwargs), so plain `f(completion, answer)` works."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return kwargs
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return kwargs
    return {k: v for k, v in kwargs.items() if k in params}


def to_reward_result(value: Any, pass_threshold: float = 1.0) -> RewardResult:
    """Normalise what a reward returned: a RewardResult as is, a number as a score passing at `pass_threshold`."""
    if isinstance(value, RewardResult):
        if value.passed is None and value.score is not None and not value.is_error:
            return value.model_copy(update={"passed": value.score >= pass_threshold})
        return value
    if isinstance(value, bool):
        return RewardResult(score=float(value), passed=value)
    if isinstance(value, (int, float)):
        return RewardResult(score=float(value), passed=float(value) >= pass_threshold)
    if isinstance(value, dict) and "score" in value:
        return to_reward_result(RewardResult.model_validate(value), pass_threshold)
    return RewardResult(score=None, error=f"reward returned {type(value).__name__}, expected a number or RewardResult")


def score_completion(
    reward: Callable[..., Any], completion: str, task: TaskRow, pass_threshold: float = 1.0
) -> RewardResult:
    """Call a reward on one completion. A reward that raises is an error result naming the exception."""
    try:
        value = reward(completion, **_accepted_kwargs(reward, task_reward_kwargs(task)))
    except Exception as exc:  # noqa: BLE001 - a crash in user code is reported as such
        return RewardResult(score=None, error=f"{type(exc).__name__}: {exc}")
    try:
        return to_reward_result(value, pass_threshold)
    except ValueError as exc:  # e.g. a NaN score
        return RewardResult(score=None, error=f"invalid reward value: {exc}")


def sample_from_result(completion: str, result: RewardResult, **extra: Any) -> SampleResult:
    """A SampleResult from a reward verdict: failing samples get a reason code (the reward's, else `failed`)."""
    if result.is_error:
        return SampleResult(completion=completion, score=None, passed=False, reason=ERROR_REASON,
                            error=result.error, **extra)
    passed = bool(result.passed)
    reason = "" if passed else (reason_label(result.reason) if result.reason.strip() else "failed")
    return SampleResult(completion=completion, score=result.score, passed=passed, reason=reason,
                        components=dict(result.components), **extra)


# ---------------------------------------------------------------------------------------------------- runners

def sample_completions(
    model: Any, tokenizer: Any, messages: list[dict[str, Any]], *, n: int, temperature: float,
    max_new_tokens: int, seed: int, tools: list[dict] | None = None,
) -> list[str]:
    """`n` completions of one prompt in one `generate` call (greedy when temperature is 0: then n copies)."""
    import torch

    from training.chat import chat_prompt_ids

    ids = chat_prompt_ids(tokenizer, messages, tools).to(model.device)
    kwargs: dict[str, Any] = {"max_new_tokens": max_new_tokens, "pad_token_id": tokenizer.pad_token_id}
    if temperature > 0:
        torch.manual_seed(seed)
        kwargs.update(do_sample=True, temperature=temperature, top_k=0, top_p=1.0, num_return_sequences=n)
    else:
        kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), **kwargs)
    texts = [tokenizer.decode(row[ids.shape[1]:], skip_special_tokens=True).strip() for row in out]
    return texts if temperature > 0 else texts * n


class CompletionRunner:
    """Single-turn tasks: sample completions from a model and score each with a reward function."""

    def __init__(self, model: Any, tokenizer: Any, reward: Callable[..., Any], *, temperature: float = 0.0,
                 max_new_tokens: int = 128, pass_threshold: float = 1.0) -> None:
        self.model, self.tokenizer, self.reward = model, tokenizer, reward
        self.temperature, self.max_new_tokens, self.pass_threshold = temperature, max_new_tokens, pass_threshold

    def __call__(self, task: TaskRow, n: int, seed: int) -> list[SampleResult]:
        messages = [m.model_dump(exclude_none=True) for m in task.prompt]
        texts = sample_completions(self.model, self.tokenizer, messages, n=n, temperature=self.temperature,
                                   max_new_tokens=self.max_new_tokens, seed=seed)
        return score_texts(self.reward, texts, task, self.pass_threshold)


def score_texts(reward: Any, texts: list[str], task: TaskRow, pass_threshold: float = 1.0) -> list[SampleResult]:
    """Score completions of one task: through the reward's `score_batch` when it has one (the training loader's
    `LoadedReward`, sandboxed and versioned), else by calling it per completion."""
    batch = getattr(reward, "score_batch", None)
    if callable(batch):
        kwargs = task_reward_kwargs(task)
        try:
            results = list(batch(texts, [kwargs] * len(texts)))
        except Exception as exc:  # noqa: BLE001 - a crash in user code is reported as such
            results = [RewardResult(score=None, error=f"{type(exc).__name__}: {exc}")] * len(texts)
        return [sample_from_result(t, to_reward_result(r, pass_threshold)) for t, r in zip(texts, results)]
    return [sample_from_result(t, score_completion(reward, t, task, pass_threshold)) for t in texts]


class FixedCompletionRunner:
    """Scores completions that already exist (`{task_id: [completion, ...]}`), e.g. a served model's outputs."""

    def __init__(self, completions: dict[str, list[str]], reward: Callable[..., Any], pass_threshold: float = 1.0):
        self.completions, self.reward, self.pass_threshold = completions, reward, pass_threshold

    def __call__(self, task: TaskRow, n: int, seed: int) -> list[SampleResult]:
        texts = self.completions.get(task.id)
        if not texts:
            raise EvaluationError(f"no completions given for task {task.id!r}")
        return score_texts(self.reward, texts[:n], task, self.pass_threshold)


def load_eval_model(name: str, registry: Any | None = None, threads: int | None = None) -> tuple[Any, Any, str]:
    """(model, tokenizer, resolved label) for a model argument: a registered checkpoint name or alias
    (`production`), a checkpoint or model folder (full weights or a LoRA adapter), or `default`."""
    from training.model import load_model

    path = name
    if registry is not None and name not in ("default", "embedded") and not Path(name).exists():
        try:
            rec = registry.checkpoint(name)
        except Exception:  # noqa: BLE001 - not in the catalog: treat it as a path or hub id below
            rec = None
        if rec is not None:
            path = rec.path
    folder = Path(path)
    if folder.is_dir() and (folder / "adapter_config.json").is_file():
        import json as _json

        from peft import PeftModel

        base = _json.loads((folder / "adapter_config.json").read_text()).get("base_model_name_or_path") or "default"
        manifest = folder / "manifest.json"
        if manifest.is_file():
            base = _json.loads(manifest.read_text()).get("base_model") or base
        model, tok = load_model(base if Path(base).exists() else "default", threads=threads)
        model = PeftModel.from_pretrained(model, str(folder))
        model.eval()
        return model, tok, str(folder)
    model, tok = load_model(path, threads=threads)
    return model, tok, path


# ------------------------------------------------------------------------------------------------ aggregation

def task_category(task: TaskRow) -> str:
    md = task.metadata or {}
    return str(md.get("category") or md.get("domain") or md.get("template") or "all")


def make_task_eval(task: TaskRow, samples: list[SampleResult], keep_samples: bool = True) -> TaskEval:
    scores = [s.score for s in samples if s.score is not None]
    return TaskEval(
        task_id=task.id, split=task.split, category=task_category(task),
        prompt=[m.model_dump(exclude_none=True) for m in task.prompt],
        n=len(samples), c=sum(1 for s in samples if s.passed),
        mean_score=(sum(scores) / len(scores)) if scores else None,
        samples=samples if keep_samples else [],
    )


def group_stats(tasks: Sequence[TaskEval], k: int) -> GroupStats:
    """pass@1 and pass@k (unbiased, for every reported k <= min n), mean reward and components, failure reasons."""
    if not tasks:
        return GroupStats(tasks=0, samples=0, pass_at_1=0.0)
    counts = [(t.n, t.c) for t in tasks]
    n_min = min(t.n for t in tasks)
    pass_k = {str(kk): mean_pass_at_k(counts, kk) for kk in ks_to_report(n_min) if kk <= max(k, 1)}
    if k <= n_min:
        pass_k[str(k)] = mean_pass_at_k(counts, k)
    samples = [s for t in tasks for s in t.samples]
    scores = [s.score for s in samples if s.score is not None]
    comp_sum: dict[str, float] = defaultdict(float)
    comp_n: Counter[str] = Counter()
    for s in samples:
        for name, v in s.components.items():
            comp_sum[name] += v
            comp_n[name] += 1
    reasons = Counter(s.reason for s in samples if not s.passed)
    return GroupStats(
        tasks=len(tasks), samples=sum(t.n for t in tasks),
        pass_at_1=mean_pass_at_k(counts, 1), pass_at_k=dict(sorted(pass_k.items(), key=lambda kv: int(kv[0]))),
        mean_reward=(sum(scores) / len(scores)) if scores else None,
        components={name: comp_sum[name] / comp_n[name] for name in sorted(comp_sum)},
        errors=sum(1 for s in samples if s.error is not None),
        failure_reasons=dict(reasons.most_common()),
    )


def build_report(task_evals: list[TaskEval], *, k: int, model: str, dataset: str, **fields: Any) -> EvalReport:
    """The full report from per-task results: overall, per category, per split (the `regression` split apart)."""
    if not task_evals:
        raise EvaluationError("no tasks were evaluated")
    by_cat: dict[str, list[TaskEval]] = defaultdict(list)
    by_split: dict[str, list[TaskEval]] = defaultdict(list)
    for t in task_evals:
        by_cat[t.category].append(t)
        by_split[t.split].append(t)
    return EvalReport(
        model=model, dataset=dataset, k=k, n_samples=max(t.n for t in task_evals),
        splits=sorted(by_split), overall=group_stats(task_evals, k),
        by_category={c: group_stats(v, k) for c, v in sorted(by_cat.items())},
        by_split={s: group_stats(v, k) for s, v in sorted(by_split.items())},
        tasks=task_evals, created_at=time.time(), **fields,
    )


def select_split(tasks: Iterable[TaskRow], splits: Sequence[str] | None) -> list[TaskRow]:
    """Tasks of the named splits; `None` or `["all"]` keeps every task."""
    tasks = list(tasks)
    if not splits or "all" in splits:
        return tasks
    chosen = [t for t in tasks if t.split in splits]
    if not chosen:
        have = sorted({t.split for t in tasks})
        raise EvaluationError(f"no tasks in split(s) {list(splits)}; the dataset has splits {have}")
    return chosen


def evaluate(
    tasks: Sequence[TaskRow],
    runner: SampleRunner,
    *,
    n_samples: int = 1,
    k: int = 1,
    model: str = "model",
    dataset: str = "dataset",
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
    keep_samples: bool = True,
    **fields: Any,
) -> EvalReport:
    """Run `runner` on every task `n_samples` times and build the report. `k` may not exceed `n_samples`."""
    if k < 1 or k > n_samples:
        raise EvaluationError(f"k={k} needs at least k samples per task; got n_samples={n_samples}")
    if not tasks:
        raise EvaluationError("no tasks to evaluate")
    t0 = time.time()
    evals: list[TaskEval] = []
    for i, task in enumerate(tasks):
        samples = runner(task, n_samples, seed + i)
        if len(samples) != n_samples:
            raise EvaluationError(f"runner returned {len(samples)} samples for task {task.id!r}, expected {n_samples}")
        evals.append(make_task_eval(task, samples, keep_samples))
        if progress:
            progress(i + 1, len(tasks))
    return build_report(evals, k=k, model=model, dataset=dataset, seed=seed, seconds=round(time.time() - t0, 2),
                        **fields)


# ------------------------------------------------------------------------------------------------ persistence

def save_report(report: EvalReport, path: str | Path, plots: bool = True) -> Path:
    """Write the report as JSON (atomically) and, with `plots`, its PNG plots beside it."""
    from generators.task_io import atomic_write_bytes

    path = Path(path)
    if plots:
        from training.eval_plots import write_plots

        report = report.model_copy(update={"plots": [str(p) for p in write_plots(report, path)]})
    atomic_write_bytes(path, report.model_dump_json(indent=1).encode("utf-8"))
    return path


def load_report(path: str | Path) -> EvalReport:
    path = Path(path)
    if not path.is_file():
        raise EvaluationError(f"{path}: no such evaluation report")
    try:
        return EvalReport.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise EvaluationError(f"{path}: not an evaluation report written by `rlvr eval --json` ({exc})") from exc


# ---------------------------------------------------------------------------------------------------- compare

def compare_reports(
    a: EvalReport, b: EvalReport, *, metric: str = "pass_at_1", n_resamples: int = 10_000,
    confidence: float = 0.95, seed: int = 0, a_name: str | None = None, b_name: str | None = None,
) -> CompareReport:
    """B - A on the tasks both reports share: paired bootstrap CI, per-category deltas, and the flipped tasks.

    `metric` is `pass_at_1` (per-task pass rate) or `mean_score` (per-task mean reward).
    """
    if metric not in ("pass_at_1", "mean_score"):
        raise EvaluationError(f"metric must be pass_at_1 or mean_score, got {metric!r}")
    ta = {t.task_id: t for t in a.tasks}
    tb = {t.task_id: t for t in b.tasks}
    shared = sorted(set(ta) & set(tb))
    if not shared:
        raise EvaluationError("the two reports share no task ids; compare evaluations of the same dataset")

    def value(t: TaskEval) -> float:
        return t.pass_rate if metric == "pass_at_1" else (t.mean_score or 0.0)

    va = [value(ta[i]) for i in shared]
    vb = [value(tb[i]) for i in shared]
    boot = paired_bootstrap(va, vb, n_resamples=n_resamples, confidence=confidence, seed=seed)
    cats: dict[str, list[tuple[float, float]]] = defaultdict(list)
    flips: list[TaskFlip] = []
    for tid, x, y in zip(shared, va, vb):
        cat = tb[tid].category
        cats[cat].append((x, y))
        ra, rb = ta[tid].pass_rate, tb[tid].pass_rate
        if (ra >= 0.5) != (rb >= 0.5):  # solved (a majority of samples pass) on one side only
            flips.append(TaskFlip(task_id=tid, category=cat, a=ra, b=rb, kind="fixed" if rb > ra else "broken"))
    by_category = {
        c: {"tasks": float(len(v)), "a": sum(x for x, _ in v) / len(v), "b": sum(y for _, y in v) / len(v),
            "delta": sum(y - x for x, y in v) / len(v)}
        for c, v in sorted(cats.items())
    }
    return CompareReport(
        a=a_name or a.model, b=b_name or b.model, metric=metric, n_tasks=len(shared),
        only_in_a=len(set(ta) - set(tb)), only_in_b=len(set(tb) - set(ta)),
        mean_a=boot.mean_a, mean_b=boot.mean_b, delta=boot.delta, ci_low=boot.ci_low, ci_high=boot.ci_high,
        confidence=confidence, p_not_better=boot.p_not_better, significant=boot.significant,
        n_resamples=n_resamples, by_category=by_category,
        flips=sorted(flips, key=lambda f: (f.kind, f.task_id)),
    )


def report_json(report: EvalReport | CompareReport) -> str:
    return json.dumps(report.model_dump(mode="json"), indent=1)
