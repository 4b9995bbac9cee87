"""SFT warm start: assistant-only masks from the chat template, shared-prefix packs that give the same loss and
gradient as separate conversations, and TRL's SFTTrainer driving both layouts to a model that fits its
demonstrations."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch

from training.sft import read_demonstrations, tokenize_with_assistant_mask
from training.sft_packs import IGNORE, build_packs, collate_pack, pack_prefix_len, pack_token_logprobs

SYSTEM = ("You can use tools. To call a tool, write <tool_call>{...}</tool_call>.\nTools:\n"
          "email_search_emails(query?: string) - Searches emails.\nemail_reply_email(email_id: string, body: string)")


def _tiny():
    from training.model import load_tokenizer
    from training.policy import build_random_model

    tok = load_tokenizer("default")
    return build_random_model(tok, seed=3), tok


def _demo(who: str, reply: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Answer the latest email from {who}: '{reply}'"},
            {"role": "assistant", "content": f'<tool_call>{{"name": "email_search_emails", "arguments": {{"query": "{who}"}}}}</tool_call>'},
            {"role": "tool", "content": f'{{"emails": [{{"email_id": "000001{len(who):02d}", "sender": "{who}"}}]}}'},
            {"role": "assistant", "content": f'<tool_call>{{"name": "email_reply_email", "arguments": {{"email_id": "000001{len(who):02d}", "body": "{reply}"}}}}</tool_call>'},
            {"role": "tool", "content": '"Email replied successfully."'},
            {"role": "assistant", "content": f"I replied to {who}."}]


DEMOS = [_demo("Anthony", "Thanks!"), _demo("Shirley Moses", "Please keep me posted."), _demo("Ryan", "On it.")]


def test_assistant_mask_covers_exactly_the_assistant_turns():
    _, tok = _tiny()
    row = tokenize_with_assistant_mask(tok, DEMOS[1], 4096)
    ids, mask = row["input_ids"], row["assistant_masks"]
    assert ids == tok(tok.apply_chat_template(DEMOS[1], tokenize=False), add_special_tokens=False)["input_ids"]
    learned = tok.decode([t for t, m in zip(ids, mask) if m])
    assert "email_reply_email" in learned and "I replied to Shirley Moses." in learned
    assert "Email replied successfully" not in learned and "Answer the latest email" not in learned
    assert learned.count(tok.eos_token) == 3  # each assistant turn learns to end itself
    system = tok(tok.apply_chat_template(DEMOS[1][:1], tokenize=False), add_special_tokens=False)["input_ids"]
    assert row["context_len"] == len(system) and ids[: len(system)] == system


def test_a_shared_prefix_pack_gives_the_loss_and_gradient_of_separate_conversations():
    model, tok = _tiny()
    twin = copy.deepcopy(model)
    rows = [tokenize_with_assistant_mask(tok, d, 4096) for d in DEMOS]
    (pack,) = build_packs(rows, batch=4, seed=0)
    assert len(pack["prefix_ids"]) >= rows[0]["context_len"]  # the system prompt runs once for the pack
    batch = collate_pack([pack], tok.pad_token_id)
    lp, _ = pack_token_logprobs(twin, **batch)
    packed_nll = -lp.sum()

    separate = torch.zeros(())
    for r in rows:  # plain causal-LM forward of each whole conversation, NLL of its assistant tokens
        ids = torch.tensor([r["input_ids"]])
        logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), -1)
        tgt = ids[0, 1:]
        keep = torch.tensor(r["assistant_masks"][1:], dtype=torch.bool)
        separate = separate - logp.gather(-1, tgt[:, None]).squeeze(-1)[keep].sum()
    assert lp.numel() == sum(sum(r["assistant_masks"]) for r in rows)
    assert torch.allclose(packed_nll, separate, rtol=1e-5)
    packed_nll.backward()
    separate.backward()
    for (n, a), (_, b) in zip(model.named_parameters(), twin.named_parameters()):
        assert torch.allclose(a.grad, b.grad, atol=1e-5, rtol=1e-4), (n, float((a.grad - b.grad).abs().max()))


def test_packs_group_by_system_prompt_and_never_hide_a_label_in_the_prefix():
    _, tok = _tiny()
    other = [[{"role": "system", "content": "Another toolkit entirely, listed at some length " * 4}] + d[1:]
             for d in DEMOS[:2]]
    lone = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    rows = [tokenize_with_assistant_mask(tok, d, 4096) for d in DEMOS + other + [lone]]
    packs = build_packs(rows, batch=2, seed=0)
    # 3 + 2 + 1 rows: the toolkits' whole packs, then the leftovers (one of DEMOS, the lone row) pooled into one
    assert sorted(len(p["row_ids"]) for p in packs) == [2, 2, 2]
    assert sum(len(p["row_ids"]) for p in packs) == len(rows)
    for p in packs:
        for ids, mask in zip(p["row_ids"], p["row_masks"]):
            assert mask[0] == 0 and len(ids) == len(mask)  # the first row token is predicted from the row itself
    # two copies of one conversation share everything up to (not into) the first assistant token
    same = [tokenize_with_assistant_mask(tok, DEMOS[0], 4096)] * 2
    first = same[0]["assistant_masks"].index(1)
    assert pack_prefix_len(same) == first - 1
    batch = collate_pack(build_packs(same, batch=2, seed=0), tok.pad_token_id)
    assert (batch["labels"][:, 0] == IGNORE).all()


def test_recurring_openings_still_fill_every_pack():
    """Single-turn questions that recur a few times each (arithmetic) must not turn into one short pack per
    question: a pack is an optimizer step's batch, and half-empty packs halved what SFT learned."""
    _, tok = _tiny()
    qs = [[{"role": "user", "content": f"What is {i} + {i}?"}, {"role": "assistant", "content": str(2 * i)}]
          for i in range(10)]
    rows = [tokenize_with_assistant_mask(tok, d, 4096) for d in qs + qs + qs[:3]]  # 23 rows, openings 2-3 times
    packs = build_packs(rows, batch=4, seed=0)
    sizes = sorted(len(p["row_ids"]) for p in packs)
    assert sizes == [3] + [4] * 5, sizes
    assert sorted(tuple(p["prefix_ids"]) + tuple(r) for p in packs for r in p["row_ids"]) == \
        sorted(tuple(r["input_ids"]) for r in rows)  # every row exactly once, prefix + own tokens intact


