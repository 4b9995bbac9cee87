"""How far is each policy from greedily following the verified demonstration, in nats, token by token?

    .venv/bin/python benchmarks/decision_margin.py --models /tmp/lw13/sft /tmp/lw13/sft_grpo --work /tmp/lw13

For each of learn_workplace's test tasks the task's ground truth is replayed through the environment
(`rewards.environments.workplace.demonstrations.demonstration`: the transcript SFT trains on) and every model reads
it teacher-forced in one forward pass. At every decision token (the tool-calling replies whole, the first token of
the final answer, whose wording the verifier does not read) it records whether the model's argmax is the
demonstration's token, and where it is not, the margin: log p(argmax) - log p(demonstration token). A greedy episode
makes the demonstration's calls exactly when no decision token deviates, so the first deviation is the decision a
training stage must flip (or an equally valid alternative path), and its margin is how far the stage has to move
it; where the argmax *is* the demonstration's token, its lead over the runner-up (log p(token) - log p(second)), and
per task the closest call of a model that follows the demonstration (its smallest lead). With `--diffs`
(greedy_episode_diff results of stages from the first model), the closest calls of the tasks a stage lost are set
against those of the tasks it kept: whether a stage's losses are the decisions the first model made by a small
margin. Why: pass@1 on 48 tasks says only whether decisions flipped; this says by how much a stage moved them toward
flipping (a stage can move every failed task's deciding token by 0.1 nats and flip none), which sizes the learning
rate or number of updates a recipe needs. Diagnostic only: the test tasks' demonstrations are never trained on.
Nothing is trained or sampled; the numbers are deterministic for given weights.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def demo_messages(task: Any, world: Any) -> list[dict[str, str]]:
    """The task's verified demonstration as chat messages (what SFT reads)."""
    from rewards.environments.workplace import WorkplaceEnv
    from rewards.environments.workplace.demonstrations import demonstration, demonstration_record

    return demonstration_record(demonstration(task, WorkplaceEnv(world)), task)["messages"]


def assistant_spans(tok: Any, messages: list[dict[str, str]]) -> tuple[str, list[tuple[int, int, int, bool]]]:
    """The rendered conversation and, per assistant turn, (turn, start char, end char, whether it calls a tool) of
    its reply and end token, found as the difference between renderings so any chat template works."""
    full = tok.apply_chat_template(messages, tokenize=False)
    spans = []
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        pre = tok.apply_chat_template(messages[:i], add_generation_prompt=True, tokenize=False)
        if not full.startswith(pre):
            raise ValueError("the chat template renders a prefix of the conversation differently from the whole")
        after = tok.apply_chat_template(messages[: i + 1], tokenize=False)
        spans.append((len(spans), len(pre), len(after.rstrip("\n")), "<tool_call>" in m["content"]))
    return full, spans


def token_margins(model: Any, tok: Any, messages: list[dict[str, str]]) -> list[dict[str, Any]]:
    """The decision tokens of the teacher-forced demonstration: every token of a turn that calls tools, and the
    first token of a turn that answers (whether to call or to answer; the answer's wording is not verified). Each
    with its turn, text, log-prob, and where the model's argmax differs, the argmax's text and the margin
    log p(argmax) - log p(token) (> 0); where it agrees, the lead log p(token) - log p(runner-up) (>= 0)."""
    import torch

    full, spans = assistant_spans(tok, messages)
    enc = tok(full, add_special_tokens=False, return_offsets_mapping=True)
    ids = enc["input_ids"]
    with torch.no_grad():
        logp = model(torch.tensor([ids])).logits[0].float().log_softmax(-1)
    out = []
    for pos in range(1, len(ids)):
        start = enc["offset_mapping"][pos][0]
        span = next((sp for sp in spans if sp[1] <= start < sp[2]), None)
        if span is None or (not span[3] and enc["offset_mapping"][pos - 1][0] >= span[1]):
            continue  # outside the replies, or past the first token of an answer
        turn = span[0]
        row = logp[pos - 1]
        best = int(row.argmax())
        rec = {"pos": pos, "turn": turn, "token": tok.decode([ids[pos]]), "logp": round(float(row[ids[pos]]), 4)}
        if best != ids[pos]:
            rec.update(argmax=tok.decode([best]), margin=round(float(row[best] - row[ids[pos]]), 4),
                       context=full[max(0, start - 60):start])
        else:
            top2 = row.topk(2).values
            rec["lead"] = round(float(top2[0] - top2[1]), 4)
        out.append(rec)
    return out


