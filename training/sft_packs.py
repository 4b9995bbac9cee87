"""Shared-prefix SFT batches ("packs"): demonstrations that open with the same tokens (an environment's system prompt
with its tool listing) are batched together, the shared prefix runs once per batch, and the loss is computed only
where there is something to learn.

Why: in the workplace demonstrations the system prompt is about 60% of every conversation and there are only a
handful of distinct ones (one per toolkit combination). TRL's SFTTrainer runs every row whole, so most of an SFT
epoch is spent re-reading the same tool listing. Here a pack of B rows runs the prefix once (with gradient), its
key/value cache is repeated B times and the rows' own tokens run on top of it; gradients flow back through the
repeated cache into the one prefix pass, so the loss and its gradient are the same function of the weights as B
separate forwards (tests/test_training_sft.py checks both). The LM head runs only at labelled positions (the
assistant turns), through the chunked head of `training.lm_head`.

The packs are ordinary dataset rows for TRL's SFTTrainer (one pack per device batch): its loop, optimizer,
scheduler, gradient accumulation and logging are unchanged; `PackedSFTLoss.compute` replaces only the forward.
"""

from __future__ import annotations

import random
from typing import Any

import torch

from training.logprobs import head_logprobs, model_forward, repeat_cache, shared_len, split_head
from training.rollout import positions

Tensor = torch.Tensor
IGNORE = -100


def first_label(mask: list[int]) -> int:
    """Index of the first token that carries a loss (len(mask) when none does)."""
    return next((i for i, m in enumerate(mask) if m), len(mask))


def pack_prefix_len(rows: list[dict[str, list[int]]], minimum: int = 16) -> int:
    """Tokens every row of a pack shares, cut so that each row keeps at least one token of its own and no labelled
    token is predicted from inside the prefix (a label at index k is predicted from position k - 1, which must
    then be a row token). 0 when the shared part is shorter than `minimum` (not worth a separate pass)."""
    limit = min(min(len(r["input_ids"]) - 1, first_label(r["assistant_masks"]) - 1) for r in rows)
    k = shared_len([r["input_ids"] for r in rows], limit)
    return k if k >= minimum else 0


def by_length_windows(rows: list[dict[str, list[int]]], window: int) -> list[dict[str, list[int]]]:
    """`rows` (already shuffled) with each run of `window` rows sorted by length; unchanged when window <= 1.

    Why: a pack's rows are right-padded to its longest, and the pad positions run through every layer like real
    tokens. On the workplace demonstrations (batch 8) 38% of the row tokens an epoch computed were padding;
    sorting windows of 8 packs' rows before cutting leaves 10%, so a step costs about a third fewer row tokens.
    Packs are still drawn in random order by the trainer, and each window is a random draw of its group, so a
    pack holds rows of similar length rather than of one task (HF Trainer's `group_by_length` does the same with
    its megabatches)."""
    if window <= 1:
        return rows
    return [r for i in range(0, len(rows), window) for r in sorted(rows[i:i + window], key=lambda r: len(r["input_ids"]))]


