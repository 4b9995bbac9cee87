"""Side by side: the same 12-column relational sampler spec in NeMo Data Designer 0.9.7 and in `generators`.

Run: .venv/bin/python benchmarks/datagen_vs_data_designer.py [--dd-rows 2000] [--rows 1000000] [--skip-llm]
Writes benchmarks/results/datagen_vs_data_designer.json (atomically).

Data Designer is installed into benchmarks/.venvs/data-designer (created on first run with `pip install
data-designer==0.9.7`) and runs `dd_sampler_run.py` there with a dummy model provider. Our engine runs in a child
process so that its peak RSS (ru_maxrss) is its own. The LLM part measures the structured column on the embedded
model: valid-row rate after re-validation, rows/s, and constrained vs unconstrained decoding time of the same tokens.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DD_VENV = ROOT / "benchmarks" / ".venvs" / "data-designer"
RESULT = ROOT / "benchmarks" / "results" / "datagen_vs_data_designer.json"

SPEC = {
    "name": "bench_relational",
    "seed": 1,
    "batch_size": 250_000,
    "tables": {"rows": {
        "constraints": ["budget >= 0"],
        "columns": [
            {"name": "id", "kind": "uuid"},
            {"name": "dept", "kind": "category", "values": ["eng", "sales", "ops", "hr"], "weights": [4, 3, 2, 1]},
            {"name": "role", "kind": "subcategory", "parent": "dept", "values": {
                "eng": ["backend", "frontend", "sre"], "sales": ["ae", "se"], "ops": ["it", "facilities"],
                "hr": ["recruiter", "hrbp"]}},
            {"name": "priority", "kind": "category", "values": ["low", "medium", "high"]},
            {"name": "estimate", "kind": "uniform", "low": 1, "high": 8, "conditions": [
                {"when": "priority = 'high'", "params": {"low": 4, "high": 16}},
                {"when": "priority = 'low'", "params": {"low": 1, "high": 4}}]},
            {"name": "tickets", "kind": "poisson", "lam": 3, "conditions": [
                {"when": "dept = 'eng'", "params": {"lam": 6}}]},
            {"name": "remote", "kind": "bernoulli", "p": 0.3, "conditions": [
                {"when": "dept = 'sales'", "params": {"p": 0.6}}]},
            {"name": "created_at", "kind": "datetime", "start": "2026-01-01", "end": "2026-12-31", "unit": "m"},
            {"name": "due_at", "kind": "timedelta", "reference": "created_at", "low": 1, "high": 30, "unit": "D"},
            {"name": "budget", "kind": "gaussian", "mean": 1000, "std": 400},
            {"name": "estimate_minutes", "kind": "expression", "expr": "estimate * 60"},
            {"name": "label", "kind": "template", "template": "{dept}/{role}"},
        ],
    }},
}


def atomic_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2))
    os.replace(tmp, path)


def ensure_dd_venv() -> Path:
    py = DD_VENV / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(DD_VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "data-designer==0.9.7"], check=True)
    return py


def run_dd(rows: int) -> dict:
    py = ensure_dd_venv()
    with tempfile.TemporaryDirectory() as art:
        out = subprocess.run([str(py), str(ROOT / "benchmarks" / "dd_sampler_run.py"), str(rows), art],
                             capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


OURS_CHILD = r"""
import json, resource, sys, time, tempfile
sys.path.insert(0, sys.argv[3])
from benchmarks.datagen_vs_data_designer import SPEC
from generators.writer import generate_dataset
from generators.report import report_for_dir
n, mode = int(sys.argv[1]), sys.argv[2]
with tempfile.TemporaryDirectory() as d:
    generate_dataset(SPEC, 20, d + "/warmup")  # first-call costs out of the timing, as for Data Designer
    t0 = time.perf_counter()
    m = generate_dataset(SPEC, n, d + "/out")
    dt = time.perf_counter() - t0
    rows = m["tables"]["rows"]["rows"]
    ok = report_for_dir(d + "/out")["ok"] if mode == "check" else None
print(json.dumps({"rows": rows, "seconds": dt, "rows_per_s": rows / dt, "relations_ok": ok,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run_ours(rows: int, mode: str = "time") -> dict:
    env = dict(os.environ, RLVR_THREADS="1", POLARS_MAX_THREADS=os.environ.get("POLARS_MAX_THREADS", "2"))
    out = subprocess.run([sys.executable, "-c", OURS_CHILD, str(rows), mode, str(ROOT)], capture_output=True,
                         text=True, env=env, cwd=ROOT)
    if out.returncode:
        raise RuntimeError(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dd-rows", type=int, default=2000)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--skip-llm", action="store_true")
    ap.add_argument("--llm-rows", type=int, default=12)
    args = ap.parse_args()
    result: dict = {"spec_columns": 12, "machine_cores": os.cpu_count()}
    dd = run_dd(args.dd_rows)
    same_n = run_ours(args.dd_rows)
    big = run_ours(args.rows, mode="check")
    result.update({
        "data_designer": {"version": "0.9.7", **dd},
        "ours_same_rows": same_n,
        "ours_1m": big,
        "data_designer_rows_per_s": dd["rows_per_s"],
        "ours_rows_per_s": big["rows_per_s"],
        "speedup_vs_data_designer": big["rows_per_s"] / dd["rows_per_s"],
        "speedup_same_rows": same_n["rows_per_s"] / dd["rows_per_s"],
        "rows_1m_seconds": big["seconds"],
        "rows_1m_peak_rss_mb": big["peak_rss_mb"],
        "targets": {"speedup_ge_500": big["rows_per_s"] / dd["rows_per_s"] >= 500,
                    "rows_1m_le_20s": big["seconds"] <= 20, "rss_le_2gb": big["peak_rss_mb"] <= 2048},
    })
    llm_json = ROOT / "benchmarks" / "results" / "llm_structured.json"
    if not args.skip_llm:
        from benchmarks.llm_structured_bench import run as run_llm

        result["llm_structured"] = run_llm(args.llm_rows)
        atomic_json(llm_json, result["llm_structured"])
    elif llm_json.exists():  # keep the last LLM measurement, marked as such
        result["llm_structured"] = {**json.loads(llm_json.read_text()), "from": str(llm_json.relative_to(ROOT))}
    result["when"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    atomic_json(RESULT, result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
