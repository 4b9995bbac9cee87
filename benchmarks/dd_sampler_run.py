"""Data Designer side of `datagen_vs_data_designer.py`; runs inside the Data Designer venv the benchmark creates.

Usage: python dd_sampler_run.py N ARTIFACT_DIR  -> prints one JSON line {"rows", "seconds", "rows_per_s"}.
The spec mirrors `datagen_vs_data_designer.SPEC` column for column. Data Designer needs a model provider even for
a sampler-only config; a dummy OpenAI-compatible endpoint is configured and never called (no LLM columns).
"""

import json
import logging
import sys
import time

from data_designer.config.column_configs import ExpressionColumnConfig, SamplerColumnConfig
from data_designer.config.config_builder import DataDesignerConfigBuilder
from data_designer.config.models import ModelConfig, ModelProvider
from data_designer.config.sampler_constraints import ScalarInequalityConstraint
from data_designer.interface.data_designer import DataDesigner

logging.disable(logging.WARNING)


def build() -> DataDesignerConfigBuilder:
    b = DataDesignerConfigBuilder(model_configs=[
        ModelConfig(alias="dummy", model="dummy", provider="dummy", skip_health_check=True)])
    S = SamplerColumnConfig
    b.add_column(S(name="id", sampler_type="uuid", params={}))
    b.add_column(S(name="dept", sampler_type="category",
                   params={"values": ["eng", "sales", "ops", "hr"], "weights": [4, 3, 2, 1]}))
    b.add_column(S(name="role", sampler_type="subcategory", params={"category": "dept", "values": {
        "eng": ["backend", "frontend", "sre"], "sales": ["ae", "se"], "ops": ["it", "facilities"],
        "hr": ["recruiter", "hrbp"]}}))
    b.add_column(S(name="priority", sampler_type="category", params={"values": ["low", "medium", "high"]}))
    b.add_column(S(name="estimate", sampler_type="uniform", params={"low": 1, "high": 8},
                   conditional_params={"priority == 'high'": {"low": 4, "high": 16},
                                       "priority == 'low'": {"low": 1, "high": 4}}))
    b.add_column(S(name="tickets", sampler_type="poisson", params={"mean": 3},
                   conditional_params={"dept == 'eng'": {"mean": 6}}))
    b.add_column(S(name="remote", sampler_type="bernoulli", params={"p": 0.3},
                   conditional_params={"dept == 'sales'": {"p": 0.6}}))
    b.add_column(S(name="created_at", sampler_type="datetime",
                   params={"start": "2026-01-01", "end": "2026-12-31", "unit": "m"}))
    b.add_column(S(name="due_at", sampler_type="timedelta",
                   params={"dt_min": 1, "dt_max": 30, "reference_column_name": "created_at", "unit": "D"}))
    b.add_column(S(name="budget", sampler_type="gaussian", params={"mean": 1000, "stddev": 400}))
    b.add_constraint(ScalarInequalityConstraint(target_column="budget", operator="ge", rhs=0))
    b.add_column(ExpressionColumnConfig(name="estimate_minutes", expr="{{ estimate * 60 }}", dtype="float"))
    b.add_column(ExpressionColumnConfig(name="label", expr="{{ dept }}/{{ role }}", dtype="str"))
    return b


def main() -> None:
    n, art = int(sys.argv[1]), sys.argv[2]
    dd = DataDesigner(artifact_path=art, model_providers=[
        ModelProvider(name="dummy", endpoint="http://127.0.0.1:9/v1", api_key="none")])
    builder = build()
    dd.create(builder, num_records=20, dataset_name="warmup")  # first-call costs out of the timing, as for ours
    t0 = time.perf_counter()
    res = dd.create(builder, num_records=n, dataset_name="bench")
    df = res.load_dataset()
    dt = time.perf_counter() - t0
    assert len(df) == n, (len(df), n)
    assert (df["budget"] >= 0).all()
    print(json.dumps({"rows": int(len(df)), "seconds": dt, "rows_per_s": len(df) / dt,
                      "columns": list(map(str, df.columns))}))


if __name__ == "__main__":
    main()
