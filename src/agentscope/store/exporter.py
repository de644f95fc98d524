"""An OpenTelemetry span exporter that writes into a store.

It runs on the BatchSpanProcessor's worker thread, so the application never
waits on DuckDB.  The file is opened for each batch and closed after it, which
lets ``agentscope blame`` read the store while the application runs.  When the
file cannot be written (locked by another process, unwritable), the batch is
kept and retried with the next one, up to ``max_pending`` spans; the failure is
reported once through the ``agentscope`` logger.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from agentscope import attributes as A
from agentscope.classify import classify
from agentscope.sdk._safety import report
from agentscope.store.schema import rows_to_table
from agentscope.store.store import Store, StoreError

SPAN_KIND_NAMES = ("INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER")


def _json_value(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def attributes_json(attributes: Mapping[str, Any]) -> str:
    """The JSON text stored for a span's attributes, credentials removed."""
    return json.dumps(
        {key: _json_value(value) for key, value in attributes.items() if not A.is_sensitive(key)},
        default=str,
        separators=(",", ":"),
    )


def span_to_row(span: ReadableSpan) -> tuple:
    """One ``spans`` row for an OpenTelemetry SDK span."""
    attributes = dict(span.attributes or {})
    cpu_ns = attributes.pop(A.CPU_NS, None)
    thread_id = attributes.pop(A.THREAD_ID, None)
    span_kind = SPAN_KIND_NAMES[span.kind.value] if span.kind is not None else None
    parent = span.parent
    scope = span.instrumentation_scope
    return (
        format(span.context.trace_id, "032x"),
        format(span.context.span_id, "016x"),
        format(parent.span_id, "016x") if parent is not None else None,
        span.name,
        classify(attributes, span_kind),
        span_kind,
        span.start_time,
        span.end_time,
        span.status.status_code.name,
        span.status.description,
        span.resource.attributes.get(A.SERVICE_NAME) if span.resource is not None else None,
        scope.name if scope is not None else None,
        thread_id,
        cpu_ns,
        attributes_json(attributes),
    )


class StoreSpanExporter(SpanExporter):
    """Export finished spans into the DuckDB store at ``path``."""

    def __init__(self, path: str | Path, *, max_pending: int = 200_000) -> None:
        self.path = Path(path)
        self.max_pending = max_pending
        self.dropped = 0
        self._pending: list[tuple] = []
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            rows = [span_to_row(span) for span in spans]
        except Exception as exc:
            report("converting spans for the store", exc)
            return SpanExportResult.FAILURE
        with self._lock:
            self._pending.extend(rows)
            return self._flush()

    def _flush(self) -> SpanExportResult:
        if not self._pending:
            return SpanExportResult.SUCCESS
        try:
            with Store(self.path) as store:
                store.insert(rows_to_table(self._pending))
        except (StoreError, duckdb.Error, OSError) as exc:
            overflow = len(self._pending) - self.max_pending
            if overflow > 0:
                del self._pending[:overflow]
                self.dropped += overflow
            report(f"writing spans to the store {self.path}", exc, internal=False)
            return SpanExportResult.FAILURE
        self._pending.clear()
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        with self._lock:
            return self._flush() is SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        with self._lock:
            self._flush()
            if self._pending:
                report(
                    f"storing the last spans in {self.path}",
                    StoreError(f"{len(self._pending)} spans could not be stored at shutdown"),
                    internal=False,
                )