def test_length_windows_pad_less_and_keep_every_row_once():
    """Sorting windows of rows by length before cutting packs must cut the padding the packs compute without
    dropping, repeating or altering any row, and stay reproducible by seed."""
    _, tok = _tiny()
    convs = [[{"role": "system", "content": "You are a calculator."},
              {"role": "user", "content": "Add " + " plus ".join(str(j) for j in range(1 + i % 7 * 5))},
              {"role": "assistant", "content": str(i)}] for i in range(48)]
    rows = [tokenize_with_assistant_mask(tok, d, 4096) for d in convs]

    def padding(packs):
        return sum(max(map(len, p["row_ids"])) * len(p["row_ids"]) - sum(map(len, p["row_ids"])) for p in packs)

    plain, windowed = build_packs(rows, batch=4, seed=0), build_packs(rows, batch=4, seed=0, length_window=4)
    assert padding(windowed) < padding(plain) / 2, (padding(windowed), padding(plain))
    assert [len(p["row_ids"]) for p in windowed] == [4] * 12
    assert sorted(tuple(p["prefix_ids"]) + tuple(r) for p in windowed for r in p["row_ids"]) == \
        sorted(tuple(r["input_ids"]) for r in rows)
    assert windowed == build_packs(rows, batch=4, seed=0, length_window=4)
    with pytest.raises(ValueError, match="pack_length_window orders the rows of shared-prefix packs"):
        from schemas.train_config import SFTSection
        SFTSection(data_path="d.jsonl", pack_length_window=8)


