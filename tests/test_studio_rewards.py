"""Rewards page: a reward scored on samples in the sandbox (score, components, reason, errors shown as errors),
a shaped reward built with dominance shown and refused when broken, saved and scored like any reward, versions."""

from __future__ import annotations


import pytest
from streamlit.testing.v1 import AppTest

PAGE = "../studio/pages/reward_authoring.py"

CRASHY = '''
def reward(completion, answer=None, **_):
    if "boom" in completion:
        raise ValueError("boom in the completion")
    return float(completion.strip() == str(answer))
'''


@pytest.fixture()
def ws(studio_ws):
    return studio_ws


def _pick(at, file, fn, dataset="datasets/arithmetic_tasks.jsonl"):
    at.selectbox(key="reward_file").select(file).run()
    at.selectbox(key=f"reward_fn::{file}").select(fn).run()
    at.selectbox(key="rw_dataset").select(dataset).run()


def test_score_on_reference_answers_with_errors_counted(ws):
    (ws.root / "rewards" / "crashy.py").write_text(CRASHY)
    (ws.root / "completions" / "c.jsonl").write_text(
        '{"id": "arith-0000", "completion": "27"}\n{"id": "arith-0001", "completion": "boom"}\n'
        '{"id": "arith-0002", "completion": "4"}\n')
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    _pick(at, "rewards/crashy.py", "reward")
    at.selectbox(key="rw_source").select("completions file").run()
    at.button(key="score").click().run()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["samples"] == "3" and metrics["errors"] == "1"
    frame = at.dataframe[0].value
    assert frame["score"].tolist()[0] == 1.0 and frame["score"].tolist()[2] == 0.0
    assert "boom in the completion" in frame["error"].tolist()[1]  # an error result, never a silent 0
    assert any("errored" in e.value for e in at.error)


def test_shaped_reward_dominance_save_and_score(ws):
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    _pick(at, "rewards/arithmetic_reward.py", "tagged_answer")
    at.button(key="score").click().run()  # reference answers: bare numbers, no tag: every sample fails
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["pass rate"] == "0%" and metrics["dominance"] == "holds"
    assert float(metrics["highest failing score"]) < float(metrics["lowest passing score"])
    # refuse mode with weights that break dominance: the library's explanation is shown
    at.selectbox(key="sh_scale").select("none").run()
    spec = f"{ws.root / 'rewards' / 'arithmetic_reward.py'}:tagged_answer"
    at.session_state[f"sh_signals::{spec}"] = {"edited_rows": {0: {"weight": 2.0}}, "added_rows": [], "deleted_rows": []}
    at.run()
    assert any("refused" in e.value and "breaks dominance" in e.value for e in at.error)
    # auto mode scales the same weights down instead
    at.selectbox(key="sh_scale").select("auto").run()
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["dominance"] == "holds" and float(metrics["weight scale"]) < 1.0
    at.button(key="sh_save").click().run()
    assert (ws.root / "rewards" / "tagged_answer_shaped.py").exists()
    at.run()
    _pick(at, "rewards/tagged_answer_shaped.py", "tagged_answer_shaped")
    at.button(key="score").click().run()
    assert not at.exception
    frame = at.dataframe[0].value
    assert frame["error"].isna().all()
    assert all('"passed": 0.0' in c for c in frame["components"])


def test_versions_and_diff(ws):
    path = ws.root / "rewards" / "v.py"
    path.write_text("def reward(completion, **_):\n    return 1.0\n")
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    at.selectbox(key="reward_file").select("rewards/v.py").run()
    at.text_input(key="reward_label").input("first").run()
    at.button(key="save_reward").click().run()
    at.text_area(key="reward_code::rewards/v.py").input("def reward(completion, **_):\n    return 0.5\n").run()
    at.text_input(key="reward_label").input("second").run()
    at.button(key="save_reward").click().run()
    at.run()
    table = at.dataframe[-1].value
    assert set(table["label"]) == {"first", "second"}
    diff = [c.value for c in at.code if c.language == "diff"][0]
    assert "-    return 1.0" in diff and "+    return 0.5" in diff
