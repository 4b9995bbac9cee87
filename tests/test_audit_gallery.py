"""The audit against a gallery of deliberately exploitable rewards (each must be caught by the probe built for it)
and sound ones (each must pass). Rewards and datasets are in tests/audit_gallery.py."""

from __future__ import annotations

import pytest

import audit_gallery as G
from rewards.audit import all_probes, audit_callable
from schemas.audit import SEVERITY_RANK, AuditReport


def _audit(fn, rows):
    report, _ = audit_callable(fn, rows, sandbox=False)
    return report


def test_registry_has_at_least_40_probes_in_families():
    probes = all_probes()
    families = {p.family for p in probes}
    assert len(probes) >= 40
    assert {"sanity", "bypass", "parser", "length", "judge", "tools", "composition", "robustness"} <= families
    assert len({p.key for p in probes}) == len(probes)


@pytest.mark.parametrize("fn", list(G.EXPLOITABLE_TEXT), ids=lambda f: f.__name__)
def test_exploitable_text_reward_is_caught_by_its_probe(fn):
    report = _audit(fn, G.math_rows())
    flagged = {f"{f.family}/{f.probe}": f for f in report.findings}
    assert report.verdict == "fail"
    for key in G.EXPLOITABLE_TEXT[fn]:
        assert key in flagged, f"{fn.__name__}: {key} not flagged; got {sorted(flagged)}"
        f = flagged[key]
        assert SEVERITY_RANK[f.severity] >= SEVERITY_RANK["high"]
        assert 0 < f.fooled_rows <= f.tested_rows
        assert 1 <= len(f.examples) <= 3 and all(e.input is not None for e in f.examples)


@pytest.mark.parametrize("fn", list(G.EXPLOITABLE_TRAJECTORY), ids=lambda f: f.__name__)
def test_exploitable_trajectory_reward_is_caught_by_its_probe(fn):
    report = _audit(fn, G.tool_rows())
    flagged = {f"{f.family}/{f.probe}" for f in report.findings if SEVERITY_RANK[f.severity] >= 3}
    assert report.reward_kind == "trajectory"
    assert report.verdict == "fail"
    assert set(G.EXPLOITABLE_TRAJECTORY[fn]) <= flagged, flagged


@pytest.mark.parametrize("fn", G.SOUND_TEXT, ids=lambda f: f.__name__)
def test_sound_text_reward_passes_cleanly(fn):
    report = _audit(fn, G.math_rows())
    assert report.verdict == "pass", [(f.probe, f.examples[:1]) for f in report.findings]
    assert not [f for f in report.findings if SEVERITY_RANK[f.severity] >= SEVERITY_RANK["medium"]]
    assert report.baselines.reference_pass_rate == 1.0
    assert report.baselines.policies["do_nothing"].pass_rate == 0.0
    ran = [p for p in report.probes if p.status != "skipped"]
    assert len(ran) >= 40


def test_sound_trajectory_reward_passes():
    report = _audit(G.sound_trajectory, G.tool_rows())
    assert report.verdict == "pass", [(f.probe, f.examples[:1]) for f in report.findings]
    assert {p.probe for p in report.probes if p.family == "tools" and p.status == "clean"} >= {
        "noop", "read_spam", "failed_writes", "duplicate_writes", "writes_on_noop_task", "read_spam_credit",
        "give_up_over_attempt"}
    # the no-op base rate: 2 of the 7 tasks need no change, so doing nothing passes exactly those
    assert report.baselines.policies["do_nothing"].pass_rate == pytest.approx(2 / 7)


def test_report_json_has_the_contract_keys():
    report = _audit(G.containment, G.math_rows(12))
    data = report.model_dump(mode="json")
    assert data["verdict"] in ("pass", "fail")
    assert {"family", "probe", "severity", "fooled_rows", "examples"} <= set(data["findings"][0])
    assert "baselines" in data and "inspection" in data
    assert AuditReport.model_validate(data) == report


def test_examples_show_input_and_score_of_the_fooling_row():
    report = _audit(G.empty_passes, G.math_rows(12))
    f = next(f for f in report.findings if f.probe == "empty")
    assert f.fooled_rows == f.tested_rows == 12
    assert f.examples[0].input == "" and f.examples[0].score == 1.0


def test_crashing_reward_is_reported_not_silently_zero():
    def crashes_on_junk(completion, answer=None, **_):
        return float(int(G._last_tag(completion).strip()) == int(answer))

    report = _audit(crashes_on_junk, G.math_rows(10))
    crash = next(f for f in report.findings if f.probe == "crashes")
    assert crash.fooled_rows > 0 and "raised" in crash.message


def test_nan_scores_are_flagged():
    def nan_on_empty(completion, answer=None, **_):
        return float("nan") if not completion.strip() else float(G._last_tag(completion) == answer)

    report = _audit(nan_on_empty, G.math_rows(10))
    assert any(f.probe == "non_finite" and f.severity == "high" for f in report.findings)


def test_zero_weight_and_wrong_sign_components_are_flagged():
    def shaped_bad(completion, answer=None, **_):
        from schemas.rewards import RewardResult

        base = G.sound_strict_tag(completion, answer)
        c = float(bool(base.passed))
        length = min(len(completion) / 100, 1.0)
        fmt = 1.0 if "<answer>" in completion else 0.0
        # declared: correct +0.8, format +0.2, length 0 -- implemented: format subtracts, length adds
        return RewardResult(score=0.8 * c - 0.2 * fmt + 0.1 * length, passed=bool(base.passed),
                            components={"correct": c, "format": fmt, "length": length})

    shaped_bad.weights = {"correct": 0.8, "format": 0.2, "length": 0.0}
    report = _audit(shaped_bad, G.math_rows(20))
    flagged = {f.probe for f in report.findings}
    assert {"zero_weight_component", "component_sign"} <= flagged


def test_false_negatives_are_findings():
    def no_whitespace_tolerance(completion, answer=None, **_):
        if G._missing(answer):
            return 0.0
        m = G._TAG.findall(completion)
        return float(bool(m) and m[-1] == str(answer))  # " 42 " fails, "42.0" fails

    report = _audit(no_whitespace_tolerance, G.math_rows(10))
    probes = {f.probe: f for f in report.findings}
    assert probes["surrounding_whitespace"].severity == "medium"
    assert probes["number_format"].fooled_rows == 10
    assert report.verdict == "pass"  # false negatives are reported, they do not block


@pytest.mark.parametrize("value", [0.0, 1.0])
def test_a_constant_reward_is_reported_once_not_as_every_probe(value):
    report = _audit(lambda completion, answer=None, **_: value, G.math_rows(10))
    assert report.verdict == "fail"
    assert [f.probe for f in report.blocking] == ["reference_passes"]
    assert report.blocking[0].severity == "critical"


def test_word_answers_sound_pass_and_containment_is_caught():
    rows = G.capital_rows()
    for fn in (G.sound_strict_tag, G.sound_shaped):
        report = _audit(fn, rows)
        assert report.verdict == "pass" and not report.findings, [(f.probe, f.examples[0].input) for f in report.findings]
    flagged = {f.probe for f in _audit(G.containment, rows).blocking}
    assert {"enumerate_free_text", "hedging", "multiple_fields", "value_outside_field"} <= flagged
