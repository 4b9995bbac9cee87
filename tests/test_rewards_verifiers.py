"""Each built-in verifier on true positives and true negatives, including equivalent forms."""

from __future__ import annotations

import json

import pytest

from rewards import load_reward, score_batch
from rewards.extraction import Extraction, extract
from rewards.normalization import TextNormalization, parse_number
from rewards.verifiers import (CodeTests, ExactMatch, JsonSchemaMatch, LLMJudge, NumericMatch, PydanticMatch,
                               RegexMatch, ToolCallMatch)
from schemas import ToolCall


def A(x: str) -> str:
    return f"Reasoning first.\n<answer>{x}</answer>"


# ---------------------------------------------------------------- extraction


def test_extraction_is_strict_by_default():
    assert extract("the answer is 4", Extraction()) == (None, "no <answer>...</answer> tag found")
    assert extract("<answer>3</answer> no wait <answer>4</answer>", Extraction())[0] == "4"
    assert extract("<answer>3</answer><answer>4</answer>", Extraction(occurrence="only"))[0] is None
    assert extract(r"so \boxed{\frac{1}{2}}", Extraction(method="boxed"))[0] == r"\frac{1}{2}"
    assert extract("a\n\nb\n", Extraction(method="last_line"))[0] == "b"
    assert extract("x\n```python\nprint(1)\n```\n", Extraction(method="code_fence", language="python"))[0] == "print(1)\n"
    assert extract("answer: 42.", Extraction(method="regex", pattern=r"answer: (\d+)"))[0] == "42"
    assert extract(["not text"], Extraction())[0] is None


# ---------------------------------------------------------------- exact


@pytest.mark.parametrize("completion", [A("Paris"), A("  Paris \n"), A("Paris"), "<answer>Paris</answer>"])
def test_exact_true_positives_with_whitespace(completion):
    assert ExactMatch()(completion, answer="Paris").passed is True


@pytest.mark.parametrize("completion", [A("London"), A("paris"), "Paris", A("Paris, France"), A("")])
def test_exact_true_negatives(completion):
    res = ExactMatch()(completion, answer="Paris")
    assert res.passed is False and res.score == 0.0


def test_exact_normalisation_options_are_explicit():
    loose = ExactMatch(normalization=TextNormalization(casefold=True, strip_punctuation=True, remove_articles=True))
    assert loose(A("the PARIS."), answer="Paris").passed is True
    assert ExactMatch()(A("the PARIS."), answer="Paris").passed is False
    assert ExactMatch()(A("ﬁne"), answer="fine").passed is True  # NFKC ligature
    assert ExactMatch()(A("４２"), answer="42").passed is True  # full-width digits fold
    assert ExactMatch()(A("4²"), answer="42").passed is False  # but 4 squared is not 42
    assert ExactMatch()(A("b"), answer=["a", "b"]).passed is True  # any of several references
    assert ExactMatch(extraction=Extraction(method="whole"))("Paris", answer="Paris").passed is True


def test_missing_reference_is_an_error_not_a_zero():
    (res,) = score_batch(ExactMatch(), [A("x")], [{"id": "r1"}])
    assert res.score is None and "needs the row field 'answer'" in res.reason


# ---------------------------------------------------------------- numeric


@pytest.mark.parametrize("got, want", [
    ("42", "42"), (" 42 ", "42"), ("42.0", "42"), ("42.000", "42"), ("+42", "42"), ("4.2e1", "42"),
    ("1,234,567", "1234567"), ("1234567", "1,234,567"), ("$1,000", "1000"), ("0.5", "1/2"), ("1/2", "0.5"),
    (r"\frac{1}{2}", "0.5"), ("−3", "-3"), ("-3.50", "-3.5"), ("50%", "50"), (".5", "0.5"), ("４２", "42"),
])
def test_numeric_true_positives_in_equivalent_formats(got, want):
    res = NumericMatch()(A(got), answer=want)
    assert res.passed is True, res.reason


@pytest.mark.parametrize("got, want", [
    ("43", "42"), ("42.0001", "42"), ("1,23", "123"), ("42 apples", "42"), ("forty-two", "42"), ("", "42"),
    ("0.3333", "1/3"), ("1e999999", "1"), ("4 2", "42"), ("4²", "42"), ("100⁰", "1000"), ("½", "0.5"),
    ("1₀", "10"),
])
def test_numeric_true_negatives(got, want):
    res = NumericMatch()(A(got), answer=want)
    assert res.passed is False


