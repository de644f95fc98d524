"""Traces from peers' real instrumentation: OpenInference's openai instrumentor, through real exporters."""

from __future__ import annotations

import json

import openai
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentscope.analysis.pipeline import blame_store
from agentscope.ingest import ingest
from agentscope.sim import Profile, serve
from agentscope.store import Store

openinference = pytest.importorskip("openinference.instrumentation.openai")


@pytest.fixture
def openinference_spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = openinference.OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with serve(Profile(queue_ms=5, prefill_ms=20, tokens_per_s=1000, output_tokens=12)) as base_url:
            client = openai.OpenAI(base_url=base_url, api_key="sim-key")
            tracer = provider.get_tracer("app")
            for _ in range(3):
                with tracer.start_as_current_span("answer", attributes={"openinference.span.kind": "AGENT"}):
                    client.chat.completions.create(
                        model="gpt-oss-120b", messages=[{"role": "user", "content": "where is my refund"}]
                    )
    finally:
        instrumentor.uninstrument()
    return exporter.get_finished_spans()


def test_openinference_llm_spans_are_classified_with_model_and_tokens(openinference_spans, tmp_path):
    path = tmp_path / "openinference.pb"
    path.write_bytes(encode_spans(openinference_spans).SerializeToString())
    with Store(None) as store:
        summary = ingest(store, [path])
        assert summary.ok and summary.tasks == 3
        rows = store.con.execute(
            "SELECT kind, attributes FROM spans WHERE kind = 'llm' ORDER BY start_ns"
        ).fetchall()
        assert len(rows) == 3
        for _, text in rows:
            attributes = json.loads(text)
            assert attributes["gen_ai.request.model"] == "gpt-oss-120b"
            assert attributes["gen_ai.usage.input_tokens"] > 0
            assert attributes["gen_ai.usage.output_tokens"] == 12
            assert "sim-key" not in text
        report = blame_store(store)
    assert report["tasks"]["count"] == 3
    assert report["operations"][0]["category"] == "inference"
