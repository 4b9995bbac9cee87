"""The GRPO-family trainer (GRPO, DAPO, Dr. GRPO, GSPO): rollouts, rewards, advantages, clipped policy updates,
DAPO's dynamic sampling and overlong handling, checkpoints that survive SIGKILL, per-step metrics.

Where the speed comes from (measured against TRL 1.16's GRPOTrainer in benchmarks/grpo_vs_trl.py):
- no reference model exists when beta == 0, and none of its forwards run;
- on-policy updates (num_iterations == 1) take the old log-probs from the same forward that computes the loss
  (detached: the ratio is exactly 1 and the gradient is the policy gradient), so no extra forward runs; with
  num_iterations > 1 the first inner pass records them, still without an extra forward;
- the training forward computes the LM head only on completion positions, a chunk at a time in reused buffers
  (training/lm_head.py: the batch's vocabulary-sized logits never exist at once, nor their gradient);
- under bf16 autocast, the linear, RMSNorm and MLP layers keep no bf16 weight copies and no recomputable
  intermediates for the backward (training/autocast_layers.py), and the heap is trimmed as the backward frees
  activations (training/memory.py): peak memory is what the step holds, not what the allocator kept;
- sampling uses a KV cache and stops as soon as every row has ended; nothing else (datasets, trl) is imported.

Data order is a pure function of (seed, stream position), and sampling seeds are a pure function of
(seed, step, round, rank), so a run resumed from a checkpoint draws exactly the prompts and samples that the
uninterrupted run would have.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from schemas.task import TaskRow
from schemas.train_config import TrainConfig
from training.best_checkpoint import METRIC, BestCheckpoint, after_evaluation, start_best, write_best
from training.checkpoints import (
    file_digest,
    latest_complete,
    load_optimizer_state,
    load_trainer_state,
    save_checkpoint,
)
from training.divergence import ArgumentsOnly, divergence_masks
from training.lr_schedule import scheduled_lr
from training.losses import (
    AggregationScope,
    PolicyLossInputs,
    PolicyLossParams,
    demonstration_nll,
    group_advantages,
    high_entropy_token_mask,
    policy_loss,
    token_logprobs,
    weight_negative_advantages,
    zero_variance_advantages,
    zero_variance_outcomes,
)
from training.memory import lean_allocator, peak_rss_mb, release_during_backward, release_free_memory, rss_mb
from training.metrics import MetricsLog, plot_metrics
from training.rollout import SamplingParams
from training.logprobs import common_prefix_len, full_logprobs, shared_groups, shared_prompt_logprobs
from training.rollout import left_pad
from training.samples import Sample, pack, slice_packed, unique_prompts
from training.scoring import LoadedReward, load_reward, passed, row_fields


class TrainingError(RuntimeError):
    """The run cannot continue (a reward that errors on most samples, no tasks, ...); the message says why."""


# ----------------------------------------------------------------------------------------------- data order
def stream_index(seed: int, n: int, position: int, shuffle: bool = True) -> int:
    """The task index at `position` of the endless data stream: epoch after epoch, each a seeded permutation."""
    epoch, offset = divmod(position, n)
    if not shuffle:
        return offset
    perm = np.random.default_rng([seed, epoch]).permutation(n)
    return int(perm[offset])


def sampling_seed(seed: int, step: int, round_: int, rank: int) -> int:
    return int(np.random.default_rng([seed, step, round_, rank, 7]).integers(0, 2**62))


# ------------------------------------------------------------------------------------------- distributed
@dataclass
class Dist:
    rank: int = 0
    world: int = 1
    accelerator: Any = None

    @property
    def main(self) -> bool:
        return self.rank == 0

    def all_gather_int(self, value: int) -> list[int]:
        if self.world == 1:
            return [value]
        t = torch.tensor([value], dtype=torch.long)
        out = [torch.zeros_like(t) for _ in range(self.world)]
        torch.distributed.all_gather(out, t)
        return [int(x) for x in out]

    def sum(self, values: list[float]) -> list[float]:
        if self.world == 1:
            return values
        t = torch.tensor(values, dtype=torch.float64)
        torch.distributed.all_reduce(t)
        return t.tolist()

    def barrier(self) -> None:
        if self.world > 1:
            torch.distributed.barrier()


def detect_dist() -> Dist:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Dist()
    from accelerate import Accelerator

    acc = Accelerator(cpu=not torch.cuda.is_available())
    return Dist(rank=acc.process_index, world=acc.num_processes, accelerator=acc)


# ----------------------------------------------------------------------------------------------- trainer
@dataclass
class TrainResult:
    output_dir: Path
    final_checkpoint: Path | None
    metrics_path: Path
    plot_path: Path | None
    steps: int
    resumed_from: Path | None
    last: dict[str, Any] = field(default_factory=dict)
    best: BestCheckpoint | None = None  # checkpoint.keep_best: the best policy by eval_pass_at_1 (else None)


Collector = Callable[[list[TaskRow], int, SamplingParams], list[Sample]]


class GRPOTrainer:
    """Train a policy on a task dataset with a verifiable reward. `model`/`tokenizer`/`tasks`/`reward` may be
    passed in (tests, the demo); otherwise they are loaded from the config."""

    def __init__(
        self,
        cfg: TrainConfig,
        *,
        model: Any = None,
        tokenizer: Any = None,
        tasks: list[TaskRow] | None = None,
        reward: LoadedReward | None = None,
        init_from: str | None = None,
        on_step: Callable[[dict[str, Any]], None] | None = None,
        stop_after: int | None = None,
    ):
        self.cfg = cfg
        self.loss_cfg = cfg.loss.resolved()
        self.out = Path(cfg.output_dir)
        self.ckpt_root = self.out / "checkpoints"
        self.on_step = on_step
        self.stop_after = stop_after  # train at most this many steps in this call (tests of resume)
        self.dist = detect_dist()
        self._model, self._tok, self._tasks, self._reward = model, tokenizer, tasks, reward
        self.init_from = init_from
        self.share_prompts = True  # compute each group's prompt once (exact; see training/logprobs.py)
        self.autocast_bf16 = False  # set from cfg in _setup
        self.device_type = "cpu"
        self.sft_demos: list[Sample] = []  # the step's verified demonstrations (guidance.sft_coef), set per rollout
        self.best: BestCheckpoint | None = None  # checkpoint.keep_best's record (training/best_checkpoint.py)
        self.focus: Any = None  # data.focus's FocusChoice (training/focus.py), once train() has made or read it
        self.retain_tasks: list[TaskRow] = []  # data.focus.retain_per_step's pool (training/retain.py)
        self.held: Any = None  # guard's HeldSet (training/guard.py), once train() has made or read it
        self.guard_changed: dict[str, Any] = {}  # task id -> its replacement (None: lost), saved with checkpoints
        self.guard_tasks: dict[str, TaskRow] = {}
        self.resume_state: dict[str, Any] = {}

    # ------------------------------------------------------------------------------------------- setup
    def _setup(self) -> None:
        from training.model import configure_threads
        from training.policy import apply_lora, load_policy

        cfg = self.cfg
        configure_threads(cfg.threads)
        lean_allocator()
        torch.manual_seed(cfg.seed)
        random.seed(cfg.seed)
        self.tasks = self._tasks if self._tasks is not None else load_train_tasks(cfg)
        if not self.tasks:
            raise TrainingError(f"no training tasks in {cfg.data.path} (split {cfg.data.split!r})")
        self.demonstrations = self._guidance()
        if self._reward is not None:
            self.reward = self._reward
        elif cfg.rollout.environment and (cfg.reward.function == "env" or cfg.reward.function.startswith("env:")):
            self.reward = LoadedReward(fn=None, ref=cfg.reward.function,
                                       version=f"{cfg.rollout.environment}-verifier:{cfg.reward.function}")
        else:
            self.reward = load_reward(cfg.reward.function, kwargs=cfg.reward.kwargs)
        self.resumed_from = latest_complete(self.ckpt_root)
        state: dict[str, Any] = {}
        if self.resumed_from is not None:
            state = load_trainer_state(self.resumed_from)
            self.resume_state = state
            if self.cfg.lora.enabled:
                from peft import PeftModel

                base, tok = load_policy(cfg.model, seed=cfg.seed, threads=cfg.threads, source=self.init_from)
                model = PeftModel.from_pretrained(base, str(self.resumed_from), is_trainable=True)
            else:
                model, tok = load_policy(cfg.model, seed=cfg.seed, threads=cfg.threads, source=str(self.resumed_from))
        else:
            try:  # the model cannot take the config's freeze / LoRA choice: say so as a training error
                if self._model is not None:
                    model, tok = self._model, self._tok
                    tok.padding_side = "left"
                else:
                    model, tok = load_policy(cfg.model, seed=cfg.seed, threads=cfg.threads, source=self.init_from)
                model = apply_lora(model, cfg.lora)
            except ValueError as exc:
                raise TrainingError(str(exc)) from exc
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        model.train()
        self.model, self.tok = model, tok
        self.device_type = next(model.parameters()).device.type
        self.autocast_bf16 = cfg.model.precision == "bf16-autocast"
        # same math, less memory: about half of what autograd keeps under autocast, no vocabulary-sized lookup
        # gradient, and no freed activations left resident during the backward
        from training import autocast_layers, embedding_grad

        if self.autocast_bf16:
            autocast_layers.install(model)
        if self.dist.world == 1:  # DDP reduces .grad during the backward (training/embedding_grad.py)
            embedding_grad.install(model)
        release_during_backward(model)
        self.ref_model = self._make_reference(model) if self.loss_cfg["beta"] > 0 else None
        params = [p for p in model.parameters() if p.requires_grad]
        from training.optim import make_optimizer

        self.optimizer = make_optimizer(cfg.optim.optimizer, params, lr=cfg.optim.lr, betas=cfg.optim.betas,
                                        weight_decay=cfg.optim.weight_decay, momentum=cfg.optim.momentum,
                                        seed=cfg.seed)
        if self.resumed_from is not None:
            opt_state = load_optimizer_state(self.resumed_from)
            if opt_state is not None:
                self.optimizer.load_state_dict(opt_state)
        elif cfg.optim.sft_moments != "none":  # a fresh run continues SFT's AdamW; a resumed one has its own state
            from training.optim import SFT_MOMENTS, load_moments

            start = Path(self.init_from or cfg.model.name)  # the SFT stage's folder, or model.name with --skip-sft
            if not start.is_dir():
                raise TrainingError(f"optim.sft_moments reads {SFT_MOMENTS} from the SFT model's folder; the run starts "
                                    f"from {str(start)!r}, which is not a folder: start from the SFT model")
            try:
                load_moments(start / SFT_MOMENTS, self.optimizer, model, cfg.optim.betas,
                             first=cfg.optim.sft_moments == "both")
            except (OSError, ValueError) as exc:
                raise TrainingError(str(exc)) from exc
        self.ddp_model = model
        if self.dist.world > 1:
            self.ddp_model = self.dist.accelerator.prepare_model(model)
            self.share_prompts = False  # DDP expects one forward per backward; the shared path runs two
        self.step = int(state.get("step", 0))
        self.cursor = int(state.get("cursor", 0))
        self.totals = dict(state.get("totals", {"groups_sampled": 0, "groups_kept": 0, "reward_errors": 0}))
        self.best = BestCheckpoint.model_validate(state["best"]) if state.get("best") else None
        self.collect = self._make_collector()
        self.metrics = MetricsLog(self.out / "metrics.jsonl")
        if self.dist.main:
            self.metrics.truncate_after(self.step)

    def _guidance(self) -> dict[str, list[str]] | None:
        """guidance.demonstrations: the replies to replay per task; the task pool shrinks to the tasks that have one
        (how many is logged per step as `guided_tasks`)."""
        path = self.cfg.guidance.demonstrations
        if not path:
            return None
        from training.guidance import GuidanceError, demonstration_replies

        try:
            demos = demonstration_replies(path)
        except GuidanceError as exc:
            raise TrainingError(str(exc)) from exc
        guided = [t for t in self.tasks if t.id in demos]
        if not guided:
            raise TrainingError(f"guidance.demonstrations {path}: none of its task ids is a training task of "
                                f"{self.cfg.data.path} (split {self.cfg.data.split!r})")
        self.guided_tasks = len(guided)
        self.tasks = guided
        return demos

    def _make_reference(self, model: Any) -> Any:
        """A frozen copy of the starting policy (with LoRA: the base with the adapter disabled, no copy)."""
        if self.cfg.lora.enabled:
            return None
        import copy

        ref = copy.deepcopy(model)
        ref.eval()
        for p in ref.parameters():
            p.requires_grad_(False)
        return ref

    def _make_collector(self) -> Collector:
        cfg = self.cfg
        if cfg.rollout.environment:
            from training.multiturn import make_environment_collector

            return make_environment_collector(cfg, self.model, self.tok, self.reward, autocast_bf16=self.autocast_bf16,
                                              demonstrations=self.demonstrations)
        from training.rollout import make_backend

        backend = make_backend(cfg.rollout.backend, self.model, self.tok, autocast_bf16=self.autocast_bf16)
        self.backend = backend
        system = cfg.rollout.system_prompt

        def collect(tasks: list[TaskRow], g: int, params: SamplingParams) -> list[Sample]:
            from training.guidance import GuidanceError, append_demonstrations
            from training.samples import samples_from_batch

            prompts = [task_messages(t, system) for t in tasks]
            guided = self.demonstrations is not None
            rb = backend.generate(prompts, g - guided, params)
            samples = samples_from_batch(rb, [t.id for t in tasks])
            if guided:  # each group: its sampled members, then the task's demonstration
                try:
                    samples = append_demonstrations(samples, tasks, self.demonstrations, self.tok,
                                                    cfg.rollout.max_new_tokens)
                except GuidanceError as exc:
                    raise TrainingError(str(exc)) from exc
            rows = [row_fields(tasks[s.group]) for s in samples]
            for s, r in zip(samples, self.reward.score_batch([s.text for s in samples], rows)):
                s.result = r
            return samples

        return collect

    # ------------------------------------------------------------------------------------------- loop
    def train(self) -> TrainResult:
        self._setup()
        self._hold_guard()
        self._apply_focus()
        cfg = self.cfg
        done_here = 0
        last: dict[str, Any] = {}
        final = self.resumed_from
        keep_best = cfg.checkpoint.keep_best
        if keep_best and self.best is None:
            self._measure_start()
        while self.step < cfg.steps:
            if self.stop_after is not None and done_here >= self.stop_after:
                break
            last = self.train_step()
            done_here += 1
            if self.step % cfg.checkpoint.every == 0 or self.step == cfg.steps or (keep_best and self._eval_due()):
                final = self.save()
        plot = None
        if self.dist.main:
            plot = plot_metrics(self.metrics.read(), self.out / "metrics.png", title=f"{cfg.name} ({self.loss_cfg['type']})")
        return TrainResult(self.out, final, self.metrics.path, plot, self.step, self.resumed_from, last,
                           self.best if keep_best else None)

    def _apply_focus(self) -> None:
        """data.focus: draw only from the training tasks of the groups the starting policy fails (training/focus.py).
        A resumed run reads the choice its first attempt wrote; it never probes the checkpoint it resumes from."""
        focus = self.cfg.data.focus
        if focus is None:
            return
        from training.focus import (FOCUS_FILE, choose_focus, focused_tasks, group_of, probe_groups, probe_mistakes,
                                    probe_sample, read_focus, write_focus)

        start, data = self._base_model(), self.cfg.data
        probed = f"{data.eval_path or data.path}:{data.eval_split}"

        def make() -> None:
            t0 = time.perf_counter()
            probe = probe_sample(load_train_tasks(self.cfg, eval_split=True), focus.by, focus.probe_per_group)
            if not probe:
                raise TrainingError(f"data.focus probes the eval split: no tasks in {data.eval_path or data.path} "
                                    f"(split {data.eval_split!r}); set data.eval_split or data.eval_path")
            from training.train_eval import greedy_pass_at_1

            placed = bool(focus.mistake_from_turn) or focus.mistake_kind != "any"
            r = greedy_pass_at_1(self.model, self.tok, self.cfg, probe, reward=self.reward, keep_episodes=placed)
            try:
                mistakes = probe_mistakes(probe, r["episodes"]) if placed else None
                choice = choose_focus(self.tasks, probe_groups(probe, r["passed_ids"], focus.by, mistakes), focus,
                                      start, probed)
            except ValueError as exc:
                raise TrainingError(str(exc)) from exc
            write_focus(self.out, choice.model_copy(update={"probe_s": round(time.perf_counter() - t0, 1)}))
        choice = self._made_once("data.focus", self.out / FOCUS_FILE, "chosen", "the tasks it trained on",
                                 lambda: read_focus(self.out), lambda c: c.matches(focus, start, probed), make)
        self.focus = choice
        if focus.retain_per_step:
            from training.retain import retain_groups

            solved = set(retain_groups(choice))
            self.retain_tasks = [t for t in self.tasks
                                 if focus.retain_from == "all" or group_of(t, focus.by) in solved]
            if not self.retain_tasks:
                raise TrainingError(
                    f"data.focus.retain_per_step {focus.retain_per_step} anchors the {focus.by} groups the starting "
                    f"policy passes above max_pass_rate {focus.max_pass_rate:g}, and no training task is in one "
                    f"(groups above the bar: {sorted(solved) or 'none'}); set data.focus.retain_per_step to 0")
        self.tasks = focused_tasks(self.tasks, choice)

    def _made_once(self, name: str, path: Path, verb: str, at_stake: str, read: Callable[[], Any],
                   fits: Callable[[Any], bool], make: Callable[[], None]) -> Any:
        """What a run decides from its starting policy before the first update (data.focus's choice, guard's held
        set): read back from `path` when it fits this run's settings, else made on the main rank (`make` writes it)
        and read by every rank. A resumed run never makes it again from the checkpoint it resumes from: when the
        file is missing or does not fit, it is refused, naming what would be unknown."""
        got = read()
        if got is None or not fits(got):
            if self.resumed_from is not None:
                raise TrainingError(
                    f"{name}: {path} is missing or was {verb} with other settings (or another starting model) than "
                    f"this run, which resumes from {self.resumed_from}: {at_stake} are unknown; restore the file, or "
                    "start in a fresh output_dir")
            if self.dist.main:
                make()
            self.dist.barrier()
            got = read()
        return got

    def _hold_guard(self) -> None:
        """guard: the starting policy's passing greedy episodes on the first guard.per_group training tasks of each
        group, held for every step's check (training/guard.py). A resumed run reads the set its first attempt wrote,
        with the episodes `keep: passes` replaced up to its checkpoint; it never re-probes the checkpoint.

        Every rank holds and checks the whole set: the same forward and the same greedy decoding of the same weights
        give every rank the same verdict without exchanging episodes."""
        guard = self.cfg.guard
        if guard is None:
            return
        from training.focus import probe_sample
        from training.guard import GUARD_FILE, HeldEpisode, HeldSet, held_episodes, read_held, write_held

        start = self._base_model()
        probe = probe_sample(self.tasks, guard.by, guard.per_group)

        def make() -> None:
            from training.train_eval import greedy_pass_at_1

            t0 = time.perf_counter()
            r = greedy_pass_at_1(self.model, self.tok, self.cfg, probe, reward=self.reward)
            # the passes decoded again one task at a time, as `_guard_check` decodes them: in a batch, other
            # tasks' padding changes the rounding, so a batched pass need not be the task's own greedy episode
            passed = set(r["passed_ids"])
            passes = [t for t in probe if t.id in passed]
            alone = greedy_pass_at_1(self.model, self.tok, self.cfg, passes, reward=self.reward,
                                     keep_samples=True, batch=1)
            episodes, ties = held_episodes(alone["samples"], self.model, self.tok.pad_token_id, self.autocast_bf16)
            if not episodes:
                raise TrainingError(
                    f"guard: the starting policy passes none of the {len(probe)} training tasks it ran greedily "
                    f"(guard.per_group {guard.per_group} per {guard.by}), so there is nothing to hold; raise "
                    "guard.per_group, or drop the guard section")
            write_held(self.out, HeldSet(start=start, by=guard.by, per_group=guard.per_group,
                                         tasks_probed=len(probe), ties=ties,
                                         probe_s=round(time.perf_counter() - t0, 1), episodes=episodes))
        held = self._made_once("guard", self.out / GUARD_FILE, "held", "the decisions its steps kept",
                               lambda: read_held(self.out), lambda h: h.matches(guard, start), make)
        self.held = held
        self.guard_tasks = {t.id: t for t in probe}
        self.guard_changed = {k: (None if v is None else HeldEpisode.model_validate(v))
                              for k, v in self.resume_state.get("guard_changed", {}).items()}

    @property
    def held_now(self) -> list[Any]:
        """The episodes held now: guard.json's, each replaced by the episode `keep: passes` held in its place since
        (one the check lost, at most guard.max_lost a step, leaves the set)."""
        if self.held is None:
            return []
        now = [self.guard_changed.get(e.task_id, e) for e in self.held.episodes]
        return [e for e in now if e is not None]

    def _guard_step(self, snap: Any) -> dict[str, float]:
        """Check the step just taken against the held passes and keep the largest part of it (1, 1/2, ... of
        guard.backtrack halvings) that passes `_guard_check`, or none of it (then no guard_flips: the weights are
        those the previous step kept)."""
        if snap is None:
            return {}
        from training.guard import backtrack_scales

        guard = self.cfg.guard
        t0 = time.perf_counter()
        first: float | None = None
        for checks, scale in enumerate(backtrack_scales(guard.backtrack), start=1):
            if scale != 1.0:
                snap.apply_scale(scale)
            ok, stats = self._guard_check()
            first = stats["guard_flips"] if first is None else first
            if ok:
                return {"guard_scale": scale, **stats, "guard_flips_whole_step": first, "guard_checks": float(checks),
                        "guard_s": time.perf_counter() - t0}
        snap.apply_scale(0.0)
        return {"guard_scale": 0.0, "guard_flips_whole_step": first, "guard_checks": float(guard.backtrack + 1),
                "guard_s": time.perf_counter() - t0}

    def _guard_check(self) -> tuple[bool, dict[str, float]]:
        """Whether the current weights keep the held passes (guard.keep), and what the check saw. With `passes`,
        the episodes with a flipped decision are decoded again greedily and verified; when the step stands, the
        new passing episodes replace them (held where the current weights' teacher-forced argmax agrees) and the
        lost ones (at most max_lost) leave the set."""
        from training.guard import count_flips, episode_leads, flipped_episodes, held_episodes

        guard = self.cfg.guard
        held = self.held_now
        leads = episode_leads(self.model, held, self.tok.pad_token_id, autocast_bf16=self.autocast_bf16)
        flips = count_flips(held, leads)
        if guard.keep == "decisions":
            return flips <= guard.max_flips, {"guard_flips": float(flips)}
        moved = flipped_episodes(held, leads)
        if not moved:
            return True, {"guard_flips": float(flips), "guard_redecoded": 0.0, "guard_lost": 0.0}
        from training.train_eval import greedy_pass_at_1

        tasks = [self.guard_tasks[held[i].task_id] for i in moved]
        # one task at a time: a left-padded batch's shapes change bf16 rounding -- the same weights in batches of 16
        # instead of 48 decoded 38 of learn_workplace's 265 test episodes differently (1 verdict flipped;
        # benchmarks/results/batch_noise_sft_bf16.json); alone, an episode depends on the weights only
        r = greedy_pass_at_1(self.model, self.tok, self.cfg, tasks, reward=self.reward, keep_samples=True, batch=1)
        lost = len(tasks) - len(r["passed_ids"])
        stats = {"guard_flips": float(flips), "guard_redecoded": float(len(tasks)), "guard_lost": float(lost)}
        if lost > guard.max_lost:
            return False, stats
        fresh, _ = held_episodes(r["samples"], self.model, self.tok.pad_token_id, self.autocast_bf16)
        by_id = {e.task_id: e for e in fresh}
        for t in tasks:
            self.guard_changed[t.id] = by_id.get(t.id)
        return True, stats

    def _measure_start(self) -> None:
        """checkpoint.keep_best's bar: the held-out pass rate of the policy before this run's first update (or of the
        checkpoint resumed from, when that run kept no best), logged as the metrics line of its step."""
        if self.dist.main:
            r = self._evaluate()
            if not r:
                data = self.cfg.data
                raise TrainingError(f"checkpoint.keep_best: no evaluation tasks in {data.eval_path or data.path} "
                                    f"(split {data.eval_split!r}); set data.eval_split or data.eval_path")
            start = self.resumed_from
            self.best = start_best(self.step, r["eval_pass_at_1"], str(start) if start else self._base_model(),
                                   int(r["eval_tasks"]), start.name if start else None)
            if self.step == 0:  # a fresh run: drop the start line of an attempt killed before its first checkpoint
                self.metrics.truncate_after(-1)
                self.metrics.append({"step": 0, **r})
            write_best(self.ckpt_root, self.best)
        self.dist.barrier()

    def _draw(self, count: int) -> list[TaskRow]:
        """`count` tasks for this rank from the shared stream; every rank advances the cursor identically."""
        counts = self.dist.all_gather_int(count)
        start = self.cursor + sum(counts[: self.dist.rank])
        self.cursor += sum(counts)
        n = len(self.tasks)
        return [self.tasks[stream_index(self.cfg.seed, n, start + i, self.cfg.data.shuffle)] for i in range(count)]

    def _rollout_phase(self) -> tuple[list[Sample], dict[str, float]]:
        cfg = self.cfg
        g = cfg.rollout.num_generations
        world = self.dist.world
        if (cfg.batch_size // g) % world:
            raise TrainingError(f"{cfg.batch_size // g} prompts per step do not split over {world} processes")
        want = cfg.batch_size // g // world
        ds = cfg.dynamic_sampling
        rounds_max = ds.max_rounds if ds.enabled else 1
        kept: list[list[Sample]] = []
        sampled = zero_var = errors = err_groups = 0
        first_zero_frac = None
        train_pass, train_fail = cfg.loss.zero_variance_kinds()  # RL-ZVP: such groups carry signal, keep them
        zv_trained = 0
        all_samples: list[Sample] = []
        rounds_run = 0
        for rnd in range(rounds_max):
            need = max(0, want - len(kept))
            if world > 1 and max(self.dist.all_gather_int(need)) == 0:
                break
            if world == 1 and need == 0:
                break
            tasks = self._draw(need)
            if not tasks:
                continue
            params = SamplingParams(max_new_tokens=cfg.rollout.max_new_tokens, temperature=cfg.rollout.temperature,
                                    top_p=cfg.rollout.top_p, top_k=cfg.rollout.top_k,
                                    seed=sampling_seed(cfg.seed, self.step, rnd, self.dist.rank))
            samples = self.collect(tasks, g, params)
            rounds_run += 1
            all_samples.extend(samples)
            groups: dict[int, list[Sample]] = {}
            for s in samples:
                self._score(s)
                groups.setdefault(s.group, []).append(s)
            sampled += len(groups)
            zv_round = 0
            for members in groups.values():
                if any(m.score is None for m in members):
                    err_groups += 1
                    errors += sum(m.score is None for m in members)
                    continue
                scores = [m.score for m in members]
                if max(scores) - min(scores) < 1e-9:
                    zero_var += 1
                    zv_round += 1
                    all_pass = all(m.passed for m in members)
                    trained = (train_pass and all_pass) or (train_fail and not any(m.passed for m in members))
                    zv_trained += trained
                    if ds.enabled and not trained:
                        continue
                kept.append(members)
            if first_zero_frac is None:
                first_zero_frac = zv_round / max(1, len(groups))
        if errors and errors > 0.5 * max(1, len(all_samples)):
            first = next(s.result.error for s in all_samples if s.result is not None and s.result.error)
            raise TrainingError(f"reward {self.reward.ref} errored on {errors}/{len(all_samples)} samples; first: {first}")
        kept = kept[:want]
        self.totals["groups_sampled"] += sampled
        self.totals["groups_kept"] += len(kept)
        self.totals["reward_errors"] += errors
        stats = {
            "ds_rounds": float(rounds_run), "groups_sampled": float(sampled), "groups_kept": float(len(kept)),
            "zero_variance_frac": float(first_zero_frac or 0.0), "zero_variance_groups": float(zero_var),
            "reward_errors": float(errors), "error_groups": float(err_groups),
        }
        if train_pass or train_fail:
            stats["zero_variance_groups_trained"] = float(zv_trained)
        demos = [s for s in all_samples if s.extras.get("demonstration")]
        # guidance.sft_coef's supervised term: every drawn task's demonstration the verifier passed, kept or not
        self.sft_demos = [s for s in demos if s.passed] if cfg.guidance.sft_coef else []
        stats.update(_reward_stats([s for s in all_samples if not s.extras.get("demonstration")]))
        if demos:  # a demonstration the verifier fails is a data problem worth seeing, not a sample's luck
            stats["demo_pass_rate"] = float(np.mean([s.passed for s in demos]))
            stats["guided_tasks"] = float(self.guided_tasks)
            if cfg.guidance.branch == "first_mistake":  # guided members built at a failed episode's first mistake
                stats["guided_from_mistake"] = float(sum(bool(s.extras.get("corrective")) for s in demos))
        return [s for grp in kept for s in grp], stats

    def _score(self, s: Sample) -> None:
        r = s.result
        if r is None or r.score is None:
            s.score, s.passed = None, False
            return
        score = float(r.score)
        ov = self.cfg.overlong
        if ov.mode == "soft":
            score += soft_overlong_penalty(len(s.completion_ids), self.cfg.rollout.max_new_tokens, ov.buffer_tokens,
                                           ov.penalty)
        s.score, s.passed = score, passed(r)

    def train_step(self) -> dict[str, Any]:
        cfg = self.cfg
        t0 = time.perf_counter()
        samples, stats = self._rollout_phase()
        release_free_memory()
        rss_rollout = rss_mb()
        t_gen = time.perf_counter() - t0
        g = cfg.rollout.num_generations
        lc = self.loss_cfg
        record: dict[str, Any] = {"step": self.step + 1}
        n_tokens = sum(sum(s.loss_mask) for s in samples)
        retain, retain_stats = self._retain_batch()
        record.update(retain_stats)
        snap = None
        if self.cfg.guard is not None:
            from training.guard import StepSnapshot

            snap = StepSnapshot.take(self.model)
        if samples:
            rewards = torch.tensor([s.score for s in samples], dtype=torch.float32)
            adv, _ = group_advantages(rewards, g, scale=lc["scale_rewards"], leave_one_out=lc["leave_one_out"])
            adv = weight_negative_advantages(adv, lc["negative_advantage_weight"])
            outcome = self._zero_variance_outcome(samples)
            zero_rows = {i for i, s in enumerate(samples) if s.truncated} if cfg.overlong.mode == "filter" else set()
            trained, pair_stats = self._trained_tokens(samples)
            record.update(pair_stats)
            if cfg.loss.divergence_tokens:
                record["divergence_tokens"] = float(sum(sum(s.loss_mask) for s in trained))
            packed = pack(trained, self.tok.pad_token_id, zero_rows)
            loss_stats = self._update(packed, adv, outcome, self._sft_batch(), retain)
            record.update(adv_mean=float(adv.mean()), adv_std=float(adv.std()) if adv.numel() > 1 else 0.0,
                          adv_abs_max=float(adv.abs().max()))
        else:
            loss_stats = self._update(None, None, sft=self._sft_batch(), retain=retain)
        loss_stats.update(self._guard_step(snap))
        del snap
        sync = getattr(getattr(self, "backend", None), "sync_weights", None)
        if sync is not None:  # an inference engine (vLLM) holds its own copy of the weights
            sync()
        release_free_memory()
        step_time = time.perf_counter() - t0
        lr = self.optimizer.param_groups[0]["lr"]  # the rate `_update` set for this step (scheduled_lr of its number)
        self.step += 1
        record.update(stats)
        record.update(loss_stats)
        record.update(
            rss_mb=rss_mb(), peak_rss_mb=peak_rss_mb(), rss_after_rollout_mb=rss_rollout,
            lr=lr, gen_time_s=t_gen, train_time_s=step_time - t_gen, step_time_s=step_time,
            tokens=float(n_tokens), tokens_per_s=n_tokens / step_time if step_time > 0 else 0.0,
            cursor=self.cursor,
        )
        record = self._reduce(record)
        if self._eval_due() and self.dist.main:
            record.update(self._evaluate())
        if self.dist.main:
            self.metrics.append(record)
        if self.on_step is not None and self.dist.main:
            self.on_step(record)
        return record

    def _trained_tokens(self, samples: list[Sample]) -> tuple[list[Sample], dict[str, float]]:
        """The samples as the update sees them: with loss.divergence_tokens, each one's loss mask narrowed to the
        tokens where a failed and a passed episode of its group part (training.divergence), so the aggregation's
        token mean runs over those decisions alone and the logged entropy is theirs; with loss.divergence_within
        "arguments", only the pairs parting inside a call's arguments, and the pair counts for the step's record."""
        if not self.cfg.loss.divergence_tokens:
            return samples, {}
        keep = ArgumentsOnly(self.tok.decode) if self.cfg.loss.divergence_within == "arguments" else None
        masks = divergence_masks([s.completion_ids for s in samples], [s.loss_mask for s in samples],
                                 [s.passed for s in samples], self.cfg.rollout.num_generations, keep=keep)
        stats = {} if keep is None else {"divergence_pairs": float(keep.pairs),
                                         "divergence_pairs_kept": float(keep.kept)}
        return [replace(s, loss_mask=m) for s, m in zip(samples, masks)], stats

    def _eval_due(self) -> bool:
        """Whether the step just taken is an `eval_every` step (the same answer on every rank)."""
        return bool(self.cfg.eval_every) and self.step % self.cfg.eval_every == 0

    def _evaluate(self) -> dict[str, Any]:
        """Greedy pass@1 on the first `eval_tasks` tasks of the eval split (logged as eval_pass_at_1)."""
        from training.train_eval import greedy_pass_at_1

        if not hasattr(self, "_eval_tasks"):
            self._eval_tasks = load_train_tasks(self.cfg, eval_split=True)[: self.cfg.eval_tasks]
        if not self._eval_tasks:
            return {}
        t0 = time.perf_counter()
        r = greedy_pass_at_1(self.model, self.tok, self.cfg, self._eval_tasks, reward=self.reward)
        return {"eval_pass_at_1": r["pass_at_1"], "eval_reward_mean": r["reward_mean"], "eval_tasks": r["n"],
                "eval_time_s": time.perf_counter() - t0}

    def _reduce(self, record: dict[str, Any]) -> dict[str, Any]:
        if self.dist.world == 1:
            return record
        keys = [k for k, v in record.items() if isinstance(v, (int, float)) and k not in ("step", "cursor")]
        vals = self.dist.sum([float(record[k]) for k in keys])
        summed = ("groups_sampled", "groups_kept", "tokens", "reward_errors", "divergence_tokens", "retain_demos",
                  "retain_tokens", "guided_from_mistake", "divergence_pairs", "divergence_pairs_kept")  # counts
        for k, v in zip(keys, vals):
            record[k] = v if k in summed else v / self.dist.world
        return record

    def _lr(self) -> float:
        o = self.cfg.optim
        return scheduled_lr(o.lr, self.step, self.cfg.steps, warmup=o.warmup_steps, schedule=o.scheduler)

    def _forward_logprobs(self, model: Any, pb: Any, shared: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        temp = self.cfg.rollout.logprob_temperature
        with self._autocast():
            if shared:
                g = self.cfg.rollout.num_generations
                p_ids, p_mask = unique_prompts(pb, g)
                rows = [r[m.bool()].tolist() for r, m in zip(p_ids, p_mask)]
                plen = common_prefix_len(rows)
                prefix = None
                if plen:
                    prefix = torch.tensor([rows[0][:plen]], device=p_ids.device)
                    p_ids, p_mask = left_pad([r[plen:] for r in rows], self.tok.pad_token_id, p_ids.device)
                return shared_prompt_logprobs(model, p_ids, p_mask, pb.completion_ids, pb.completion_mask, g, temp,
                                              prefix_ids=prefix)
            return full_logprobs(model, pb.input_ids, pb.attention_mask, pb.completion_ids, temp,
                                 chunked_head=self.dist.world == 1)

    def _autocast(self) -> Any:
        if self.cfg.model.dtype == "bfloat16" or not self.autocast_bf16:
            return contextlib.nullcontext()
        # the layers installed in _setup cast weights themselves and keep none of the casts, so autocast's weight
        # cache stays empty here (it would otherwise hold a bf16 copy of every weight until the forward ends)
        return torch.autocast(device_type=self.device_type, dtype=torch.bfloat16)

    def _zero_variance_outcome(self, samples: list[Sample]) -> torch.Tensor | None:
        """Per sample +1 / -1 for the all-pass / all-fail groups RL-ZVP trains on (0 elsewhere); None when off."""
        train_pass, train_fail = self.cfg.loss.zero_variance_kinds()
        if not (train_pass or train_fail):
            return None
        out = zero_variance_outcomes([s.score for s in samples], [s.passed for s in samples],
                                     self.cfg.rollout.num_generations)
        return out * ((out > 0) & train_pass | (out < 0) & train_fail)

    def _sft_batch(self) -> Any:
        """The step's verified demonstrations packed for guidance.sft_coef's term (None when off or none passed)."""
        return pack(self.sft_demos, self.tok.pad_token_id) if self.sft_demos else None

    def _retain_batch(self) -> tuple[Any, dict[str, float]]:
        """data.focus.retain_per_step's anchor for this step (training/retain.py): the demonstrations of this rank's
        retain tasks, replayed and verified, each one's loss mask narrowed to the tokens the current policy gives
        less than retain_below probability, packed (None when off, or when no verified token is at risk)."""
        from training.retain import RETAIN_SEED_OFFSET, at_risk_masks, retain_positions, through_last_marked

        focus = self.cfg.data.focus
        if focus is None or not focus.retain_per_step:
            return None, {}
        pool = self.retain_tasks
        seed = self.cfg.seed + RETAIN_SEED_OFFSET
        tasks = [pool[stream_index(seed, len(pool), i, self.cfg.data.shuffle)]
                 for i in retain_positions(self.step, focus.retain_per_step, self.dist.rank, self.dist.world)]
        demos = self._demonstration_samples(tasks)
        for s in demos:
            self._score(s)
        errors = [s for s in demos if s.score is None]
        if errors:  # a verifier that crashes on a demonstration is a bug to see, not an unanchored step
            first = errors[0]
            raise TrainingError(f"data.focus.retain: the reward errored on the demonstration of task {first.task_id}: "
                                f"{first.result.error if first.result is not None else 'no result'}")
        verified = [s for s in demos if s.passed]
        stats = {"retain_demos": float(len(verified)), "retain_demo_pass_rate": len(verified) / max(1, len(demos))}
        masks: list[list[int]] = []
        if verified:
            device = next(self.model.parameters()).device
            mb = self.cfg.optim.micro_batch_size or len(verified)
            for start in range(0, len(verified), mb):
                part = verified[start:start + mb]
                with torch.no_grad():
                    lp, _ = self._forward_logprobs(self.model, pack(part, self.tok.pad_token_id).to(device))
                masks += at_risk_masks(lp.float().cpu().tolist(), [s.loss_mask for s in part], focus.retain_below)
        stats["retain_tokens"] = float(sum(map(sum, masks)))
        kept = [replace(s, completion_ids=s.completion_ids[:n], loss_mask=m[:n], logprobs=s.logprobs[:n])
                for s, m in zip(verified, masks) if (n := through_last_marked(m))]
        return (pack(kept, self.tok.pad_token_id) if kept else None), stats

    def _demonstration_samples(self, tasks: list[TaskRow]) -> list[Sample]:
        """The tasks' demonstrations as scored samples, one group each, nothing sampled: replayed through the
        environment with one, or the single reply after the rendered prompt without."""
        if self.cfg.rollout.environment:
            return self.collect.replay_scored(tasks)
        from training.guidance import GuidanceError, demonstration_sample
        from training.rollout import render_prompts

        prompts = render_prompts(self.tok, [task_messages(t, self.cfg.rollout.system_prompt) for t in tasks])
        try:
            samples = [demonstration_sample(i, t, p, self.demonstrations, self.tok, self.cfg.rollout.max_new_tokens)
                       for i, (t, p) in enumerate(zip(tasks, prompts))]
        except GuidanceError as exc:
            raise TrainingError(str(exc)) from exc
        for s, r in zip(samples, self.reward.score_batch([s.text for s in samples], [row_fields(t) for t in tasks])):
            s.result = r
        return samples

    def _update(self, packed: Any, adv: torch.Tensor | None, outcome: torch.Tensor | None = None,
                sft: Any = None, retain: Any = None) -> dict[str, float]:
        """num_iterations optimizer steps on one batch; micro-batches accumulate into exactly the batch gradient.
        `outcome` (per sample, see `_zero_variance_outcome`) adds RL-ZVP's token advantages, formed from the
        entropies of the first iteration's forward. `sft` (packed demonstrations) adds guidance.sft_coef times their
        token-mean NLL to every iteration's loss, `retain` (the anchor's at-risk tokens) data.focus.retain_coef
        times theirs."""
        cfg = self.cfg
        lc = self.loss_cfg
        device = next(self.model.parameters()).device
        if packed is not None:
            packed = packed.to(device)
        adv = None if adv is None else adv.to(device)
        outcome = None if outcome is None else outcome.to(device)
        for group in self.optimizer.param_groups:
            group["lr"] = self._lr()
        params = PolicyLossParams(epsilon_low=lc["epsilon_low"], epsilon_high=lc["epsilon_high"],
                                  dual_clip_c=lc.get("dual_clip_c"),
                                  importance_sampling_level=lc["importance_sampling_level"], beta=lc["beta"])
        b = 0 if packed is None else packed.input_ids.shape[0]
        local_tokens = 0.0 if packed is None else float(packed.loss_mask.sum())
        tot_seq, tot_tok = self.dist.sum([float(b), local_tokens])
        scope = AggregationScope(num_sequences=max(tot_seq, 1.0), num_tokens=max(tot_tok, 1.0),
                                 normalizer=float(lc.get("normalizer") or cfg.rollout.max_new_tokens))
        mb = cfg.optim.micro_batch_size or max(b, 1)
        chunks = [(s, min(s + mb, b)) for s in range(0, b, mb)] if b else []
        g = cfg.rollout.num_generations
        shared = (self.share_prompts and packed is not None and mb % g == 0
                  and shared_groups([row[m.bool()].tolist() for row, m in zip(packed.prompt_ids, packed.prompt_mask)], g))
        old: dict[int, torch.Tensor] = {}
        chunk_adv: dict[int, torch.Tensor] = {}
        agg: dict[str, float] = {}
        grad_norm = 0.0
        for it in range(cfg.optim.num_iterations):
            self.optimizer.zero_grad(set_to_none=True)
            self._sft_backward(sft, device, agg if it == 0 else None)
            self._retain_backward(retain, device, agg if it == 0 else None)
            if not chunks:  # nothing to learn from on this rank: a zero loss keeps DDP's all-reduce in step
                dummy = sum((p * 0).sum() for p in self.ddp_model.parameters() if p.requires_grad)
                dummy.backward()
            for ci, (s, e) in enumerate(chunks):
                sub = slice_packed(packed, s, e)
                sync = ci == len(chunks) - 1
                ctx = self.ddp_model.no_sync() if (self.dist.world > 1 and not sync) else contextlib.nullcontext()
                with ctx:
                    lp, ent = self._forward_logprobs(self.ddp_model, sub, shared)
                    if it == 0:
                        old[ci] = lp.detach()
                        chunk_adv[ci] = self._chunk_advantages(adv[s:e], None if outcome is None else outcome[s:e],
                                                               ent, sub.loss_mask)
                    ref_lp = None
                    self._shared_now = shared
                    if lc["beta"] > 0:
                        ref_lp = self._ref_logprobs(sub)
                    select = None
                    if lc.get("top_entropy_fraction") is not None:
                        select = high_entropy_token_mask(ent, sub.loss_mask, lc["top_entropy_fraction"])
                    inputs = PolicyLossInputs(lp, old[ci], chunk_adv[ci], sub.loss_mask, ref_lp, token_selection=select)
                    loss, st = policy_loss(inputs, params, aggregation=lc["aggregation"], scope=scope)
                    (loss * (self.dist.world * lc["policy_coef"])).backward()
                if it == 0:
                    m = sub.loss_mask
                    w = float(m.sum())
                    _acc(agg, "entropy", float((ent * m).sum()), w)
                    gm = m if sub.sampled is None else m * sub.sampled.unsqueeze(-1)  # demonstrations have none
                    _acc(agg, "logprob_gen_gap", float(((lp.detach() - sub.gen_logprobs).abs() * gm).sum()),
                         float(gm.sum()))
                    for k, v in st.items():
                        _acc(agg, k, float(v) * w, w)
                    if outcome is not None:  # a micro-batch without zero-variance rows keeps (B,) advantages
                        zv = (outcome[s:e] != 0).to(m.dtype).unsqueeze(-1) * m
                        a = chunk_adv[ci] if chunk_adv[ci].dim() == 2 else chunk_adv[ci].unsqueeze(-1)
                        _acc(agg, "zero_variance_adv_mean", float((a * zv).sum()), float(zv.sum()))
                    _acc(agg, "loss", float(loss.detach()), 1.0, add_weight=False)
                del ent
            if cfg.optim.max_grad_norm is not None:
                grad_norm = float(torch.nn.utils.clip_grad_norm_(
                    [p for p in self.model.parameters() if p.requires_grad], cfg.optim.max_grad_norm))
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        out = {k: v[0] / v[1] if v[1] else v[0] for k, v in agg.items()}
        out["grad_norm"] = grad_norm
        return out

    def _sft_backward(self, sft: Any, device: Any, agg: dict[str, list[float]] | None) -> None:
        """guidance.sft_coef x the step's verified demonstrations' token-mean NLL (logged as sft_nll, sft_demos)."""
        self._nll_backward(sft, self.cfg.guidance.sft_coef, "sft", device, agg)

    def _retain_backward(self, retain: Any, device: Any, agg: dict[str, list[float]] | None) -> None:
        """data.focus.retain_coef x the token-mean NLL of the anchor's at-risk tokens (logged as retain_nll)."""
        focus = self.cfg.data.focus
        if focus is not None and focus.retain_per_step:
            self._nll_backward(retain, focus.retain_coef, "retain", device, agg)

    def _nll_backward(self, batch: Any, coef: float, name: str, device: Any, agg: dict[str, list[float]] | None) -> None:
        """Accumulate coef x the token-mean NLL of `batch`'s masked tokens (over every process) into the gradient,
        micro-batch by micro-batch, before the policy loss's (whose last backward is the one DDP synchronises on).
        Every process calls it whenever the term is on, batch or none, so the token count's all-reduce stays in step."""
        if not coef:
            return
        n = 0 if batch is None else batch.input_ids.shape[0]
        (tot_tok,) = self.dist.sum([0.0 if batch is None else float(batch.loss_mask.sum())])
        if not n or tot_tok <= 0:
            return
        batch = batch.to(device)
        mb = self.cfg.optim.micro_batch_size or n
        for s in range(0, n, mb):
            sub = slice_packed(batch, s, min(s + mb, n))
            ctx = self.ddp_model.no_sync() if self.dist.world > 1 else contextlib.nullcontext()
            with ctx:
                lp, _ = self._forward_logprobs(self.ddp_model, sub)
                nll = demonstration_nll(lp, sub.loss_mask, tot_tok)
                (coef * nll * self.dist.world).backward()
            if agg is not None:
                _acc(agg, f"{name}_nll", float(nll.detach()) * tot_tok, float(sub.loss_mask.sum()))
        if agg is not None and name == "sft":
            _acc(agg, "sft_demos", float(n), 1.0, add_weight=False)

    def _chunk_advantages(self, adv: torch.Tensor, outcome: torch.Tensor | None, entropy: torch.Tensor,
                          mask: torch.Tensor) -> torch.Tensor:
        """A micro-batch's advantages: the group advantages (B,), or (B, T) with RL-ZVP's token advantages added on
        the rows of zero-variance groups (whose group advantage is 0)."""
        if outcome is None or not bool((outcome != 0).any()):
            return adv
        lc = self.loss_cfg
        zv = zero_variance_advantages(entropy, mask, outcome, lc["zero_variance_alpha"],
                                      lc.get("zero_variance_negative_alpha"))
        return adv.unsqueeze(-1).to(zv.dtype) + zv

    @torch.no_grad()
    def _ref_logprobs(self, pb: Any) -> torch.Tensor:
        if self.ref_model is not None:
            return self._forward_logprobs(self.ref_model, pb, self._shared_now)[0]
        with self.model.disable_adapter():  # LoRA: the base model is the reference
            return self._forward_logprobs(self.model, pb, self._shared_now)[0]

    # ------------------------------------------------------------------------------------------ checkpoint
    def _base_model(self) -> str:
        """What this run's policy started as: the SFT model it was given, model.name, or a random initialisation."""
        cfg = self.cfg
        return self.init_from or (cfg.model.name if cfg.model.init == "pretrained"
                                  else f"random:{cfg.model.tokenizer or cfg.model.name}")

    def save(self) -> Path | None:
        cfg = self.cfg
        path = None
        if self.dist.main:
            last = self.metrics.read()[-1:] or [{}]
            metrics = {k: float(v) for k, v in last[0].items() if isinstance(v, (int, float)) and math.isfinite(v)}
            name = f"step-{self.step}"
            if self.best is not None and last[0].get("step") == self.step and METRIC in last[0]:
                self.best = after_evaluation(self.best, self.step, float(last[0][METRIC]), name,
                                             str((self.ckpt_root / name).resolve()))
            path = save_checkpoint(
                self.ckpt_root, self.step, model=self.model, tokenizer=self.tok,
                optimizer=self.optimizer if cfg.checkpoint.save_optimizer else None,
                trainer_state={"step": self.step, "cursor": self.cursor, "totals": self.totals,
                               "config_hash": cfg.config_hash(),
                               "best": self.best.model_dump(mode="json") if self.best else None,
                               **({"guard_changed": {k: None if v is None else v.model_dump()
                                                     for k, v in self.guard_changed.items()}}
                                  if self.guard_changed else {})},
                manifest_fields={
                    "base_model": self._base_model(),
                    "dataset_hash": file_digest(Path(cfg.data.path)),
                    "reward_version": self.reward.version,
                    "config_hash": cfg.config_hash(),
                    "config": cfg.model_dump(mode="json"),
                    "metrics": metrics,
                    "parent": self.resumed_from.name if self.resumed_from else None,
                },
                keep=cfg.checkpoint.keep,
                protect=frozenset({self.best.checkpoint} if self.best and self.best.checkpoint else ()),
            )
            if self.best is not None:
                write_best(self.ckpt_root, self.best)
        self.dist.barrier()
        return path