def build_packs(rows: list[dict[str, list[int]]], batch: int, seed: int, length_window: int = 0) -> list[dict[str, Any]]:
    """Full packs of `batch` rows wherever possible, each sharing as long an opening as it can.

    Rows are grouped by their opening (the rows' `context_len` tokens, the first message) and shuffled within it
    (seeded), so a pack mixes tasks rather than repeating one. Each group fills as many whole packs as it can; what
    is left of every group (and every row whose opening nobody shares) goes into one shuffled pool that is cut into
    full packs too, which then share whatever prefix their rows happen to have (at least the chat template's start).

    Why pooling matters: a pack is one optimizer step's batch. Cutting every group separately gave each group a
    short last pack, and in data where openings repeat only a few times (single-turn questions that recur) most
    packs held 1-3 rows: twice as many steps per epoch, each on a fraction of the batch, and a model that learned
    half as much in the same number of steps as TRL's full batches (benchmarks/results/sft_packs_quality.json).

    `length_window` > 0 sorts each run of that many packs' rows by length before cutting (`by_length_windows`),
    so a pack pads less; 0 keeps the packs' rows in shuffled order."""
    rng = random.Random(seed)
    groups: dict[tuple[int, ...], list[dict]] = {}
    for r in rows:
        groups.setdefault(tuple(r["input_ids"][: r.get("context_len", 0)]), []).append(r)
    packs, pool = [], []
    for key in sorted(groups, key=lambda k: (len(groups[k]), k)):
        members = groups[key]
        rng.shuffle(members)
        whole = len(members) // batch * batch
        body = by_length_windows(members[:whole], length_window * batch)
        packs += [body[i:i + batch] for i in range(0, whole, batch)]
        pool += members[whole:]
    rng.shuffle(pool)
    pool = by_length_windows(pool, length_window * batch)
    packs += [pool[i:i + batch] for i in range(0, len(pool), batch)]
    out = []
    for members in packs:
        p = pack_prefix_len(members)
        out.append({"prefix_ids": members[0]["input_ids"][:p],
                    "row_ids": [r["input_ids"][p:] for r in members],
                    "row_masks": [r["assistant_masks"][p:] for r in members]})
    return out


def collate_pack(features: list[dict[str, Any]], pad_id: int) -> dict[str, Tensor]:
    """One pack (the device batch is one pack) as tensors: prefix (1, P), right-padded rows (B, S), labels."""
    if len(features) != 1:
        raise ValueError(f"a shared-prefix batch is one pack, got {len(features)}")
    f = features[0]
    width = max(len(r) for r in f["row_ids"])
    ids = torch.full((len(f["row_ids"]), width), pad_id, dtype=torch.long)
    attn = torch.zeros_like(ids)
    labels = torch.full_like(ids, IGNORE)
    for i, (r, m) in enumerate(zip(f["row_ids"], f["row_masks"])):
        row = torch.tensor(r, dtype=torch.long)
        ids[i, : len(r)] = row
        attn[i, : len(r)] = 1
        keep = torch.tensor(m, dtype=torch.bool)
        labels[i, : len(r)] = torch.where(keep, row, torch.full_like(row, IGNORE))
    return {"prefix_ids": torch.tensor([f["prefix_ids"]], dtype=torch.long), "input_ids": ids,
            "attention_mask": attn, "labels": labels}


def pack_token_logprobs(model: Any, prefix_ids: Tensor, input_ids: Tensor, attention_mask: Tensor,
                        labels: Tensor) -> tuple[Tensor, Tensor]:
    """Log-probs (N,) and entropies (N,) of the labelled tokens of a pack, in row-major order of `labels`.

    The prefix runs once; rows attend to it through its repeated cache. A label at row position t is predicted
    from position t - 1, never from the prefix (`pack_prefix_len` guarantees position 0 carries no label)."""
    from transformers import DynamicCache

    parts = split_head(model)
    if parts is None:
        raise ValueError("shared-prefix SFT needs a causal LM exposing `.model` and `.lm_head`")
    dec, head = parts
    b = input_ids.shape[0]
    p = prefix_ids.shape[1]
    cache = DynamicCache()
    full = attention_mask
    if p:
        ones = torch.ones_like(prefix_ids)
        model_forward(dec, input_ids=prefix_ids, attention_mask=ones, position_ids=positions(ones), cache=cache,
                      use_cache=True)
        cache = repeat_cache(cache, b)
        full = torch.cat([ones.expand(b, p).to(attention_mask.dtype), attention_mask], dim=1)
    if bool((labels[:, 0] != IGNORE).any()):
        raise ValueError("a pack row starts with a labelled token; its prefix was cut too late")
    hidden = model_forward(dec, input_ids=input_ids, attention_mask=full, position_ids=positions(full)[:, p:],
                           cache=cache, use_cache=True).last_hidden_state
    tgt = labels[:, 1:]
    keep = tgt != IGNORE
    sel = hidden[:, :-1][keep]
    return head_logprobs(sel.unsqueeze(0), tgt[keep].unsqueeze(0), head, 1.0)