def test_numeric_default_is_exact_and_tolerance_is_explicit():
    assert NumericMatch()(A("3.14159"), answer="3.1416").passed is False
    assert NumericMatch(abs_tol=1e-3)(A("3.14159"), answer="3.1416").passed is True
    assert NumericMatch(rel_tol=0.01)(A("101"), answer="100").passed is True
    assert NumericMatch(rel_tol=0.01)(A("102"), answer="100").passed is False
    assert NumericMatch(percent="fraction")(A("50%"), answer="0.5").passed is True
    assert NumericMatch()(A("0.1"), answer="0.1").components["abs_error"] == 0.0
    assert NumericMatch()("42", answer="42").passed is False  # no tag: strict
    assert parse_number("1" * 500) is None


def test_numeric_bad_reference_is_an_error():
    (res,) = score_batch(NumericMatch(), [A("1")], [{"answer": "n/a"}])
    assert res.is_error and "not a number" in res.reason


# ---------------------------------------------------------------- regex


def test_regex_match():
    date = RegexMatch(pattern=r"\d{4}-\d{2}-\d{2}")
    assert date(A(" 2026-12-02 "), answer="").passed is True
    assert date(A("2026-12-02 at noon"), answer="").passed is False  # full match by default
    assert RegexMatch(pattern=r"\d{4}", full=False)(A("in 2026"), answer="").passed is True
    assert RegexMatch(pattern=r"yes", flags=("IGNORECASE",))(A("YES")).passed is True
    assert RegexMatch(pattern_field="pattern")(A("abc"), pattern="a.c").passed is True
    assert RegexMatch(pattern_field="pattern")(A("abd"), pattern="a.c").passed is False
    with pytest.raises(ValueError, match="unknown regex flags"):
        RegexMatch(pattern="x", flags=("IGNORE",))
    with pytest.raises(ValueError):
        RegexMatch()


# ---------------------------------------------------------------- structured


SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
          "required": ["name", "age"], "additionalProperties": False}


@pytest.mark.parametrize("text", ['{"name": "Ada", "age": 36}', ' {"age":36,"name":"Ada"}\n',
                                  '{\n  "name": "Ada",\n  "age": 36\n}'])
def test_json_schema_true_positives(text):
    assert JsonSchemaMatch(SCHEMA)(text).passed is True


@pytest.mark.parametrize("text, why", [
    ('{"name": "Ada"}', "schema"), ('{"name": "Ada", "age": -1}', "schema"), ('{"name": "Ada", "age": "36"}', "schema"),
    ('{"name": "Ada", "age": 36, "x": 1}', "schema"), ('{"name": "Ada", "age": 36} thanks', "format"),
    ("name: Ada", "format"), ('```json\n{"name": "Ada", "age": 36}\n```', "format"),
])
def test_json_schema_true_negatives(text, why):
    res = JsonSchemaMatch(SCHEMA)(text)
    assert res.passed is False and res.reason.startswith(why)


def test_json_schema_from_row_and_reference():
    v = JsonSchemaMatch(schema_field="schema", reference_field="answer",
                        extraction=Extraction(method="code_fence", language="json"))
    ok = '```json\n{"name": "Ada", "age": 36}\n```'
    assert v(ok, schema=json.dumps(SCHEMA), answer={"age": 36, "name": "Ada"}).passed is True
    assert v(ok, schema=SCHEMA, answer={"age": 37, "name": "Ada"}).passed is False
    with pytest.raises(Exception):
        JsonSchemaMatch({"type": "no-such-type"})


def test_pydantic_validity():
    v = PydanticMatch(ToolCall)
    assert v.model == "schemas.messages:ToolCall"
    assert v('{"name": "email_send", "arguments": {"to": "a"}}').passed is True
    assert v('{"name": "", "arguments": {}}').passed is False
    assert v('{"name": "x", "args": {}}').passed is False
    assert PydanticMatch("schemas.messages:ToolCall", strict=True)('{"name": "x", "arguments": []}').passed is False


# ---------------------------------------------------------------- tool calls

TOOLS = [
    {"type": "function", "function": {"name": "email_send", "parameters": {
        "type": "object", "required": ["to", "subject"],
        "properties": {"to": {"type": "string"}, "subject": {"type": "string"}, "priority": {"type": "integer"},
                       "cc": {"type": "array", "items": {"type": "string"}, "default": []},
                       "urgency": {"type": "string", "enum": ["low", "high"]}}}}},
    {"type": "function", "function": {"name": "calendar_create", "parameters": {
        "type": "object", "required": ["title"], "properties": {"title": {"type": "string"},
                                                                "hours": {"type": "number"}}}}},
]
GT = [{"name": "email_send", "arguments": {"to": "ada@corp.com", "subject": "Budget", "priority": 2}},
      {"name": "calendar_create", "arguments": {"title": "Review", "hours": 1.5}}]


