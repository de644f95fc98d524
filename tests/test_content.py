"""Prompts, completions and query text are not stored unless asked, whoever recorded them (DESIGN §14).

Every content key of every instrumentation agentscope recognises is written into spans that reach the
store by each path: the SDK's writer (another package's spans on the same provider), ``ingest``
through DuckDB (OTLP JSON lines) and through the Python readers (OTLP protobuf, Jaeger), and
``serve``.  The secret text must be gone, and everything else kept; with ``capture_content`` /
``keep_content`` it stays.
"""

from __future__ import annotations

import json

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from test_serve import post, serving, stored
from traces_fixtures import otlp_request, otlp_span, s

from agentscope import attributes as A
from agentscope.ingest import ingest
from agentscope.ingest.receiver import PROTOBUF, Receiver
from agentscope.store import Store
from agentscope.store.rows import without_content
from agentscope.store.writer import StoreSpanProcessor

SECRET = "PURPLE-ELEPHANT-7731"
CONTENT = {
    **{key: f"{SECRET} in {key}" for key in sorted(A.CONTENT_KEYS)},
    **{f"{prefix}0.message.content": f"{SECRET} under {prefix}" for prefix in A.CONTENT_PREFIXES},
    # LiteLLM's raw request and response, under the provider's name
    **{f"llm.openai.{field}": f"{SECRET} as {field}" for field in ("messages", "choices", "input")},
    "llm.anthropic.system": f"{SECRET} as system",
    "llm.openai.messages.0.content": f"{SECRET} flattened",
}
KEPT = {
    "gen_ai.operation.name": "chat",
    "gen_ai.request.model": "gpt-oss-120b",
    "gen_ai.usage.input_tokens": 40,
    "llm.token_count.completion": 9,
    "llm.token_count.prompt": 40,
    "llm.cost.prompt": 0.0001,
    "llm.openai.model": "gpt-oss-120b",
    "input.mime_type": "application/json",
    "llm.invocation_parameters": '{"temperature": 0}',
}


def _stored(store: Store) -> list[dict]:
    return [json.loads(text) for (text,) in store.con.execute("SELECT attributes FROM spans").fetchall()]


def _check(rows: list[dict], keep: bool) -> None:
    assert rows
    text = json.dumps(rows)
    if keep:
        assert all(all(key in row for key in CONTENT) for row in rows)
        return
    assert SECRET not in text
    for row in rows:
        assert set(KEPT) <= set(row)
        assert row["gen_ai.usage.output_tokens"] == 9  # the alias a dropped key never carried


def test_every_content_key_is_recognised_and_nothing_else():
    assert all(A.is_content(key) for key in CONTENT)
    assert not any(A.is_content(key) for key in KEPT)
    row = ("t", "s", None, "chat", "llm", None, 1, 2, "OK", None, None, None, None, None, json.dumps(KEPT))
    assert without_content(row) is row  # searched, not decoded
    for key in CONTENT:  # each key alone is found in the JSON text
        alone = (*row[:-1], json.dumps({**KEPT, key: SECRET}))
        assert json.loads(without_content(alone)[-1]) == KEPT


def _provider_spans() -> list:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("openinference.instrumentation.openai").start_as_current_span(
        "ChatCompletion", attributes={**CONTENT, **KEPT}
    ):
        pass
    return exporter.get_finished_spans()


@pytest.mark.parametrize("keep", [False, True], ids=["dropped", "kept"])
def test_the_sdk_writer_drops_other_instrumentations_content(keep, tmp_path):
    writer = StoreSpanProcessor(tmp_path / "sdk.duckdb", keep_content=keep)
    provider = TracerProvider()
    provider.add_span_processor(writer)
    with provider.get_tracer("openinference.instrumentation.openai").start_as_current_span(
        "ChatCompletion", attributes={**CONTENT, **KEPT}
    ):
        pass
    provider.shutdown()
    with Store(tmp_path / "sdk.duckdb", read_only=True) as store:
        _check(_stored(store), keep)


def _files(tmp_path):
    span = otlp_span(
        "a" * 32, "b" * 16, None, "ChatCompletion", 0, 5, [s(k, str(v)) for k, v in CONTENT.items()]
    )
    span["attributes"] += [s(k, v) if isinstance(v, str) else {"key": k, "value": {"intValue": v}}
                           for k, v in KEPT.items()]  # fmt: skip
    lines = tmp_path / "lines.jsonl"
    lines.write_text(json.dumps(otlp_request([span])) + "\n")
    proto = tmp_path / "trace.pb"
    proto.write_bytes(encode_spans(_provider_spans()).SerializeToString())
    return {"otlp-json-lines": lines, "otlp-proto": proto}


@pytest.mark.parametrize("keep", [False, True], ids=["dropped", "kept"])
@pytest.mark.parametrize("fmt", ["otlp-json-lines", "otlp-proto"])
def test_ingest_drops_content_unless_kept(fmt, keep, tmp_path):
    path = _files(tmp_path)[fmt]
    with Store(None) as store:
        summary = ingest(store, [path], keep_content=keep)
        assert summary.ok and dict(summary.formats) == {fmt: 1}
        _check(_stored(store), keep)
        (kind,) = store.con.execute("SELECT kind FROM spans").fetchone()
    assert kind == "llm"  # the kind is judged on every key, content ones too


@pytest.mark.parametrize("keep", [False, True], ids=["dropped", "kept"])
def test_serve_drops_content_unless_kept(keep, tmp_path):
    with serving(Receiver(tmp_path / "served.duckdb", keep_content=keep)) as receiver:
        status, _ = post(receiver.url, encode_spans(_provider_spans()).SerializeToString(), PROTOBUF)
        assert status == 200
        _check(stored_attributes(receiver), keep)


def stored_attributes(receiver: Receiver) -> list[dict]:
    return [json.loads(text) for (text,) in stored(receiver, "SELECT attributes FROM spans")]
