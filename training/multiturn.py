"""Multi-turn tool rollouts for training: many episodes advanced turn by turn in one batch, through the shared tool
loop (`rewards.environments.loop.ToolLoop`), with token bookkeeping for the loss.

Per episode the trainer keeps one token stream: the initial prompt, then for every turn the tokens the policy
sampled (loss mask 1, with their sampling log-probs) followed by the template's rendering of the tool results and
the next generation prompt (loss mask 0: tool output is context, never trained on). The environment's system
prompt is the same for every task, so it is run once for the whole batch (`training.logprobs.prefill`), not once
per episode, and the batch's KV cache is kept from turn to turn (`training.rollout.KVState`): a later turn feeds
only the tool results and the next generation prompt, not the whole conversation again. The episode's verdict comes from the environment's verifier (`reward.function: env` or
`env:binary`) or from a trajectory reward loaded from a file.

With `guidance.demonstrations`, the last member of each group is the task's demonstration replayed through a
fresh environment (`EnvironmentCollector.replay`): its replies are the policy's turns (loss mask 1), the
environment's answers are context (mask 0), and the same verifier scores it, so it enters the group's advantages
like any sample. Its generation log-probs are unknown and recorded as 0 (`Sample.extras["demonstration"]`). With
`guidance.branch: first_mistake` that member starts as the group's first failed episode -- its own turns, tokens and
log-probs, for as long as each of its calls is one the demonstration makes -- and finishes with the demonstration's
remaining replies (`EnvironmentCollector.corrective`, `training.branch`).
"""

from __future__ import annotations

import json

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from schemas.rewards import RewardResult
from schemas.task import TaskRow
from schemas.train_config import TrainConfig
from training.branch import Branch, reply_signatures
from training.generation_amp import generating
from training.rollout import SamplingParams, continue_tokens, end_token_ids, left_pad, sample_with_state
from training.samples import Sample


class EnvironmentError_(RuntimeError):
    """The environment named in the config cannot be built (unknown name, missing world files)."""


@dataclass
class Episode:
    task: TaskRow
    group: int
    loop: Any
    env: Any
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    cut: bool = False  # hit a token limit: no more turns
    demonstration: bool = False  # replayed from guidance.demonstrations, not sampled
    replies: list[tuple[list[int], list[float], str]] = field(default_factory=list)  # per turn: tokens, log-probs, text
    # guidance.branch first_mistake: where this guided member left a failed sampled episode (turns kept, the
    # demonstration's turns resumed); None for a sampled episode or the plain demonstration
    branch: Branch | None = None

    def extend(self, ids: list[int], trained: bool, logprobs: list[float] | None = None) -> None:
        """Append to the episode's token stream: a reply of the policy (trained on) or the environment's answer
        (context, masked). Log-probs are 0 where nothing was sampled (tool output, a replayed demonstration)."""
        self.completion_ids += ids
        self.loss_mask += [int(trained)] * len(ids)
        self.logprobs += logprobs if logprobs is not None else [0.0] * len(ids)


def load_workplace_world(data_path: str | Path) -> Any:
    """The seed world stored next to a workplace task dataset (`DIR/world/*.parquet`, `DIR/manifest.json`)."""
    import polars as pl

    from generators.workplace import CONTEXT, TODAY
    from rewards.environments.workplace import WorkplaceWorld

    folder = Path(data_path)
    folder = folder if folder.is_dir() else folder.parent
    parts = sorted((folder / "world").glob("*.parquet"))
    if not parts:
        raise EnvironmentError_(f"{folder}: no world/*.parquet next to the tasks (build it with `rlvr env tasks`)")
    manifest = json.loads((folder / "manifest.json").read_text()) if (folder / "manifest.json").exists() else {}
    tables = {p.stem: pl.read_parquet(p).to_dicts() for p in parts}
    return WorkplaceWorld.from_tables(tables, today=manifest.get("today", TODAY),
                                      context=manifest.get("context", CONTEXT), name="workplace")


def make_env_factory(name: str, data_path: str) -> Callable[[], Any]:
    if name == "workplace":
        from rewards.environments.workplace import WorkplaceEnv

        world = load_workplace_world(data_path)
        return lambda: WorkplaceEnv(world)
    raise EnvironmentError_(f"unknown rollout.environment {name!r}; known: workplace")