def task_record(task: Any, per_model: dict[str, list[dict[str, Any]]], first_model: str) -> dict[str, Any]:
    """One task: per model, how many assistant tokens deviate and the first deviation; plus every model's margin at
    the first model's first deviation (same position, teacher-forced), which shows how far a stage moved it."""
    rec: dict[str, Any] = {"task_id": task.id, "template": task.metadata.get("template"),
                           "held_out_template": bool(task.metadata.get("held_out_template")), "models": {}}
    anchor = next((r for r in per_model[first_model] if "margin" in r), None)
    for name, toks in per_model.items():
        dev = [r for r in toks if "margin" in r]
        first = dev[0] if dev else None
        leads = [r["lead"] for r in toks if "lead" in r]
        m: dict[str, Any] = {"tokens": len(toks), "deviations": len(dev), "follows": not dev,
                             "closest_lead": min(leads) if leads and not dev else None,
                             "first": ({k: first[k] for k in ("turn", "token", "argmax", "margin", "context")}
                                       if first else None)}
        if anchor is not None:
            at = next(r for r in toks if r["pos"] == anchor["pos"])
            m["at_first_model_deviation"] = {"logp_demo_token": at["logp"], "margin": at.get("margin", 0.0)}
        rec["models"][name] = m
    return rec


def summary(records: list[dict[str, Any]], names: list[str]) -> dict[str, Any]:
    """Per model: tasks whose demonstration it follows greedily, and the mean first-deviation margin; per template
    the same, and the mean change of the margin at the first model's deviations."""
    out: dict[str, Any] = {}
    for name in names:
        ms = [r["models"][name] for r in records]
        firsts = [m["first"]["margin"] for m in ms if m["first"]]
        out[name] = {"follows": sum(m["follows"] for m in ms), "tasks": len(ms), "mean_first_margin": _mean(firsts)}
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        by[r["template"]].append(r)
    out["by_template"] = {}
    for tpl, rs in sorted(by.items()):
        row: dict[str, Any] = {"tasks": len(rs),
                               "follows": {n: sum(r["models"][n]["follows"] for r in rs) for n in names}}
        margins = _margins_at_first_model_deviation(rs, names)
        if margins[names[0]]:
            row["margin_at_first_model_deviation"] = {n: _mean(v) for n, v in margins.items()}
        out["by_template"][tpl] = row
    return out


def _margins_at_first_model_deviation(records: list[dict[str, Any]], names: list[str]) -> dict[str, list[float]]:
    """Per model, its margin at the first model's first deviation, over the records where the first model deviates."""
    rs = [r for r in records if "at_first_model_deviation" in r["models"][names[0]]]
    return {n: [r["models"][n]["at_first_model_deviation"]["margin"] for r in rs] for n in names}


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 3) if values else None


def leads_vs_flips(records: list[dict[str, Any]], model: str, passed_before: set[str], lost: set[str],
                   small: float = 1.0) -> dict[str, Any]:
    """Of the tasks `model` passed and whose demonstration it follows greedily (so its closest call is defined), the
    closest calls of those a later stage lost against those it kept: count, median, and how many were made by less
    than `small` nats. Tasks passed another way than the demonstration's are counted apart (no lead to read)."""
    rows = [r for r in records if r["task_id"] in passed_before]
    follow = [r for r in rows if r["models"][model]["closest_lead"] is not None]
    out: dict[str, Any] = {"passed_before": len(rows), "passed_another_way": len(rows) - len(follow)}
    for key, inside in (("lost", True), ("kept", False)):
        leads = [r["models"][model]["closest_lead"] for r in follow if (r["task_id"] in lost) == inside]
        out[key] = {"tasks": len(leads), "median_closest_lead": round(statistics.median(leads), 4) if leads else None,
                    f"below_{small:g}_nats": sum(v < small for v in leads)}
    return out


