"""Streamed calls recorded by OpenInference's and OpenLLMetry's openai instrumentors: their first-token
events give the call's first-token split on every path into the store (protobuf, OTLP JSON lines through
the DuckDB reader, the SDK's writer)."""

from __future__ import annotations

import contextlib
import json

import openai
import pytest
from harness import otlp_json_line, require
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentscope.ingest import ingest, otlp_duckdb
from agentscope.sim import Profile, serve
from agentscope.store import Store

openinference = require("openinference.instrumentation.openai")
openllmetry = require("opentelemetry.instrumentation.openai")

pytestmark = pytest.mark.patches_for_good  # OpenLLMetry's uninstrument leaves the openai SDK changed


def _streamed_spans(instrumentor) -> list:
    """Spans of two streamed chat calls made through the real openai SDK with ``instrumentor`` on."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor.instrument(tracer_provider=provider)
    try:
        with serve(Profile(queue_ms=5, prefill_ms=40, tokens_per_s=400, output_tokens=20)) as base_url:
            client = openai.OpenAI(base_url=base_url, api_key="sim-key")
            for _ in range(2):
                stream = client.chat.completions.create(
                    model="gpt-oss-120b", messages=[{"role": "user", "content": "hi"}], stream=True
                )
                for _chunk in stream:
                    pass
    finally:
        instrumentor.uninstrument()
    return [span for span in exporter.get_finished_spans() if span.events]


def _instrumentor(package: str):
    module = openinference if package == "openinference" else openllmetry
    return module.OpenAIInstrumentor()


@pytest.mark.parametrize("package", ["openinference", "openllmetry"])
@pytest.mark.parametrize("path", ["protobuf", "json-lines", "sdk-writer"])
def test_first_token_events_of_streamed_calls_give_the_split(package, path, tmp_path):
    from agentscope.store.schema import rows_to_table
    from agentscope.store.writer import snapshot, snapshot_to_row

    spans = _streamed_spans(_instrumentor(package))
    assert len(spans) == 2
    with Store(None) as store:
        if path == "sdk-writer":
            store.insert(rows_to_table([snapshot_to_row(snapshot(span)) for span in spans]))
        else:
            file = tmp_path / ("spans.pb" if path == "protobuf" else "spans.jsonl")
            if path == "protobuf":
                file.write_bytes(encode_spans(spans).SerializeToString())
            else:
                file.write_text(otlp_json_line(spans) + "\n")
            assert ingest(store, [file]).ok
            if path == "json-lines":  # the DuckDB reader takes the line itself, events and all
                with contextlib.closing(otlp_duckdb.connect_parser()) as con:
                    (parsed,) = otlp_duckdb.parse_blocks(con, [(1, [file.read_bytes()])])
                assert parsed.routed == [] and parsed.table.num_rows == 2
        rows = store.con.execute(
            "SELECT start_ns, end_ns, attributes FROM spans ORDER BY start_ns"
        ).fetchall()
    assert len(rows) == 2
    for span, (start, end, text) in zip(spans, rows, strict=True):
        first = min(event.timestamp for event in span.events)
        ttft = json.loads(text)["gen_ai.response.time_to_first_chunk"]
        assert ttft == pytest.approx((first - start) / 1e9)
        assert (
            0.045 <= ttft < (end - start) / 1e9
        )  # the provider's queue and prefill, before the stream ended
