"""The guard (`guard` in the config): keep each update only as far as it leaves the starting policy's greedy passes
as they were.

Why: a greedy episode is reproduced exactly as long as every token the policy generates in it stays the argmax of
its next-token distribution (tool results are a function of the calls). On learn_workplace every focused GRPO stage
flipped 19-48 of 265 greedy test outcomes, most of them passes in templates it never trained, and 26 of the 29
passes the SFT model makes along its demonstration hold a decision it makes by less than 1 nat (sessions 27-31,
benchmarks/results/decision_margin_closest_call.json): whatever token a loss selects, an update of the shared layers
tips some of those near ties. Filtering the loss cannot see them; checking the update can. Before the first update
the starting policy runs greedily on a few training tasks of every group and its passes, decoded again one task at
a time (as the check decodes them: in a left-padded batch the other tasks' lengths change bf16 rounding,
benchmarks/batch_noise.py), are held; after
each optimizer step they are teacher-forced (one no-grad forward, the shared system prompt once) and every held
decision whose token is no longer the argmax counts as a flip. With `keep: passes` (the default) an episode with a
flip is decoded again greedily under the new weights and verified: the step stands when at most `max_lost` of those
fail, and the new passing episodes are held from then on (an equally good path is not a loss). With `keep:
decisions` every flip counts against `max_flips`. A step that fails the test is moved back half way, again up to
`backtrack` times, then dropped -- a line search whose acceptance test is "the greedy passes we can see are still
passes". Measured on learn_workplace (session 32) `decisions` dropped every step: under bf16 autocast the logits are
rounded to 1/8 near 20 and the held decisions' smallest leads are one such step, so an eighth of an update flips some.

Held decisions are the generated tokens (loss mask 1) the starting policy's own teacher-forced forward puts first;
a token it generated under the KV cache but does not rank first when teacher-forced is a numerical tie and is left
out (counted as `ties`), so a step is never blamed for the difference between two forward paths.

The held set is written to `guard.json` in the output folder before the first update and read back on resume, so a
resumed run keeps the starting policy's decisions, not the checkpoint's; the episodes `keep: passes` replaced since
are saved in each checkpoint's trainer state and applied on top. With momentum or AdamW the optimizer state
keeps the step's gradient whatever part of the step the guard keeps; with plain SGD a step kept at scale s is exactly
a step at s x the rate.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import torch
from pydantic import BaseModel, Field

from schemas.train_config import GuardSection

Tensor = torch.Tensor
GUARD_FILE = "guard.json"


class HeldEpisode(BaseModel):
    """One passing greedy episode of the starting policy, as token ids, with the positions held."""

    task_id: str
    prompt_ids: list[int]
    completion_ids: list[int]
    held: list[int]  # 1 = a decision the guard keeps (generated, and the starting policy's teacher-forced argmax)


class HeldSet(BaseModel):
    """What `guard.json` holds: the starting policy's passing episodes and how they were chosen."""

    start: str  # the starting model (a resumed run must have started from the same one)
    by: str
    per_group: int
    tasks_probed: int
    ties: int = 0  # generated tokens left out because the teacher-forced argmax was another token
    probe_s: float | None = None
    episodes: list[HeldEpisode] = Field(default_factory=list)

    def matches(self, guard: GuardSection, start: str) -> bool:
        return (self.start, self.by, self.per_group) == (start, guard.by, guard.per_group)

    @property
    def passed(self) -> int:
        """The starting policy's passes held (each passed batched and again alone)."""
        return len(self.episodes)

    @property
    def decisions(self) -> int:
        return sum(sum(e.held) for e in self.episodes)


def describe(held: HeldSet, records: Sequence[dict[str, Any]]) -> str:
    """One line for the CLI: what the guard held, and what it did to the run's steps (from its metrics records)."""
    scales = [r["guard_scale"] for r in records if r.get("guard_scale") is not None]
    whole, dropped = sum(v == 1.0 for v in scales), sum(v == 0.0 for v in scales)
    redecoded = sum(r.get("guard_redecoded") or 0 for r in records)
    lost = sum(r.get("guard_lost") or 0 for r in records)
    again = (f"; {redecoded:g} held episodes decoded again after a kept step, {lost:g} of them lost"
             if any("guard_redecoded" in r for r in records) else "")
    return (f"guard: held {held.decisions} decisions of {held.passed} passing greedy episodes on {held.tasks_probed} "
            f"training tasks ({held.per_group} per {held.by}); steps kept whole {whole}, cut back "
            f"{len(scales) - whole - dropped}, dropped {dropped} of {len(scales)}{again}")


def write_held(folder: Path, held: HeldSet) -> Path:
    """`guard.json`, replaced atomically (a kill never leaves half of one)."""
    from generators.task_io import atomic_write_bytes

    return atomic_write_bytes(folder / GUARD_FILE, (held.model_dump_json() + "\n").encode())


def read_held(folder: Path) -> HeldSet | None:
    path = folder / GUARD_FILE
    if not path.exists():
        return None
    return HeldSet.model_validate_json(path.read_text())


TIE_WON = 1e-30  # the lead of a token tied with another that greedy decoding still picks (the lower index)


