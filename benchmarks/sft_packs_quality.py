"""Does SFT in shared-prefix packs learn as much as in TRL's own batches? The arithmetic example's SFT section
(examples/configs/arithmetic.yaml, 30 steps) run both ways per seed, then greedy pass@1 on the demo's 32 held-out
tasks (stage 5 of `rlvr demo`).

    .venv/bin/python benchmarks/sft_packs_quality.py 0          # seeds, comma-separated: 0,1,2

Why it exists: the two layouts give the same loss and gradient for one batch (tests/test_training_sft.py), yet
seed 0 reached 0.25 in packs vs 0.53 in TRL's batches. The cause was the packing, not the forward: every recurring
question formed its own 1-3-row pack, so a "step" trained on a fraction of a batch (the logged epoch per step was
half TRL's). With leftovers pooled into full packs, seeds 0/1/2 give 0.375/0.41/0.44 in packs vs 0.53/0.625/0.375
in TRL's batches, and `sft.shared_prefix` stays opt-in.
"""
import json, os, sys, time
from pathlib import Path
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.chdir(ROOT)
from generators.task_io import read_tasks
from training.config_io import load_train_config
from training.model import load_model
from training.policy import load_policy
from training.scoring import load_reward
from training.sft import run_sft
from training.train_eval import greedy_pass_at_1


def main() -> None:
    base = load_train_config(ROOT / "examples/configs/arithmetic.yaml")
    tasks = [t for t in read_tasks(base.data.path) if t.split == "test"][:32]
    rew = load_reward(str(ROOT / "examples/arithmetic/reward.py") + ":tagged_answer")
    res = []
    for seed in [int(s) for s in sys.argv[1].split(",")]:
        for packed in (True, False):
            cfg = base.model_copy(update={"seed": seed, "output_dir": str(ROOT / "runs" / "sft_packs_quality" / f"{seed}-{packed}"),
                                          "sft": base.sft.model_copy(update={"shared_prefix": packed})})
            model, tok = load_policy(cfg.model, seed=seed, threads=cfg.threads)
            t0 = time.time()
            d = run_sft(cfg, model=model, tokenizer=tok)
            sec = time.time() - t0
            m, t = load_model(str(d), threads=cfg.threads)
            r = greedy_pass_at_1(m, t, cfg, tasks, reward=rew)
            res.append({"seed": seed, "shared_prefix": packed, "pass_at_1": r["pass_at_1"], "sft_s": round(sec, 1),
                        "loss": json.loads((d / "sft_info.json").read_text())["train_loss"]})
            print(res[-1], flush=True)
    out = ROOT / "benchmarks" / "results" / "sft_packs_quality.json"
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps({"benchmark": "sft_packs_quality", "command": ".venv/bin/python benchmarks/sft_packs_quality.py "
                               + " ".join(sys.argv[1:]), "runs": res}, indent=1))
    os.replace(tmp, out)


if __name__ == "__main__":
    main()
