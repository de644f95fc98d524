"""Shared fixtures: every test sees agentscope's spans in memory, and internal errors raise."""

from __future__ import annotations

import os

os.environ["AGENTSCOPE_STRICT"] = "1"

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import agentscope as ags
from agentscope.classify import classify


class Captured:
    """The spans agentscope finished during a test."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()

    @property
    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def one(self, name: str) -> ReadableSpan:
        found = [s for s in self.spans if s.name == name]
        assert len(found) == 1, f"expected one span {name!r}, got {[s.name for s in self.spans]}"
        return found[0]

    @staticmethod
    def kind(span: ReadableSpan) -> str:
        """The agentscope kind the store will give this span."""
        return classify(span.attributes, span.kind.name, span.name)

    def names(self) -> list[str]:
        return [s.name for s in self.spans]


@pytest.fixture
def captured() -> Captured:
    capture = Captured()
    ags.init(store=None, instrument=False, span_processors=[SimpleSpanProcessor(capture.exporter)])
    yield capture
    ags.shutdown()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the peer accuracy suite after the rest, and last the peers that patch SDKs for good.

    Peer instrumentors wrap the openai SDK process-wide (and ``langfuse.openai`` does so
    on import, with no way back), which would change what agentscope's own integration
    tests see if they ran afterwards.
    """
    items.sort(
        key=lambda item: ("peers" in item.path.parts, item.get_closest_marker("patches_for_good") is not None)
    )