def _acc(agg: dict[str, list[float]], key: str, value: float, weight: float, add_weight: bool = True) -> None:
    cur = agg.setdefault(key, [0.0, 0.0])
    cur[0] += value
    if add_weight:
        cur[1] += weight


def _reward_stats(samples: list[Sample]) -> dict[str, float]:
    ok = [s for s in samples if s.score is not None]
    out: dict[str, float] = {}
    if ok:
        scores = [s.score for s in ok]
        out["reward_mean"] = float(np.mean(scores))
        out["reward_std"] = float(np.std(scores))
        out["pass_rate"] = float(np.mean([s.passed for s in ok]))
        comps: dict[str, list[float]] = {}
        for s in ok:
            for k, v in (s.result.components if s.result else {}).items():
                comps.setdefault(k, []).append(float(v))
        for k, v in comps.items():
            out[f"reward/{k}"] = float(np.mean(v))
    if samples:
        lens = [len(s.completion_ids) for s in samples]
        out["completion_len_mean"] = float(np.mean(lens))
        out["completion_len_max"] = float(max(lens))
        out["truncated_frac"] = float(np.mean([s.truncated for s in samples]))
    return out


def soft_overlong_penalty(length: int, max_len: int, buffer: int, factor: float) -> float:
    """DAPO's soft overlong punishment: 0 up to max_len - buffer, then linearly down to -factor at max_len."""
    start = max_len - buffer
    if length <= start:
        return 0.0
    return -factor * min(1.0, (length - start) / buffer)


def task_messages(task: TaskRow, system: str | None = None) -> list[dict[str, Any]]:
    msgs = [m.model_dump(exclude_none=True) for m in task.prompt]
    msgs = [{"role": m["role"], "content": m.get("content", "")} for m in msgs]
    if system and not (msgs and msgs[0]["role"] == "system"):
        msgs = [{"role": "system", "content": system}] + msgs
    return msgs


def load_train_tasks(cfg: TrainConfig, eval_split: bool = False) -> list[TaskRow]:
    from generators.task_io import read_tasks

    path = (cfg.data.eval_path or cfg.data.path) if eval_split else cfg.data.path
    split = cfg.data.eval_split if eval_split else cfg.data.split
    tasks = read_tasks(path)
    if split:
        tasks = [t for t in tasks if t.split == split]
    if cfg.data.max_tasks and not eval_split:
        tasks = tasks[: cfg.data.max_tasks]
    return tasks
