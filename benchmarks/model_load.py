"""Embedded model load time: first build from the GGUF (de-quantise + save) vs reload from the safetensors cache.

Target (issue 2): a load from the cache, integrity check included, in under 2 s.
Run: .venv/bin/python benchmarks/model_load.py  ->  benchmarks/results/model_load.json
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    os.environ.setdefault("RLVR_THREADS", "1")
    with tempfile.TemporaryDirectory() as home:
        os.environ["RLVR_HOME"] = home
        from training.model import check_cache, embedded_cache_dir, load_model

        t0 = time.perf_counter()
        load_model("default")
        first = time.perf_counter() - t0
        reloads = []
        for _ in range(3):
            t0 = time.perf_counter()
            load_model("default")
            reloads.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        check_cache(embedded_cache_dir(), full_hash=True)
        verify = time.perf_counter() - t0
    result = {
        "first_load_from_gguf_s": round(first, 2),
        "cached_load_s": [round(x, 2) for x in reloads],
        "cached_load_best_s": round(min(reloads), 2),
        "integrity_check_s": round(verify, 2),
        "target_s": 2.0,
        "meets_target": min(reloads) < 2.0,
        "load_average": os.getloadavg()[0],
    }
    out = Path(__file__).parent / "results" / "model_load.json"
    out.parent.mkdir(exist_ok=True)
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=2))
    os.replace(tmp, out)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