def focus_summary(records: list[dict[str, Any]], names: list[str], groups: set[str]) -> dict[str, Any]:
    """The same movement split by whether a task's template was one a focused stage trained on (`data.focus`'s
    trained groups) or not: a focused stage should move the first and leave the second."""
    out: dict[str, Any] = {}
    for key, inside in (("focused_templates", True), ("other_templates", False)):
        margins = _margins_at_first_model_deviation([r for r in records if (r["template"] in groups) == inside], names)
        out[key] = {"tasks": len(margins[names[0]]),
                    "mean_margin_at_first_model_deviation": {n: _mean(v) for n, v in margins.items()},
                    "flipped_at_that_position": {n: sum(m == 0.0 for m in v) for n, v in margins.items()}}
    return out


def main() -> None:
    from generators.task_io import atomic_write_bytes
    from learn_workplace import test_sample
    from training.model import configure_threads, load_model
    from training.multiturn import load_workplace_world

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", required=True, help="model folders; the first is the reference (e.g. SFT)")
    ap.add_argument("--work", type=Path, required=True, help="learn_workplace's --work (its dataset)")
    ap.add_argument("--tools", default="relevant")
    ap.add_argument("--eval-tasks", type=int, default=48)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--labels", nargs="+", help="what each model is, in --models order (kept in the JSON)")
    ap.add_argument("--focus", type=Path, help="a focused stage's focus.json: split the summary by its trained groups")
    ap.add_argument("--diffs", type=Path, nargs="*", default=[], help="greedy_episode_diff results whose --before is "
                    "the first model: set the closest calls of the tasks each stage lost against those it kept")
    ap.add_argument("--result", type=Path, default=ROOT / "benchmarks" / "results" / "decision_margin.json")
    a = ap.parse_args()
    if a.labels and len(a.labels) != len(a.models):
        ap.error(f"--labels names {len(a.labels)} models, --models gives {len(a.models)}")
    focus = set(json.loads(a.focus.read_text())["trained_groups"]) if a.focus else None
    configure_threads(a.threads)
    data = a.work / f"data-{a.tools}"
    if not (data / "test.parquet").exists():
        raise SystemExit(f"{data}: no learn_workplace dataset; run benchmarks/learn_workplace.py --work {a.work} first")
    tasks = test_sample(data, a.eval_tasks)
    world = load_workplace_world(data)
    demos = {t.id: demo_messages(t, world) for t in tasks}
    per_task: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(dict)
    t0 = time.time()
    for path in a.models:
        model, tok = load_model(path, threads=a.threads)
        model.eval()
        for t in tasks:
            per_task[t.id][path] = token_margins(model, tok, demos[t.id])
        del model
    records = [task_record(t, per_task[t.id], a.models[0]) for t in tasks]
    flips = {}
    for path in a.diffs:
        diff = json.loads(path.read_text())
        if Path(diff["before"]).resolve() != Path(a.models[0]).resolve():
            raise SystemExit(f"{path}: its --before is {diff['before']}, not the first model {a.models[0]}")
        rows = {r["task_id"]: r for r in diff["tasks"]}
        missing = [t.id for t in tasks if t.id not in rows]
        if missing:
            raise SystemExit(f"{path}: has no result for {len(missing)} of the tasks read here (first {missing[0]}); "
                             f"run it with --eval-tasks {a.eval_tasks}")
        lost = set(diff["lost"])
        flips[path.name] = leads_vs_flips(records, a.models[0], set(diff["kept"]) | lost, lost)
    out = {"benchmark": "decision_margin",
           "command": f".venv/bin/python benchmarks/decision_margin.py {' '.join(sys.argv[1:])}",
           "models": a.models, **({"labels": dict(zip(a.models, a.labels))} if a.labels else {}),
           "n": len(tasks), "summary": summary(records, a.models),
           **({"focus_groups": sorted(focus), "by_focus": focus_summary(records, a.models, focus)} if focus else {}),
           **({"closest_call_vs_flips": flips} if flips else {}),
           "tasks": records,
           "wall_s": round(time.time() - t0, 1)}
    atomic_write_bytes(a.result, (json.dumps(out, indent=1) + "\n").encode())
    s = out["summary"]
    print("; ".join(f"{n}: follows {s[n]['follows']}/{s[n]['tasks']}, mean first margin {s[n]['mean_first_margin']}"
                    for n in a.models))
    for name, f in flips.items():
        print(f"{name}: lost {f['lost']}, kept {f['kept']}, passed another way {f['passed_another_way']}")


if __name__ == "__main__":
    main()
