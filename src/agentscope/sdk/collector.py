"""The OTLP/HTTP exporter to a collector, its failures said as agentscope's other exporters say theirs.

OpenTelemetry's exporter logs every failed attempt of every batch through its own logger: a collector
that is down puts four lines into the application's log at each export, and older releases raise the
connection error, which the batch processor logs with its traceback.  :class:`CollectorExporter`
counts the failures and logs the first one, through the ``agentscope`` logger (:func:`report`), as
the store's and the JSON lines' exporters do.  Only the records made inside its own exports are held
back: the application's own OTLP exporters log as they did.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from agentscope.sdk._safety import report

EXPORTER_LOGGER = "opentelemetry.exporter.otlp.proto.http.trace_exporter"
"""The logger OpenTelemetry's OTLP/HTTP span exporter (and, from 1.40, its HTTP client) writes to."""


class _HeldBack(logging.Filter):
    """Drops the records made on a thread that is inside one of our exports, keeping the first one's
    text there as the failure's reason (the first attempt's error; the last record only says that the
    retries ran out)."""

    def __init__(self) -> None:
        super().__init__()
        self.said: dict[int, str] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        said = self.said.get(record.thread)
        if said is None:
            return True
        if not said:
            self.said[record.thread] = record.getMessage()
        return False


class CollectorExporter(SpanExporter):
    """``exporter`` (OpenTelemetry's ``OTLPSpanExporter``) with its failures reported once, not logged
    at every attempt, and never raised."""

    def __init__(self, exporter: SpanExporter, endpoint: str) -> None:
        self._exporter = exporter
        self._where = f"exporting spans to {endpoint}"
        self._held_back = _HeldBack()
        logging.getLogger(EXPORTER_LOGGER).addFilter(self._held_back)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        thread = threading.get_ident()
        self._held_back.said[thread] = ""
        raised = ""
        try:
            result = self._exporter.export(spans)
        except Exception as exc:  # older releases (1.30 among them) raise a refused connection
            result, raised = SpanExportResult.FAILURE, f"{type(exc).__name__}: {exc}"
        finally:
            said = self._held_back.said.pop(thread)
        if result is not SpanExportResult.SUCCESS:
            reason = raised or said or "the exporter gave no reason"
            lost = ConnectionError(f"{len(spans)} span(s) not exported: {reason}")
            report(self._where, lost, internal=False)
        return result

    def shutdown(self) -> None:
        try:
            self._exporter.shutdown()
        finally:
            logging.getLogger(EXPORTER_LOGGER).removeFilter(self._held_back)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._exporter.force_flush(timeout_millis)