def token_leads(logits: Tensor, targets: Tensor) -> Tensor:
    """Per row, the target's logit minus the largest other logit, signed by what greedy decoding picks: > 0 while the
    target is the argmax (its lead over the runner-up, in nats of log-probability), <= 0 once another token is picked.
    A tie goes as torch.argmax breaks it, to the lower token index: a tie the target wins is TIE_WON, one it loses 0.
    Why ties matter: under bf16 autocast logits are rounded to 1/8 near 20, so ties are common. (N, V), (N,) -> (N,)."""
    logits = logits.float()
    chosen = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    others = logits.scatter(-1, targets.unsqueeze(-1), float("-inf"))
    lead = chosen - others.max(-1).values
    picked = logits.argmax(-1) == targets
    return torch.where(picked, lead.clamp_min(TIE_WON), lead.clamp_max(0.0))


def backtrack_scales(backtrack: int) -> list[float]:
    """The parts of a step tried in order: the whole step, then half, a quarter ... (`backtrack` halvings)."""
    return [0.5 ** k for k in range(backtrack + 1)]


def episode_leads(model: Any, episodes: Sequence[HeldEpisode], pad_id: int, batch: int = 8,
                  autocast_bf16: bool = False, head_rows: int = 512) -> list[list[float]]:
    """Each episode's lead (`token_leads`) at every held position (inf elsewhere), from a no-grad teacher-forced
    forward.

    The prompts' common prefix (an environment's system prompt) runs once per call; the LM head runs only at held
    positions, a few hundred rows at a time, so the batch's logits never exist at once."""
    from training.logprobs import common_prefix_len, shared_prompt_states
    from training.rollout import left_pad

    out: list[list[float]] = []
    device = next(model.parameters()).device
    rows = [e.prompt_ids for e in episodes]
    plen = common_prefix_len(rows)
    prefix = torch.tensor([rows[0][:plen]], device=device) if plen else None
    ctx = torch.autocast("cpu", dtype=torch.bfloat16) if autocast_bf16 else contextlib.nullcontext()
    with torch.no_grad(), ctx:
        for s in range(0, len(episodes), batch):
            part = episodes[s:s + batch]
            p_ids, p_mask = left_pad([e.prompt_ids[plen:] for e in part], pad_id, device)
            width = max(1, max(len(e.completion_ids) for e in part))
            c_ids = torch.full((len(part), width), pad_id, dtype=torch.long, device=device)
            c_mask = torch.zeros((len(part), width), dtype=torch.long, device=device)
            for i, e in enumerate(part):
                c_ids[i, :len(e.completion_ids)] = torch.tensor(e.completion_ids, dtype=torch.long)
                c_mask[i, :len(e.completion_ids)] = 1
            states, head = shared_prompt_states(model, p_ids, p_mask, c_ids, c_mask, 1, prefix)
            for i, e in enumerate(part):
                at = [j for j, h in enumerate(e.held) if h]
                lead = [float("inf")] * len(e.completion_ids)
                if at:
                    idx = torch.tensor(at, dtype=torch.long, device=device)
                    h, t = states[i, idx], c_ids[i, idx]
                    vals = torch.cat([token_leads(head(h[r:r + head_rows]) if head is not None else h[r:r + head_rows],
                                                  t[r:r + head_rows]) for r in range(0, len(at), head_rows)])
                    for j, v in zip(at, vals.tolist()):
                        lead[j] = v
                out.append(lead)
    return out


def held_episodes(samples: Iterable[Any], model: Any, pad_id: int, autocast_bf16: bool = False
                  ) -> tuple[list[HeldEpisode], int]:
    """The passing samples as held episodes: a generated token is held where the starting policy's (`model`'s)
    teacher-forced lead is positive; the rest of its generated tokens are ties (returned as a count)."""
    generated = [HeldEpisode(task_id=s.task_id, prompt_ids=list(s.prompt_ids), completion_ids=list(s.completion_ids),
                             held=[1 if m else 0 for m in s.loss_mask]) for s in samples if s.passed]
    leads = episode_leads(model, generated, pad_id, autocast_bf16=autocast_bf16)
    out, ties = [], 0
    for e, lead in zip(generated, leads):
        held = [1 if (h and v > 0) else 0 for h, v in zip(e.held, lead)]
        ties += sum(e.held) - sum(held)
        out.append(e.model_copy(update={"held": held}))
    return out, ties


def count_flips(episodes: Sequence[HeldEpisode], leads: list[list[float]]) -> int:
    """Held decisions greedy decoding no longer picks (lead <= 0, `token_leads`)."""
    return sum(1 for e, lead in zip(episodes, leads) for h, v in zip(e.held, lead) if h and v <= 0)


def flipped_episodes(episodes: Sequence[HeldEpisode], leads: list[list[float]]) -> list[int]:
    """Indices of the episodes greedy decoding would no longer reproduce (at least one held decision flipped)."""
    return [i for i, (e, lead) in enumerate(zip(episodes, leads)) if any(h and v <= 0 for h, v in zip(e.held, lead))]


@dataclass
class StepSnapshot:
    """The trainable weights before a step, to move a step back part of the way (`apply_scale`)."""

    params: list[torch.nn.Parameter]
    before: list[Tensor]
    after: list[Tensor] | None = None

    @classmethod
    def take(cls, model: Any) -> "StepSnapshot":
        params = [p for p in model.parameters() if p.requires_grad]
        return cls(params, [p.detach().clone() for p in params])

    def apply_scale(self, scale: float) -> None:
        """Set the weights to before + scale x (after - before); `after` is the step as the optimizer took it."""
        with torch.no_grad():
            if self.after is None:
                self.after = [p.detach().clone() for p in self.params]
            for p, b, a in zip(self.params, self.before, self.after):
                p.copy_(torch.lerp(b, a, scale))