def calls(*cs):
    return "\n".join(f"<tool_call>{json.dumps({'name': n, 'arguments': a})}</tool_call>" for n, a in cs)


SEND = ("email_send", {"to": "ada@corp.com", "subject": "Budget", "priority": 2})
CAL = ("calendar_create", {"title": "Review", "hours": 1.5})


@pytest.mark.parametrize("completion", [
    calls(SEND, CAL),
    calls(CAL, SEND),  # reordered parallel calls
    calls(("email_send", {"subject": "Budget", "to": "ADA@corp.com ", "priority": 2}), CAL),  # case/space, key order
    calls(SEND, ("calendar_create", {"title": "Review", "hours": 1.50})),
    calls(("email_send", {**SEND[1], "cc": []}), CAL),  # optional argument at its default
    [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "calendar_create", "arguments": json.dumps(CAL[1])}},
        {"id": "2", "type": "function", "function": {"name": "email_send", "arguments": json.dumps(SEND[1])}}]}],
    [ToolCall(name=SEND[0], arguments=SEND[1]), ToolCall(name=CAL[0], arguments=CAL[1])],
])
def test_tool_calls_true_positives(completion):
    res = ToolCallMatch()(completion, ground_truth_calls=GT, tools=TOOLS)
    assert res.passed is True, res.reason
    assert res.components["calls_matched"] == 1.0


@pytest.mark.parametrize("completion, fragment", [
    (calls(SEND), "calendar_create(title=\"Review\", hours=1.5) was not made"),
    (calls(SEND, CAL, CAL), "unexpected extra call"),
    (calls(("email_send", {**SEND[1], "to": "bob@corp.com"}), CAL), "argument 'to'"),
    (calls(("email_send", {"to": "ada@corp.com", "priority": 2}), CAL), "required argument 'subject'"),
    (calls(("email_send", {**SEND[1], "priority": "2"}), CAL), "expected integer"),
    (calls(("email_send", {**SEND[1], "bcc": "x"}), CAL), "unexpected argument 'bcc'"),
    (calls(("email_send", {**SEND[1], "urgency": "medium"}), CAL), "allowed values"),
    (calls(("email_send", {**SEND[1], "urgency": "high"}), CAL), "unexpected argument 'urgency'"),
    (calls(("email_sned", SEND[1]), CAL), "does not exist"),
    ('<tool_call>{"name": "email_send", "arguments": {</tool_call>', "format"),
    ('{"name": "email_send", "arguments": {}}', "format"),
    ("I sent the email.", "was not made"),
])
def test_tool_calls_true_negatives(completion, fragment):
    res = ToolCallMatch()(completion, ground_truth_calls=GT, tools=TOOLS)
    assert res.passed is False and fragment in res.reason, res.reason


def test_tool_calls_order_any_of_and_partial_credit():
    strict = ToolCallMatch(order="strict")
    assert strict(calls(SEND, CAL), ground_truth_calls=GT, tools=TOOLS).passed is True
    res = strict(calls(CAL, SEND), ground_truth_calls=GT, tools=TOOLS)
    assert res.passed is False and "order" in res.reason
    gt = [{"name": "email_send", "arguments": {"to": {"$any_of": ["ada@corp.com", "ada.l@corp.com"]},
                                               "subject": "Budget"}}]
    assert ToolCallMatch()(calls(("email_send", {"to": "ada.l@corp.com", "subject": "Budget"})),
                           ground_truth_calls=gt).passed is True
    half = ToolCallMatch()(calls(("email_send", {**SEND[1], "to": "bob@corp.com"})), ground_truth_calls=GT, tools=TOOLS)
    assert half.components["name_recall"] == 0.5 and 0 < half.components["args_partial"] < 0.5
    assert half.components["calls_matched"] == 0.0
    # no-op task: no ground-truth calls, no calls made
    assert ToolCallMatch()("Nothing to do.", ground_truth_calls=[]).passed is True
    assert ToolCallMatch()(calls(SEND), ground_truth_calls=[]).passed is False
    # case sensitivity is an explicit option
    exact_case = ToolCallMatch(string_normalization=TextNormalization())
    assert exact_case(calls(("calendar_create", {"title": "review", "hours": 1.5})),
                      ground_truth_calls=GT[1:]).passed is False


