"""Jaeger JSON: the UI's "download" file and the query API's response (``{"data": [trace, ...]}``).

Times are microseconds.  The parent is the first CHILD_OF reference, else the
first FOLLOWS_FROM one (a span that only follows another is a message consumer:
it is marked CONSUMER, so it stays off its producer's critical path); a
reference into another trace (an OpenTelemetry span link, as Jaeger shows one)
is not a parent.  Process tags become the span's service; ``span.kind``,
``otel.status_code`` and ``error`` tags give its kind and status.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any

import orjson

from agentscope.ingest.jsonstream import JSONStreamError, iter_array
from agentscope.ingest.records import BadSpan, Record, as_int, record


def _tags(tags: Any) -> dict[str, Any]:
    if not tags:
        return {}
    if not isinstance(tags, list):
        raise BadSpan("tags are not a list")
    out = {}
    for tag in tags:
        if not isinstance(tag, dict) or not isinstance(tag.get("key"), str):
            raise BadSpan(f"tag {tag!r} has no string key")
        out[tag["key"]] = tag.get("value")
    return out


def _same_trace(ref: dict, trace_id: Any) -> bool:
    """Whether a reference points into the span's own trace (one that does not say is taken as so)."""
    theirs = ref.get("traceID")
    if theirs is None or trace_id is None:
        return True
    try:
        return int(str(theirs), 16) == int(str(trace_id), 16)
    except ValueError:
        return str(theirs).lower() == str(trace_id).lower()


def _parent(references: Any, trace_id: Any) -> tuple[str | None, bool]:
    """The parent span id, and whether it came from a FOLLOWS_FROM reference."""
    refs = [r for r in references or [] if isinstance(r, dict) and _same_trace(r, trace_id)]
    for wanted in ("CHILD_OF", "FOLLOWS_FROM"):
        for ref in refs:
            if ref.get("refType") == wanted:
                return ref.get("spanID"), wanted == "FOLLOWS_FROM"
    return None, False


def trace_records(trace: Any, index: int) -> Iterator[Record]:
    if not isinstance(trace, dict):
        yield Record(index, problem="trace is not an object")
        return
    processes = trace.get("processes") or {}
    for span in trace.get("spans") or []:
        try:
            if not isinstance(span, dict):
                raise BadSpan("span is not an object")
            attributes = _tags(span.get("tags"))
            process = processes.get(span.get("processID")) or span.get("process") or {}
            parent, follows = _parent(span.get("references"), span.get("traceID"))
            start_us = as_int(span.get("startTime"), "startTime")
            duration_us = as_int(span.get("duration"), "duration")
        except BadSpan as exc:
            yield Record(index, problem=str(exc))
            continue
        kind = str(attributes.pop("span.kind", "")).upper() or ("CONSUMER" if follows else "INTERNAL")
        status_tag = str(attributes.pop("otel.status_code", "")).upper()
        error = attributes.get("error") in (True, "true")
        status = "ERROR" if error or status_tag == "ERROR" else ("OK" if status_tag == "OK" else "UNSET")
        yield record(
            index,
            trace_id=span.get("traceID"),
            span_id=span.get("spanID"),
            parent_id=parent,
            name=span.get("operationName"),
            span_kind=kind,
            start_ns=start_us * 1000,
            end_ns=(start_us + duration_us) * 1000,
            status=status,
            status_message=attributes.pop("otel.status_description", None),
            service=process.get("serviceName"),
            scope=attributes.pop("otel.library.name", None) or attributes.pop("otel.scope.name", None),
            attributes=attributes,
        )


def read(stream: IO[str], enveloped: bool) -> Iterator[Record]:
    """Every span of a Jaeger JSON file; ``enveloped`` for ``{"data": [...]}``, else one trace object."""
    try:
        if enveloped:
            for index, trace in enumerate(iter_array(stream, "data"), start=1):
                yield from trace_records(trace, index)
        else:
            yield from trace_records(orjson.loads(stream.read()), 1)
    except (JSONStreamError, ValueError) as exc:
        yield Record(0, problem=f"invalid Jaeger JSON: {exc}")
