"""`accelerate launch --multi_gpu --num_processes 2` on CPU (gloo): DDP training of the tiny config keeps both ranks' weights
identical and writes one checkpoint."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_training_tiny import _tiny_yaml

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import hashlib, json, sys, torch
from training.config_io import load_train_config
from training.grpo import GRPOTrainer
cfg = load_train_config(sys.argv[1])
trainer = GRPOTrainer(cfg)
res = trainer.train()
h = hashlib.sha256()
for name, p in sorted(trainer.model.state_dict().items()):
    h.update(name.encode()); h.update(p.detach().cpu().numpy().tobytes())
out = {"rank": trainer.dist.rank, "world": trainer.dist.world, "hash": h.hexdigest(), "steps": res.steps}
open(f"{cfg.output_dir}/rank{trainer.dist.rank}.json", "w").write(json.dumps(out))
"""


SFT_SCRIPT = """
import json, os, sys
from pathlib import Path
from training.config_io import load_train_config
from training.sft import run_sft
cfg = load_train_config(sys.argv[1])
out = run_sft(cfg, out_dir=Path(cfg.output_dir) / "sft")
info = json.loads((out / "sft_info.json").read_text())  # every rank returns after the folder is complete
Path(cfg.output_dir, f"sft_rank{os.environ['RANK']}.json").write_text(json.dumps({"steps": info["steps"]}))
"""


def _launch(tmp_path: Path, script_text: str, cfg: Path) -> None:
    """Run `script_text` under `accelerate launch` with 2 CPU processes; fail with its output if it fails."""
    script = tmp_path / "ddp_script.py"
    script.write_text(script_text)
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    env = {**os.environ, "RLVR_THREADS": "1", "PYTHONPATH": str(ROOT)}
    # on a machine without GPUs, `--multi_gpu` starts torchrun-style workers and Accelerator picks gloo on CPU
    # (`--cpu` alone launches a single process)
    proc = subprocess.run([accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
                           "--mixed_precision", "no", "--dynamo_backend", "no", str(script), str(cfg)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


@pytest.mark.slow
def test_accelerate_launch_two_cpu_processes(tmp_path):
    cfg = _tiny_yaml(tmp_path, steps=3, checkpoint__every=3)
    _launch(tmp_path, SCRIPT, cfg)
    ranks = [json.loads((tmp_path / "run" / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert {r["world"] for r in ranks} == {2}
    assert ranks[0]["hash"] == ranks[1]["hash"]  # gradients were all-reduced: one model on both ranks
    assert ranks[0]["steps"] == 3
    assert (tmp_path / "run" / "checkpoints" / "step-3" / "manifest.json").exists()
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 3  # rank 0 logs, once per step


@pytest.mark.slow
def test_sft_under_accelerate_launch_writes_one_complete_model_folder(tmp_path):
    """Both ranks train; rank 0 alone writes the SFT folder (with the AdamW moments) while the other waits, so
    neither finds the temporary folder removed under it (both used to write it and one crashed)."""
    demos = ROOT / "examples" / "arithmetic" / "demonstrations.jsonl"
    cfg = _tiny_yaml(tmp_path, sft={"data_path": str(demos), "max_steps": 3, "batch_size": 4,
                                    "save_optimizer": True}, optim={"lr": 1e-3, "optimizer": "adamw"})
    _launch(tmp_path, SFT_SCRIPT, cfg)
    assert [json.loads((tmp_path / "run" / f"sft_rank{r}.json").read_text())["steps"] for r in (0, 1)] == [3, 3]
    sft = tmp_path / "run" / "sft"
    info = json.loads((sft / "sft_info.json").read_text())
    assert info["optimizer_moments"] > 0
    assert (sft / "sft_moments.pt").is_file() and (sft / "model.safetensors").is_file()
    assert not list(tmp_path.glob("run/.tmp-*"))


@pytest.mark.slow
def test_the_guard_gives_both_ranks_the_same_verdict(tmp_path):
    """guard under DDP: every rank checks the whole held set on identical weights, so both cut the same steps back
    by the same part and end with one model."""
    from test_training_guard import _reward_file

    cfg = _tiny_yaml(tmp_path, steps=3, checkpoint__every=3, reward__function=f"{_reward_file(tmp_path)}:by_op",
                     optim__optimizer="sgd", optim__lr=300.0, optim__max_grad_norm=None, rollout__max_new_tokens=12,
                     overlong__buffer_tokens=2, guard={"by": "op", "per_group": 4, "backtrack": 2})
    _launch(tmp_path, SCRIPT, cfg)
    ranks = [json.loads((tmp_path / "run" / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert ranks[0]["hash"] == ranks[1]["hash"]
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len(lines) == 3 and any(r["guard_scale"] < 1.0 for r in lines)
    assert (tmp_path / "run" / "guard.json").is_file()