# ---------------------------------------------------------------- code


def test_code_tests_pass_fail_and_isolation():
    v = CodeTests(timeout_s=2)
    tests = ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"]
    good = "Here:\n```python\ndef add(a, b):\n    return a + b\n```"
    half = "```python\ndef add(a, b):\n    return 3\n```"
    cheat = "```python\nimport os\nprint('x 0 pass')\nos._exit(0)\n```"
    spin = "```python\nwhile True:\n    pass\n```"
    res = score_batch(v, [good, half, cheat, spin, "def add(a, b): return a + b"], [{"tests": tests}] * 5)
    assert [r.passed for r in res] == [True, False, False, False, False]
    assert res[1].components["tests_passed"] == 0.5
    assert "ended early" in res[2].reason and "limit" in res[3].reason and res[4].reason.startswith("format")


def test_code_under_test_writes_only_in_its_folder_and_starts_no_process(tmp_path):
    v = CodeTests(timeout_s=5)
    tests = ["assert add(1, 2) == 3"]
    target = tmp_path / "dataset.parquet"
    target.write_text("rows")
    fence = "```python\n{}\ndef add(a, b):\n    return a + b\n```".format
    vandal = fence(f"open({str(target)!r}, 'w').write('gone')")
    spawns = fence("import subprocess\nsubprocess.run(['true'])")
    scratch = fence("open('scratch.txt', 'w').write('ok')")
    res = score_batch(v, [vandal, spawns, scratch], [{"tests": tests}] * 3)
    assert [r.passed for r in res] == [False, False, True], res
    assert "Permission denied" in res[0].reason and target.read_text() == "rows"
    assert "starting processes is disabled" in res[1].reason


# ---------------------------------------------------------------- judge


def test_llm_judge_with_injected_model_and_no_verdict_is_an_error():
    seen = []

    def fake_generate(messages):
        seen.append(messages)
        return "YES" if "<answer>4</answer>" in messages[-1]["content"] else "Maybe"

    judge = LLMJudge(generate=fake_generate)
    (ok, unsure) = score_batch(judge, ["<answer>4</answer>", "five"], [{"answer": "4", "prompt": "2+2?"}] * 2)
    assert ok.passed is True and "2+2?" in seen[0][-1]["content"]
    assert unsure.is_error and "no verdict" in unsure.reason


@pytest.mark.slow
def test_llm_judge_on_the_embedded_model():
    """The default judge reads P(YES) vs P(NO) from the embedded model's logits: always a verdict."""
    res = score_batch(LLMJudge(), ["<answer>4</answer>", "<answer>17</answer>"],
                      [{"answer": "4", "prompt": "What is 2+2?"}] * 2)
    for r in res:
        assert not r.is_error and r.passed in (True, False), r
        assert 0.0 < r.components["judge_p_yes"] < 1.0 and r.reason.startswith("judge P(YES)")
    assert res[0].components["judge_p_yes"] != res[1].components["judge_p_yes"]  # it reads the candidate


# ---------------------------------------------------------------- registry of built-ins


def test_builtins_are_registered_by_name():
    r = load_reward("numeric_match")
    assert r.trusted and r.version.label == "builtin"
    assert r(A("1,000"), answer="1000").passed is True
    assert load_reward("tool_call_match")(calls(SEND, CAL), ground_truth_calls=GT, tools=TOOLS).passed is True


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=150, deadline=None)
@given(text=st.one_of(st.text(max_size=200), st.builds(lambda s: f"<answer>{s}</answer>", st.text(max_size=40)),
                      st.builds(lambda s: f"<tool_call>{s}</tool_call>", st.text(max_size=60))))
def test_verifiers_never_crash_on_arbitrary_text(text):
    """Whatever a policy writes, a built-in verifier returns a verdict (0 or 1), never an exception."""
    for v, row in ((ExactMatch(), {"answer": "42"}), (NumericMatch(), {"answer": "42"}),
                   (RegexMatch(pattern=r"\d+"), {}), (JsonSchemaMatch(SCHEMA), {}),
                   (ToolCallMatch(), {"ground_truth_calls": GT, "tools": TOOLS})):
        res = v(text, **row)
        assert res.score in (0.0, 1.0) and res.passed is (res.score == 1.0)
