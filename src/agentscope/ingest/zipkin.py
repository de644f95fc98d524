"""Zipkin v2 JSON: an array of spans, times and durations in microseconds.

Tags (all strings) become attributes; ``localEndpoint.serviceName`` is the
service; the remote endpoint fills ``server.address`` for client spans; an
``error`` tag marks the span as failed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any

from agentscope import attributes as A
from agentscope.ingest.jsonstream import JSONStreamError, iter_array
from agentscope.ingest.records import BadSpan, Record, as_int, record


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
    return record(
        index,
        trace_id=span.get("traceId"),
        span_id=span.get("id"),
        parent_id=span.get("parentId"),
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
