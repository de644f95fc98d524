"""Fixtures for the peer accuracy suite: simulated providers, and an OTel SDK pipeline per peer.

The suite needs the ``peers`` extra (``pip install -e '.[test,peers]'``). Without it
each module is skipped, except where ``AGENTSCOPE_REQUIRE_PEERS=1`` (CI) makes a
missing peer a failure.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import Providers
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@pytest.fixture(scope="session")
def providers() -> Iterator[Providers]:
    running = Providers()
    yield running
    running.stop()


class OTelPipeline:
    """A real OTel SDK tracer provider whose spans are written as an OTLP protobuf file."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def export(self, folder: Path) -> Path:
        path = folder / "peer-trace.pb"
        path.write_bytes(encode_spans(self.exporter.get_finished_spans()).SerializeToString())
        return path


@pytest.fixture
def otel() -> Iterator[OTelPipeline]:
    pipeline = OTelPipeline()
    yield pipeline
    pipeline.provider.shutdown()
