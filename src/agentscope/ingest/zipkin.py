"""Zipkin v2 JSON: an array of spans, times and durations in microseconds.

Tags (all strings) become attributes; ``localEndpoint.serviceName`` is the
service; the remote endpoint fills ``server.address`` for client spans; an
``error`` tag marks the span as failed.

A server span marked ``shared`` (Brave's default, B3 "join": the server
reports under the client's span id) gets an id of its own, derived from the
shared one, and the client span as its parent, as Jaeger's span-id deduper
does; its own children, recorded under the shared id, sit beside it under the
client span, where the analysis's enclosed-sibling rule (DESIGN §5.1) moves
them under it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import IO, Any

from agentscope import attributes as A
from agentscope.ingest.jsonstream import JSONStreamError, iter_array
from agentscope.ingest.records import BadSpan, Record, as_int, record

SHARED_ID = "zipkin.shared_span_id"
"""The span id a ``shared`` server span was reported under (its client's), kept beside its own."""


def _own_id(shared: str) -> str:
    """The id a shared server span is stored under: the same on every read of the same span."""
    return hashlib.md5(f"zipkin-shared:{shared.lower()}".encode()).hexdigest()[:16]


def span_record(span: Any, index: int) -> Record:
    try:
        if not isinstance(span, dict):
            raise BadSpan("span is not an object")
        tags = span.get("tags") or {}
        if not isinstance(tags, dict):
            raise BadSpan("tags are not an object")
        attributes = dict(tags)
        start_us = as_int(span.get("timestamp"), "timestamp")
        duration_us = as_int(span.get("duration", 0), "duration")
    except BadSpan as exc:
        return Record(index, problem=str(exc))
    remote = span.get("remoteEndpoint") or {}
    if isinstance(remote, dict) and remote.get("serviceName") and A.SERVER_ADDRESS not in attributes:
        attributes[A.SERVER_ADDRESS] = remote["serviceName"]
    error = "error" in attributes
    span_id, parent_id = span.get("id"), span.get("parentId")
    if span.get("shared") is True and isinstance(span_id, str):
        attributes[SHARED_ID] = span_id
        span_id, parent_id = _own_id(span_id), span_id
    return record(
        index,
        trace_id=span.get("traceId"),
        span_id=span_id,
        parent_id=parent_id,
        name=span.get("name") or "",
        span_kind=str(span.get("kind") or "INTERNAL").upper(),
        start_ns=start_us * 1000,
        end_ns=(start_us + duration_us) * 1000,
        status="ERROR" if error else "UNSET",
        status_message=str(attributes["error"])
        if error and attributes["error"] not in ("", "true")
        else None,
        service=((span.get("localEndpoint") or {}).get("serviceName")),
        scope=None,
        attributes=attributes,
    )


def read(stream: IO[str]) -> Iterator[Record]:
    try:
        for index, span in enumerate(iter_array(stream), start=1):
            yield span_record(span, index)
    except JSONStreamError as exc:
        yield Record(0, problem=f"invalid Zipkin JSON: {exc}")
