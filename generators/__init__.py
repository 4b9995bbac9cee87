"""The dataset engine: spec -> validated, reproducible, relationally consistent Parquet datasets.

Entry points: `load_spec` / `SpecBuilder` (the spec), `generate_frames` (in memory), `generate_dataset` (batched,
resumable, to disk), `build_report` / `report_for_dir` (profile and relation checks). `task_io` reads and writes
task datasets.
"""
