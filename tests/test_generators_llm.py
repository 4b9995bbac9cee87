"""LLM columns: outputs re-validated, invalid rows retried then quarantined with the reason (never dropped),
on a real OpenAI-compatible HTTP server and on the embedded model."""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import polars as pl
import pytest

from generators.json_decoding import UnsupportedSchema, plan_schema
from generators.llm import LLMRunner, validate_output
from generators.writer import generate_dataset, read_quarantine, read_table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["title", "priority", "hours"],
          "properties": {"title": {"type": "string", "minLength": 3, "maxLength": 40},
                         "priority": {"type": "string", "enum": ["low", "high"]},
                         "hours": {"type": "integer", "minimum": 1, "maximum": 12}}}


SHORT = json.loads(json.dumps(SCHEMA))
SHORT["properties"]["title"]["maxLength"] = 16


def test_revalidation_catches_what_constrained_decoders_let_through():
    assert validate_output('{"title": "abc", "priority": "low", "hours": 3}', SCHEMA) == (
        {"title": "abc", "priority": "low", "hours": 3}, None)
    # outlines' default backend does not enforce integer maximum: caught here
    assert "hours: 99 is greater than the maximum of 12" in validate_output(
        '{"title": "abc", "priority": "low", "hours": 99}', SCHEMA)[1]
    assert validate_output('{"title": "ab', SCHEMA)[1].startswith("not JSON")
    assert "'urgent' is not one of" in validate_output('{"title": "abc", "priority": "urgent", "hours": 1}', SCHEMA)[1]


def test_jump_forward_subset():
    plans = plan_schema(SCHEMA)
    assert [p.kind for p in plans] == ["string", "choice", "choice"]
    assert plans[2].options == [str(i) for i in range(1, 13)]
    with pytest.raises(UnsupportedSchema):
        plan_schema({"type": "object", "properties": {"tags": {"type": "array"}}})
    with pytest.raises(UnsupportedSchema):
        plan_schema({"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]+$"}}})


class _Server:
    """A small OpenAI-compatible server: valid JSON for 'good' prompts, schema-breaking JSON for 'bad' ones."""

    def __init__(self):
        self.requests: list[dict] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                prompt = body["messages"][-1]["content"]
                if "bad" in prompt:
                    content = json.dumps({"title": "x", "priority": "urgent", "hours": 99})
                elif "broken" in prompt:
                    content = '{"title": "unterminated'
                else:
                    content = json.dumps({"title": f"fix {prompt[-12:]}", "priority": "high", "hours": 4})
                data = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = HTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()


def test_invalid_llm_rows_are_retried_then_quarantined(tmp_path):
    server = _Server()
    try:
        spec = {"seed": 1, "batch_size": 10, "tables": {"t": {"columns": [
            {"name": "kind", "kind": "category", "values": ["good", "bad", "broken"], "weights": [2, 1, 1]},
            {"name": "n", "kind": "sequence"},
            {"name": "ticket", "kind": "llm_structured", "prompt": "ticket {kind} number {n}", "max_retries": 2,
             "json_schema": SCHEMA, "backend": {"kind": "openai", "base_url": server.url, "model": "m"}},
            {"name": "summary", "kind": "llm_text", "prompt": "summarise {n}",
             "backend": {"kind": "openai", "base_url": server.url, "model": "m"}}]}}}
        runner = LLMRunner()
        m = generate_dataset(spec, 20, tmp_path / "o", llm=runner)
    finally:
        server.close()
    kept = read_table(tmp_path / "o", "t")
    q = read_quarantine(tmp_path / "o", "t")
    st = m["tables"]["t"]
    assert kept.height == 20 and (kept["kind"] == "good").all()
    assert q.height == st["quarantined"] > 0
    assert st["candidates"] == 20 + st["quarantined"] + st["surplus_dropped"]
    assert set(q["kind"].to_list()) <= {"bad", "broken"}
    for kind, reason in q.select("kind", "_quarantine_reason").iter_rows():
        assert reason.startswith("column ticket: invalid after 3 attempt(s): ")
        assert ("not JSON" in reason) if kind == "broken" else ("schema: " in reason)
    assert q["ticket"].is_null().all()  # the invalid value is not passed off as data
    for v in kept["ticket"].to_list():
        assert validate_output(v, SCHEMA)[1] is None
    structured = [r for r in server.requests if "response_format" in r]
    assert structured[0]["response_format"]["json_schema"]["schema"] == SCHEMA
    assert runner.stats["retries"] == 2 * q.height


def test_embedded_structured_column_is_valid(embedded, tmp_path):
    model, tok = embedded
    spec = {"seed": 3, "batch_size": 8, "tables": {"t": {"columns": [
        {"name": "product", "kind": "category", "values": ["billing page", "search box"]},
        {"name": "ticket", "kind": "llm_structured", "prompt": "Write a short task ticket for the {product}.",
         "json_schema": SHORT, "max_retries": 1}]}}}
    runner = LLMRunner(model=model, tokenizer=tok)
    m = generate_dataset(spec, 1, tmp_path / "e", llm=runner)
    df = read_table(tmp_path / "e", "t")
    assert df.height == 1 and m["tables"]["t"]["quarantined"] == 0
    for v in df["ticket"].to_list():
        obj, why = validate_output(v, SHORT)
        assert 3 <= len(obj["title"]) <= 16
        assert why is None and obj["priority"] in ("low", "high") and 1 <= obj["hours"] <= 12
    dec = runner._decoders["default"]
    assert dec.stats["forced_tokens"] > 0  # the schema's fixed text was fed, not decoded


def test_llm_text_column_on_the_embedded_model(embedded):
    model, tok = embedded
    runner = LLMRunner(model=model, tokenizer=tok)
    from schemas.dataset_spec import LLMTextColumn

    col = LLMTextColumn(name="a", prompt="Name one colour of {thing}.", max_new_tokens=8)
    values, reasons = runner.run_column(col, pl.DataFrame({"thing": ["the sky"]}))
    assert values[0] and reasons == [None]


@pytest.mark.slow
def test_embedded_rows_failing_pydantic_are_quarantined(embedded, tmp_path):
    model, tok = embedded
    spec = {"seed": 3, "batch_size": 8, "tables": {"t": {"columns": [
        {"name": "product", "kind": "category", "values": ["billing page"]},
        {"name": "ticket", "kind": "llm_structured", "prompt": "A ticket for the {product}.", "max_retries": 1,
         "model": "tests.generators_support.user_fns:Ticket"}]}}}
    m = generate_dataset(spec, 2, tmp_path / "p", llm=LLMRunner(model=model, tokenizer=tok))
    q = read_quarantine(tmp_path / "p", "t")
    assert m["tables"]["t"]["rows"] < 2 and q.height >= 1
    assert q["_quarantine_reason"].str.contains("marker ZZQ").all()


@pytest.mark.slow
def test_outlines_backend_for_schemas_outside_the_jump_forward_subset(embedded):
    model, tok = embedded
    from schemas.dataset_spec import LLMStructuredColumn

    schema = {"type": "object", "required": ["tags"], "additionalProperties": False,
              "properties": {"tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]},
                                      "minItems": 1, "maxItems": 2}}}
    runner = LLMRunner(model=model, tokenizer=tok)
    col = LLMStructuredColumn(name="t", prompt="Tags for {x}.", json_schema=schema, max_new_tokens=24, max_retries=1)
    values, reasons = runner.run_column(col, pl.DataFrame({"x": ["a ticket"]}))
    assert reasons == [None] and validate_output(values[0], schema)[1] is None
    assert runner._outlines  # the compiled outlines generator is kept for reuse
