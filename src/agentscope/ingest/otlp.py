"""OTLP traces: JSON (Collector file-exporter lines, or one document) and protobuf.

Both encodings go through the same walk: resource → scope → span, with the
resource's ``service.name`` and the scope's name carried onto every span.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator
from typing import IO, Any

import orjson
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from agentscope import attributes as A
from agentscope.classify import FIRST_TOKEN_EVENTS, first_token_ns
from agentscope.ingest.jsonstream import JSONStreamError, iter_array
from agentscope.ingest.records import MAX_ATTRIBUTE_BYTES, BadSpan, Record, record

SPAN_KINDS = {0: None, 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}
STATUS = {0: "UNSET", 1: "OK", 2: "ERROR"}


def _enum(value: Any, table: dict[int, str | None], prefix: str) -> str | None:
    if isinstance(value, int):
        return table.get(value)
    if isinstance(value, str):
        name = value.upper().removeprefix(prefix)
        return name if name in table.values() else None
    return None


# --- JSON ----------------------------------------------------------------


def loads(text: bytes) -> Any:
    """The value of a JSON text; ValueError if it is not JSON.

    orjson refuses numbers it cannot make a double of: ``1e400`` (JSON all the same) and the ``NaN``
    and ``Infinity`` that Python's own ``json.dumps`` writes.  DuckDB's reader of the same lines takes
    them, so a text orjson refuses is read again by the standard library's parser, with integers past
    64 bits made doubles as orjson makes them.  Such a number where a time must be fails its span's
    checks; as a double attribute it is stored as null.  A text whose value orjson cannot write back
    (a lone surrogate) stays refused, with orjson's reason.
    """
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as refused:
        try:
            value = json.loads(text, parse_int=_orjson_int)
            orjson.dumps(value)
        except (ValueError, TypeError, RecursionError):
            raise refused from None
        return value


def _orjson_int(digits: str) -> int | float:
    """An integer as orjson reads one: past 64 bits, a double."""
    number = int(digits)
    return number if -(2**63) <= number < 2**64 else float(number)


def json_value(value: Any) -> Any:
    """A Python value from an OTLP JSON ``AnyValue``.

    A field written as ``null`` is unset, as protobuf's JSON parsers read it: Arize Phoenix's
    ``otlpv1`` spans write every field of the value, the unset ones as ``null``.
    """
    if not isinstance(value, dict):
        raise BadSpan(f"attribute value {value!r} is not an AnyValue object")
    if (found := value.get("stringValue")) is not None:
        return found
    if (found := value.get("boolValue")) is not None:
        return bool(found)
    if (found := value.get("intValue")) is not None:
        return int(found)
    if (found := value.get("doubleValue")) is not None:
        return float(found)
    if (found := value.get("arrayValue")) is not None:
        return [json_value(v) for v in found.get("values", [])]
    if (found := value.get("kvlistValue")) is not None:
        return json_attributes(found.get("values", []))
    if (found := value.get("bytesValue")) is not None:
        return base64.b64decode(found).hex()
    return None


def json_attributes(items: Any) -> dict[str, Any]:
    if not items:
        return {}
    if not isinstance(items, list):
        raise BadSpan("attributes are not a list of key/value objects")
    out = {}
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise BadSpan(f"attribute {item!r} has no string key")
        try:
            out[item["key"]] = json_value(item.get("value", {}))
        except (TypeError, ValueError) as exc:
            raise BadSpan(f"attribute {item['key']!r}: {exc}") from None
    return out


def json_request_records(request: Any, line: int, check_sizes: bool = True) -> Iterator[Record]:
    """Records of one ExportTraceServiceRequest (a parsed JSON object).

    ``check_sizes=False``: the request's text is known to be smaller than the attribute limit.
    """
    request = _as_request(request)
    if request == {}:  # an empty request: JSON leaves out an empty list, as protobuf sends no bytes
        return
    if not isinstance(request, dict) or "resourceSpans" not in request:
        problem = "not an OTLP ExportTraceServiceRequest (no resourceSpans, nor Tempo's batches)"
        yield Record(line, problem=problem)
        return
    try:
        yield from _json_resource_spans(request["resourceSpans"], line, check_sizes)
    except (TypeError, AttributeError, KeyError) as exc:
        yield Record(line, problem=f"malformed OTLP request: {type(exc).__name__}: {exc}")


ANSWER_WRAPPERS = ("trace", "result")
"""Keys under which trace stores' query APIs answer with a request: Grafana Tempo's second API
(``GET /api/v2/traces/<id>``: ``{"trace": ..., "metrics": ...}``) and Jaeger's api_v3
(``GET /api/v3/traces/<id>``, Jaeger 2's: ``{"result": ...}``, one such object per streamed chunk)."""


def _as_request(value: Any) -> Any:
    """The ExportTraceServiceRequest a parsed JSON object stands for.

    A trace store's answer holds it under one of :data:`ANSWER_WRAPPERS`.  Grafana Tempo's ``Trace``
    message names the request's resource spans ``batches`` (``GET /api/traces/<id>``); its ids are base64,
    as protobuf's JSON writes bytes, which :func:`records.hex_id` reads.  A request written with protobuf's
    own field names is renamed.
    """
    if not isinstance(value, dict) or "resourceSpans" in value:
        return value
    for wrapper in ANSWER_WRAPPERS:
        if isinstance(value.get(wrapper), dict):
            value = value[wrapper]
            break
    if "batches" in value and "resourceSpans" not in value:
        value = {"resourceSpans": value["batches"]}
    if "resource_spans" in value and "resourceSpans" not in value:
        value = camel_case_keys(value)
    return value


def camel_case_keys(value: Any) -> Any:
    """A request written with protobuf's own field names (``resource_spans``, ``start_time_unix_nano``:
    protobuf's ``preserving_proto_field_name``, Go's ``UseProtoNames``) with OTLP/JSON's lowerCamelCase
    keys instead, as protobuf's JSON parsers accept either.  Every object key in a request is a field
    name (attribute keys are values), so all of them are renamed."""
    if isinstance(value, dict):
        return {_camel_case(key): camel_case_keys(item) for key, item in value.items()}
    if isinstance(value, list):
        return [camel_case_keys(item) for item in value]
    return value


def _camel_case(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _json_resource_spans(resource_spans_list: Any, line: int, check_sizes: bool) -> Iterator[Record]:
    if not isinstance(resource_spans_list, list):
        raise TypeError("resourceSpans is not a list")
    for resource_spans in resource_spans_list:
        try:
            resource = json_attributes(((resource_spans or {}).get("resource") or {}).get("attributes"))
        except BadSpan as exc:
            yield Record(line, problem=f"resource: {exc}")
            continue
        service = resource.get(A.SERVICE_NAME)
        for scope_spans in (
            resource_spans.get("scopeSpans") or resource_spans.get("instrumentationLibrarySpans") or []
        ):
            scope = (scope_spans.get("scope") or scope_spans.get("instrumentationLibrary") or {}).get("name")
            for span in scope_spans.get("spans") or []:
                yield json_span(span, line, service, scope, check_sizes)


def json_span(span: Any, line: int, service: Any, scope: Any, check_sizes: bool) -> Record:
    if not isinstance(span, dict):
        return Record(line, problem="span is not an object")
    try:
        attributes = json_attributes(span.get("attributes"))
    except BadSpan as exc:
        return Record(line, problem=str(exc))
    status = span.get("status") or {}
    return record(
        line,
        trace_id=span.get("traceId"),
        span_id=span.get("spanId"),
        parent_id=span.get("parentSpanId"),
        name=span.get("name"),
        span_kind=_enum(span.get("kind", 0), SPAN_KINDS, "SPAN_KIND_"),
        start_ns=span.get("startTimeUnixNano"),
        end_ns=span.get("endTimeUnixNano"),
        status=_enum(status.get("code", 0), STATUS, "STATUS_CODE_") or "UNSET",
        status_message=status.get("message") or None,
        service=service if isinstance(service, str) else None,
        scope=scope if isinstance(scope, str) else None,
        attributes=attributes,
        check_sizes=check_sizes,
        first_token_at=_json_first_token(span.get("events")),
    )


def _json_first_token(events: Any) -> int | None:
    """The first-token time the span's events mark (malformed events are not marks)."""
    if not isinstance(events, list):
        return None
    marks = []
    for event in events:
        if isinstance(event, dict) and event.get("name") in FIRST_TOKEN_EVENTS:
            at = event.get("timeUnixNano")
            if isinstance(at, (int, str)) and str(at).isdigit():
                marks.append((event["name"], int(at)))
    return first_token_ns(marks)


def read_json_lines(stream: IO[bytes]) -> Iterator[Record]:
    """One ExportTraceServiceRequest per line (blank lines skipped)."""
    return json_lines_records(enumerate(stream, start=1))


def json_lines_records(lines: Iterable[tuple[int, bytes]]) -> Iterator[Record]:
    """Records of numbered JSON lines, each an ExportTraceServiceRequest."""
    for number, line in lines:
        if not line.strip():
            continue
        try:
            request = loads(line)
        except ValueError as exc:
            yield Record(number, problem=f"invalid JSON: {exc}")
            continue
        yield from json_request_records(request, number, len(line) > MAX_ATTRIBUTE_BYTES)


def read_json_document(stream: IO[bytes]) -> Iterator[Record]:
    """One (possibly pretty-printed) ExportTraceServiceRequest document."""
    try:
        request = loads(stream.read())
    except ValueError as exc:
        yield Record(1, problem=f"invalid JSON: {exc}")
        return
    yield from json_request_records(request, 1)


def read_json_array(stream: IO[str]) -> Iterator[Record]:
    """A JSON array of ExportTraceServiceRequests, one element at a time; a problem's line is the
    element's number, as in the other array formats."""
    try:
        for index, request in enumerate(iter_array(stream), start=1):
            yield from json_request_records(request, index)
    except JSONStreamError as exc:
        yield Record(0, problem=f"invalid JSON array of OTLP requests: {exc}")


# --- protobuf --------------------------------------------------------------


def proto_value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [proto_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: proto_value(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, kind) if kind else None


def proto_request_records(request: ExportTraceServiceRequest, line: int) -> Iterator[Record]:
    for resource_spans in request.resource_spans:
        resource = {kv.key: proto_value(kv.value) for kv in resource_spans.resource.attributes}
        service = resource.get(A.SERVICE_NAME)
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope.name or None
            for span in scope_spans.spans:
                yield record(
                    line,
                    trace_id=span.trace_id,
                    span_id=span.span_id,
                    parent_id=span.parent_span_id,
                    name=span.name,
                    span_kind=SPAN_KINDS.get(span.kind),
                    start_ns=span.start_time_unix_nano,
                    end_ns=span.end_time_unix_nano,
                    status=STATUS.get(span.status.code, "UNSET"),
                    status_message=span.status.message or None,
                    service=service if isinstance(service, str) else None,
                    scope=scope,
                    attributes={kv.key: proto_value(kv.value) for kv in span.attributes},
                    first_token_at=first_token_ns((e.name, e.time_unix_nano) for e in span.events),
                )


def _varint(stream: IO[bytes]) -> int | None:
    shift = result = 0
    while True:
        byte = stream.read(1)
        if not byte:
            return None if shift == 0 else -1
        result |= (byte[0] & 0x7F) << shift
        if not byte[0] & 0x80:
            return result
        shift += 7
        if shift > 63:
            return -1


def read_proto_delimited(stream: IO[bytes]) -> Iterator[Record]:
    """Length-delimited ExportTraceServiceRequest messages, one after another."""
    number = 0
    while True:
        size = _varint(stream)
        if size is None:
            return
        number += 1
        data = stream.read(size) if size >= 0 else b""
        if size < 0 or len(data) != size:
            yield Record(number, problem="truncated protobuf message")
            return
        try:
            request = ExportTraceServiceRequest.FromString(data)
        except Exception as exc:
            yield Record(number, problem=f"invalid protobuf message: {exc}")
            continue
        yield from proto_request_records(request, number)


def parse_proto_message(data: bytes) -> ExportTraceServiceRequest | None:
    """A single ExportTraceServiceRequest, or None if ``data`` is not one."""
    try:
        request = ExportTraceServiceRequest.FromString(data)
    except Exception:
        return None
    spans: Iterable[Any] = (s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans)
    return request if any(len(s.span_id) == 8 for s in spans) else None