@pytest.mark.parametrize("shared_prefix", [True, False])
def test_sft_through_trl_fits_the_demonstrations(tmp_path, shared_prefix):
    from schemas.train_config import SFTSection
    from training.config_io import parse_train_config
    from training.sft import run_sft

    demos = tmp_path / "demos.jsonl"
    demos.write_text("".join(json.dumps({"messages": d}) + "\n" for d in DEMOS * 4))
    cfg = parse_train_config({
        "name": "sft-test", "output_dir": str(tmp_path / "run"), "threads": 1,
        "model": {"init": "random", "tokenizer": "default",
                  "architecture": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                                   "num_attention_heads": 4, "num_key_value_heads": 2}},
        "data": {"path": str(demos)}, "reward": {"function": "env", "allow_unaudited": True},
        "sft": SFTSection(data_path=str(demos), max_steps=15, lr=3e-3, batch_size=4, max_length=1024,
                          shared_prefix=shared_prefix).model_dump(),
    })
    model, tok = _tiny()
    rows = [tokenize_with_assistant_mask(tok, d, 4096) for d in read_demonstrations(demos)]

    def nll(m) -> float:
        with torch.no_grad():
            b = collate_pack(build_packs(rows, 16, 0), tok.pad_token_id)
            return float(-pack_token_logprobs(m, **b)[0].mean())

    before = nll(model)
    losses: list[float] = []
    out = run_sft(cfg, model=model, tokenizer=tok, out_dir=tmp_path / "sft",
                  on_log=lambda r: losses.append(r["loss"]) if "loss" in r else None)
    info = json.loads((out / "sft_info.json").read_text())
    assert info["shared_prefix"] is shared_prefix and info["steps"] == 15
    assert info["batches_per_epoch"] == 3  # 12 rows: 3 packs of 4 sharing the system prompt, or 3 batches of 4
    from transformers import AutoModelForCausalLM

    after = nll(AutoModelForCausalLM.from_pretrained(out))
    assert after < 0.6 * before, (before, after)  # random init: ~10.8 nats per token before, ~6 after 15 steps
    assert losses[-1] < losses[0]
    assert not any(Path(tmp_path).glob(".tmp-*")) and (out / "model.safetensors").exists()


def test_sft_with_frozen_lower_layers_trains_only_the_upper_ones(tmp_path):
    """model.freeze_layers / freeze_embeddings apply to SFT too, also to a model passed in by the caller."""
    from safetensors.torch import load_file

    from training.config_io import parse_train_config
    from training.sft import run_sft

    demos = tmp_path / "demos.jsonl"
    demos.write_text("".join(json.dumps({"messages": d}) + "\n" for d in DEMOS * 2))
    cfg = parse_train_config({
        "name": "sft-frozen", "output_dir": str(tmp_path / "run"), "threads": 1,
        "model": {"init": "random", "tokenizer": "default", "freeze_layers": 1, "freeze_embeddings": True},
        "data": {"path": str(demos)}, "reward": {"function": "env", "allow_unaudited": True},
        "sft": {"data_path": str(demos), "max_steps": 3, "lr": 3e-3, "batch_size": 3},
    })
    model, tok = _tiny()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    out = run_sft(cfg, model=model, tokenizer=tok, out_dir=tmp_path / "sft")
    after = load_file(out / "model.safetensors")
    info = json.loads((out / "sft_info.json").read_text())
    assert info["trainable_params"] == sum(v.numel() for k, v in before.items() if k.startswith("model.layers.1."))\
        + before["model.norm.weight"].numel()
    for k in after:
        if k.startswith(("model.embed_tokens", "model.layers.0.")):
            assert torch.equal(before[k], after[k]), f"{k} is frozen but changed"
        elif k.endswith("proj.weight"):
            assert not torch.equal(before[k], after[k]), f"{k} should have trained"


def test_sft_with_lora_on_chosen_layers_changes_only_those_layers(tmp_path):
    """sft.lora with layers: TRL trains adapters on layer 1 only; the saved (merged) model differs from the start in
    layer 1's adapted projections and nowhere else."""
    from safetensors.torch import load_file

    from training.config_io import parse_train_config
    from training.sft import run_sft

    demos = tmp_path / "demos.jsonl"
    demos.write_text("".join(json.dumps({"messages": d}) + "\n" for d in DEMOS * 2))
    cfg = parse_train_config({
        "name": "sft-lora", "output_dir": str(tmp_path / "run"), "threads": 1,
        "model": {"init": "random", "tokenizer": "default"},
        "data": {"path": str(demos)}, "reward": {"function": "env", "allow_unaudited": True},
        "sft": {"data_path": str(demos), "max_steps": 3, "lr": 3e-2, "batch_size": 3,
                "lora": {"enabled": True, "r": 4, "target_modules": ["q_proj", "v_proj"], "layers": [1]}},
    })
    model, tok = _tiny()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    out = run_sft(cfg, model=model, tokenizer=tok, out_dir=tmp_path / "sft")
    after = load_file(out / "model.safetensors")
    changed = sorted(k for k in after if not torch.equal(before[k], after[k]))
    assert changed == ["model.layers.1.self_attn.q_proj.weight", "model.layers.1.self_attn.v_proj.weight"], changed