def _render(tok: Any, messages: list[dict[str, Any]], gen_prompt: bool) -> str:
    return tok.apply_chat_template(messages, add_generation_prompt=gen_prompt, tokenize=False)


def _ids(tok: Any, text: str) -> list[int]:
    return list(tok(text, add_special_tokens=False)["input_ids"]) if text else []


def tool_suffix_ids(tok: Any, before: list[dict[str, Any]], reply: str, after: list[dict[str, Any]], ended: bool) -> list[int]:
    """Tokens between the policy's reply and its next turn: the end of the assistant turn when the reply did not
    emit it, the template's glue, the tool messages and the next generation prompt. Computed as the difference of
    two renderings, so any chat template works."""
    upto = _render(tok, before + [{"role": "assistant", "content": reply}], False)
    nxt = _render(tok, after, True)
    if not nxt.startswith(upto):
        raise RuntimeError("the chat template does not render the conversation incrementally")
    eos = tok.eos_token or ""
    closing = upto[upto.rfind(reply) + len(reply):] if reply else ""
    if ended and eos and closing.startswith(eos):
        closing = closing[len(eos):]
    return _ids(tok, closing + nxt[len(upto):])


class EnvironmentCollector:
    """Callable(tasks, G, params) -> samples: G episodes per task, batched turn by turn."""

    def __init__(self, cfg: TrainConfig, model: Any, tok: Any, reward: Any, env_factory: Callable[[], Any] | None = None,
                 autocast_bf16: bool = False, demonstrations: dict[str, list[str]] | None = None):
        from rewards.environments.loop import ToolLoop

        self.cfg, self.model, self.tok, self.reward = cfg, model, tok, reward
        self.env_factory = env_factory or make_env_factory(cfg.rollout.environment or "", cfg.data.path)
        self.ToolLoop = ToolLoop
        self.eos_ids = end_token_ids(tok, model)
        self.autocast_bf16 = autocast_bf16
        ref = cfg.reward.function
        self.verdict = ref.split(":", 1)[1] if ref.startswith("env:") else ("shaped" if ref == "env" else None)
        self.demonstrations = demonstrations  # task id -> assistant replies; one group member each when set

    def _prompt_ids(self, messages: list[dict[str, Any]]) -> list[int]:
        return _ids(self.tok, _render(self.tok, messages, True))

    @torch.no_grad()
    def __call__(self, tasks: list[TaskRow], g: int, params: SamplingParams) -> list[Sample]:
        from training.logprobs import common_prefix_len, prefill

        cfg = self.cfg
        if self.demonstrations is not None:
            self._require_demonstrations(tasks)
        g_sampled = g - (self.demonstrations is not None)
        episodes: list[Episode] = []
        for gi, task in enumerate(tasks):
            for _ in range(g_sampled):
                env = self.env_factory()
                loop = self.ToolLoop(task, env, max_turns=cfg.rollout.max_turns)
                episodes.append(Episode(task, gi, loop, env, self._prompt_ids(loop.prompt())))
        device = next(self.model.parameters()).device
        gen = torch.Generator(device=device).manual_seed(params.seed)
        with generating(self.model, self.autocast_bf16):
            plen = common_prefix_len([e.prompt_ids for e in episodes])
            pcache = prefill(self.model, torch.tensor([episodes[0].prompt_ids[:plen]], device=device)) if plen else None
            turn = 0
            state = None  # the KV cache of the episodes still running, rows in `order`
            order: list[Episode] = []
            while True:
                active = [e for e in episodes if not e.loop.done and not e.cut]
                if not active:
                    break
                room = min(cfg.rollout.max_total_tokens - len(e.prompt_ids) - len(e.completion_ids) for e in active)
                max_new = min(cfg.rollout.max_new_tokens, room)
                if max_new <= 0:
                    for e in active:
                        e.cut = True
                    break
                p = SamplingParams(max_new_tokens=max_new, temperature=params.temperature, top_p=params.top_p,
                                   top_k=params.top_k, seed=params.seed)
                if state is None:
                    rows = [(e.prompt_ids + e.completion_ids)[plen:] for e in active]
                    repeats = g_sampled if turn == 0 and len(active) == len(episodes) else 1
                    ids, mask = left_pad(rows[::repeats], self.tok.pad_token_id)
                    first = int((mask.sum(0) > 0).nonzero().min())
                    (out_ids, out_mask, out_lp, ended), state = sample_with_state(
                        self.model, ids[:, first:].to(device), mask[:, first:].to(device), p, eos_ids=self.eos_ids,
                        pad_id=self.tok.pad_token_id, generator=gen, repeats=repeats, prefix_cache=pcache,
                        prefix_len=plen)
                else:  # later turns feed only what the cache lacks: the tool results and the next prompt
                    row_of = {id(e): i for i, e in enumerate(order)}
                    state.select([row_of[id(e)] for e in active])
                    streams = [e.prompt_ids + e.completion_ids for e in active]
                    new = [s[f:] for s, f in zip(streams, state.fed())]
                    (out_ids, out_mask, out_lp, ended), state = continue_tokens(
                        self.model, state, new, p, eos_ids=self.eos_ids, pad_id=self.tok.pad_token_id,
                        generator=gen)
                order = active
                for i, e in enumerate(active):
                    n = int(out_mask[i].sum())
                    toks = out_ids[i, :n].tolist()
                    e.extend(toks, True, out_lp[i, :n].tolist())
                    text = self.tok.decode(toks, skip_special_tokens=True)
                    e.replies.append((toks, e.logprobs[-n:] if n else [], text))
                    before = e.loop.prompt()
                    e.loop.step(text)
                    if not bool(ended[i]):
                        e.cut = True  # the reply was cut at the token limit: the episode ends here
                        continue
                    if not e.loop.done:
                        e.extend(tool_suffix_ids(self.tok, before, text, e.loop.prompt(), True), False)
                turn += 1
        if self.demonstrations is not None:  # each group: its sampled members, then the demonstration
            guided = self.corrective if cfg.guidance.branch == "first_mistake" else self._whole_replay
            episodes += [guided(task, gi, [e for e in episodes if e.group == gi]) for gi, task in enumerate(tasks)]
            episodes.sort(key=lambda e: e.group)
        return self._score(episodes)

    def replay_scored(self, tasks: list[TaskRow]) -> list[Sample]:
        """Each task's demonstration replayed through a fresh environment and verified, one group each, nothing
        sampled (the retain anchor's demonstrations, training/retain.py)."""
        if self.demonstrations is None:
            raise EnvironmentError_("replaying demonstrations needs guidance.demonstrations")
        self._require_demonstrations(tasks)
        return self._score([self.replay(t, gi, self.demonstrations[t.id]) for gi, t in enumerate(tasks)])

    def _require_demonstrations(self, tasks: list[TaskRow]) -> None:
        """Refuse, naming them, tasks the demonstrations file has no entry for."""
        missing = [t.id for t in tasks if t.id not in (self.demonstrations or {})]
        if missing:
            raise EnvironmentError_(f"guidance: no demonstration for task(s) {missing[:5]}")

    def _whole_replay(self, task: TaskRow, group: int, sampled: list[Episode]) -> Episode:
        return self.replay(task, group, self.demonstrations[task.id])  # type: ignore[index]

    def corrective(self, task: TaskRow, group: int, sampled: list[Episode]) -> Episode:
        """`guidance.branch: first_mistake`: the group's first failed sampled episode, kept turn by turn (its own
        tokens and log-probs) while its calls are ones the demonstration makes, then the demonstration's remaining
        replies, the one calling the mistaken tool first when it can move (training.branch). Verified here; when the
        continuation does not pass (or every sampled member passed), the whole demonstration replayed from the
        start, as `branch: start` does."""
        from training.branch import branch_point, grounded

        replies = self.demonstrations[task.id]  # type: ignore[index]
        failed = next((e for e in sampled if not _passes(e)), None)
        if failed is None:
            return self.replay(task, group, replies)
        demo = [reply_signatures(t) for t in replies]
        asked = "\n".join(m.content or "" for m in task.prompt if m.role == "user")  # what a call can be grounded in
        b = branch_point([reply_signatures(t) for _, _, t in failed.replies], demo,
                         movable=[bool(turn) and all(grounded(sig, asked) for sig in turn) for turn in demo])
        if b.keep == 0 and b.resume == tuple(range(len(replies))):
            return self.replay(task, group, replies)
        out = self.replay(task, group, [replies[i] for i in b.resume], prefix=failed.replies[:b.keep])
        if not _passes(out):
            return self.replay(task, group, replies)
        out.branch = b
        return out

    def replay(self, task: TaskRow, group: int, replies: list[str],
               prefix: Sequence[tuple[list[int], list[float], str]] = ()) -> Episode:
        """A demonstration as an episode: each reply fed to a fresh environment's tool loop as if sampled (its tokens
        and end token trained on), the environment's answers as masked context, cut at the rollout's token limit.
        `prefix`: sampled turns (tokens, log-probs, text) fed first, exactly as the policy produced them."""
        env = self.env_factory()
        loop = self.ToolLoop(task, env, max_turns=self.cfg.rollout.max_turns)
        e = Episode(task, group, loop, env, self._prompt_ids(loop.prompt()), demonstration=True)
        eos = self.tok.eos_token_id
        turns = [(list(t), list(lp), text) for t, lp, text in prefix]
        turns += [(_ids(self.tok, text) + ([eos] if eos is not None else []), None, text) for text in replies]
        for toks, logprobs, text in turns:
            if loop.done:
                break
            if len(e.prompt_ids) + len(e.completion_ids) + len(toks) > self.cfg.rollout.max_total_tokens:
                e.cut = True
                break
            before = loop.prompt()
            loop.step(text)
            e.extend(toks, True, logprobs)
            if not loop.done:
                e.extend(tool_suffix_ids(self.tok, before, text, loop.prompt(), True), False)
        return e

    def _score(self, episodes: list[Episode]) -> list[Sample]:
        samples = []
        trajs = []
        for e in episodes:
            traj = e.loop.trajectory()
            if e.cut and traj.stopped == "length":
                traj.stopped = "length"
            traj.token_ids = e.prompt_ids + e.completion_ids
            traj.loss_mask = [0] * len(e.prompt_ids) + e.loss_mask
            trajs.append(traj)
        if self.verdict is not None:
            results = []
            for e, traj in zip(episodes, trajs):
                try:
                    r = e.env.verify(traj)
                except Exception as exc:  # noqa: BLE001 - a crashing verifier is an error result, not a 0
                    r = RewardResult(score=None, error=f"verifier raised {exc!r}")
                if self.verdict == "binary" and r.score is not None:
                    r = r.model_copy(update={"score": float(bool(r.passed))})
                elif self.verdict == "shaped" and r.score is not None:  # the verifier's composition of its signals
                    r = r.model_copy(update={"score": float(r.components["shaped"])})
                results.append(r)
        else:
            from training.scoring import row_fields

            results = self.reward.score_batch(trajs, [row_fields(e.task) for e in episodes])
        for e, traj, r in zip(episodes, trajs, results):
            traj.reward = r
            samples.append(Sample(
                group=e.group, task_id=e.task.id, prompt_ids=e.prompt_ids, completion_ids=e.completion_ids,
                loss_mask=e.loss_mask, logprobs=e.logprobs, truncated=e.cut,
                text=traj.messages[-1].content if traj.messages else "", result=r,
                extras={"turns": traj.turns, "stopped": traj.stopped, "demonstration": e.demonstration,
                        "kept_turns": e.branch.keep if e.branch else 0, "corrective": e.branch is not None,
                        "calls": [reply_signatures(m.content or "") for m in traj.messages if m.role == "assistant"]},
            ))
        return samples


def _passes(e: Episode) -> bool:
    """The environment's verdict on an episode as it stands (a crashing verifier counts as not passing here; the
    scoring pass reports it as an error)."""
    try:
        return bool(e.env.verify(e.loop.trajectory()).passed)
    except Exception:  # noqa: BLE001 - reported by _score, which verifies again
        return False


def make_environment_collector(cfg: TrainConfig, model: Any, tok: Any, reward: Any, autocast_bf16: bool = False,
                               demonstrations: dict[str, list[str]] | None = None) -> EnvironmentCollector:
    return EnvironmentCollector(cfg, model, tok, reward, autocast_bf16=autocast_bf16, demonstrations=demonstrations)
