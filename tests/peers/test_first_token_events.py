"""Streamed calls recorded by OpenInference's and OpenLLMetry's openai instrumentors: their first-token
events give the call's first-token split on every path into the store (protobuf, OTLP JSON lines through
the DuckDB reader, the SDK's writer)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path

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


@pytest.mark.parametrize("package", ["openinference", "openllmetry"])
def test_a_peer_below_agentscope_gets_the_body_timings_no_peer_reads(package):
    """A peer patched below agentscope (OpenInference's request wrapper; OpenLLMetry's ``create`` wrapper
    when it instrumented first) makes the call's span. Groq's timings and usage in ``x_groq``, which
    neither peer reads, still reach that span: for a call, a stream and an async stream."""
    from agentscope import attributes as A
    from agentscope.classify import classify

    script = Path(__file__).parent / "peer_below.py"
    ran = subprocess.run([sys.executable, str(script), package], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout.splitlines()[-1])
    llm = [span for span in result["spans"] if classify(span["attributes"]) == "llm"]
    assert len(llm) == 3 and result["patched"]
    scope = (openinference if package == "openinference" else openllmetry).__name__
    for how, span in zip(("call", "stream", "async stream"), llm, strict=True):
        assert span["scope"].startswith(scope), how
        a = span["attributes"]
        assert (a[A.SERVER_QUEUE_MS], a[A.SERVER_PREFILL_MS]) == (pytest.approx(10), pytest.approx(30)), how
        assert a[A.GEN_AI_USAGE_OUTPUT_TOKENS] == 8, how
        if how != "call":
            assert a[A.STREAM_CHUNKS] == result["chunks"] and a[A.GEN_AI_RESPONSE_TTFC] >= 0.035, how
