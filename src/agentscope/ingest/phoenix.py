"""Arize Phoenix's spans, as its REST API pages them (``{"data": [...], "next_cursor": ...}``), a JSON array
of them (the ``phoenix-client``'s ``spans.get_spans()``, saved), or JSON lines.

Phoenix answers in two shapes, and both are read:

- ``GET /v1/projects/<project>/spans``: a span has ``context`` (``trace_id``, ``span_id``), ``parent_id``,
  ``name``, ``span_kind`` (OpenInference's kind, taken out of the attributes), ISO ``start_time`` and
  ``end_time`` (to the microsecond, as Phoenix stores them), ``status_code``, ``status_message``, the
  attributes as one flat object and ``events`` with ISO ``timestamp``\\ s.
- ``GET /v1/projects/<project>/spans/otlpv1``: an OTLP span with protobuf's field names
  (``start_time_unix_nano``), every unset field written as ``null``, without its resource or scope.

Neither carries the resource, so spans have no service; nor the span's OpenTelemetry kind, so a span is
INTERNAL.  The OpenInference kind is put back as ``openinference.span.kind``, and the kind tables decide
(``agentscope.classify``); the content keys are dropped at the store as for any OpenInference span.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any

from agentscope.classify import FIRST_TOKEN_EVENTS, OPENINFERENCE_KIND, first_token_ns
from agentscope.ingest import otlp
from agentscope.ingest.records import BadSpan, Record, record
from agentscope.ingest.runs import dig, first_line, iso_ns, read_export

OTLP_SPAN_KEYS = frozenset({"trace_id", "span_id", "start_time_unix_nano"})
"""The keys that tell an ``otlpv1`` span (the sniffer's test too)."""
SPAN_KEYS = frozenset({"context", "span_kind", "start_time"})
"""The keys that tell a span of Phoenix's own shape."""


def span_record(span: Any, position: int) -> Record:
    """One span of either shape as a row (or a problem naming what is wrong with it)."""
    if isinstance(span, dict) and span.keys() >= OTLP_SPAN_KEYS:
        return otlp.json_span(otlp.camel_case_keys(span), position, None, None, check_sizes=True)
    try:
        if not isinstance(span, dict):
            raise BadSpan("span is not an object")
        attributes = span.get("attributes") or {}
        if not isinstance(attributes, dict):
            raise BadSpan("attributes are not an object")
        attributes = dict(attributes)
        kind = span.get("span_kind")
        if isinstance(kind, str) and kind not in ("", "UNKNOWN"):
            attributes[OPENINFERENCE_KIND] = kind
        start = iso_ns(span.get("start_time"), "start_time")
        end = iso_ns(span.get("end_time"), "end_time")
        marks = [
            (event["name"], iso_ns(event.get("timestamp"), f"event {event['name']!r} timestamp"))
            for event in span.get("events") or []
            if isinstance(event, dict) and event.get("name") in FIRST_TOKEN_EVENTS
        ]
    except BadSpan as exc:
        return Record(position, problem=str(exc))
    status = str(span.get("status_code") or "UNSET").upper()
    return record(
        position,
        trace_id=dig(span, "context", "trace_id"),
        span_id=dig(span, "context", "span_id"),
        parent_id=span.get("parent_id"),
        name=span.get("name"),
        span_kind="INTERNAL",
        start_ns=start,
        end_ns=end,
        status=status if status in ("OK", "ERROR") else "UNSET",
        status_message=first_line(span.get("status_message")),
        service=None,
        scope=None,
        attributes=attributes,
        first_token_at=first_token_ns(marks),
    )


def read(stream: IO[bytes]) -> Iterator[Record]:
    """Every span of a Phoenix export."""
    return read_export(stream, "data", span_record, "Phoenix export")
