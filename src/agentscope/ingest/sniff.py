"""Tell a trace file's format from its first whole record, by the keys that record has.

Identifying keys can come late: a LangSmith run written by LangChain's tracer
puts ``run_type`` after ``inputs`` and ``outputs`` that hold whole prompts
(100 KB and more), a Langfuse observation its ``traceId`` after its ``input``.
So the format is not looked for in a fixed number of leading bytes. The first
record is found instead (the first object of JSON lines, the first element of
a JSON array or of an API page's array, the top level of a document), and its
keys decide.  Values are skipped, not decoded: only key names are read.

:func:`judge` is pure: given the bytes read so far it answers the format, or
raises :class:`Incomplete` when the first record goes on past them (the caller
reads more and asks again, up to its bound).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NoReturn

import orjson

from agentscope.ingest import otlp, phoenix

DUCKDB_MAGIC = b"DUCK"
_BOM = b"\xef\xbb\xbf"
_SPACE = b" \t\r\n"
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_STRUCTURE = re.compile(rb'["\[\]{}]')
_SCALAR = re.compile(rb"[^\s,\]}]*")
# Keys whose value is an array of records: OTLP's requests (and Grafana Tempo's
# traces, "batches"), Jaeger's and Langfuse's pages ("data"), LangSmith's page
# ("runs"), one Jaeger trace ("spans").
_OTLP_ENVELOPES = frozenset({"resourceSpans", "resource_spans", "batches"})
_ENVELOPES = _OTLP_ENVELOPES | {"data", "runs", "spans"}
# Trace stores' query APIs wrap a trace (an OTLP request) in an object of these keys (otlp.ANSWER_WRAPPERS):
# Grafana Tempo's second API, Jaeger's api_v3.
_STORE_ANSWERS = {
    "trace": frozenset({"trace", "metrics", "status", "message"}),
    "result": frozenset({"result"}),
}
# What a refusal names as read, with the keys that tell each.
_OTLP = "OTLP requests (resourceSpans; Tempo's batches or trace, Jaeger 2's result)"
_RECORDS = (
    "LangSmith runs (run_type), Langfuse observations (traceId/startTime) "
    "or Phoenix spans (context/span_kind)"
)
# An element's walk stops at a Jaeger trace's "spans": its keys so far decide.
_TRACE_SPANS = frozenset({"spans"})
_LINES_TRIED = 100


class Incomplete(Exception):
    """The bytes end inside the first record: read more."""


class UnknownFormat(ValueError):
    """The file is none of the formats agentscope reads."""


class _Invalid(Exception):
    """The bytes are not JSON where a record was expected."""


@dataclass
class _Shape:
    """What the walk saw of the first record: its keys, and the first element of an array it holds."""

    keys: list[str] = field(default_factory=list)
    envelope: str | None = None
    element: list[str] | None = None  # the first element's keys (an object), [] for a non-object
    empty: bool = False  # an envelope or array with no element
    newline_before_first_key: bool = False


def judge(data: bytes, eof: bool) -> str:
    """The format of a file whose first bytes are ``data`` (all of it when ``eof``)."""
    if len(data) < 12 and not eof:
        raise Incomplete
    if data[8:12] == DUCKDB_MAGIC:
        return "store"
    text = data.removeprefix(_BOM)
    start = _skip_space(text, 0)
    if start == len(text):
        if eof:
            raise UnknownFormat("the file is empty")
        raise Incomplete
    if text[start] in b"{[":
        return _judge_json(text, start, eof)
    return _judge_binary(data, eof)


def _judge_json(text: bytes, start: int, eof: bool) -> str:
    """Walk the first record; a first line that is not JSON gives way to the next (JSON lines)."""
    for _ in range(_LINES_TRIED):
        try:
            return _format_of(_walk(text, start, eof), text[start] == ord("["))
        except _Invalid:
            newline = text.find(b"\n", start)
            if newline < 0:
                if not eof:
                    raise Incomplete from None
                break
            start = _skip_space(text, newline + 1)
            if start == len(text):
                if not eof:
                    raise Incomplete from None
                break
            if text[start] not in b"{[":
                break
    raise UnknownFormat("JSON whose first record cannot be read (neither a whole object nor an array)")


def _format_of(shape: _Shape, array: bool) -> str:
    keys = set(shape.keys)
    if array:
        return _array_format(shape)
    if shape.envelope in _OTLP_ENVELOPES or _store_answer(keys):
        return "otlp-json" if shape.newline_before_first_key else "otlp-json-lines"
    element = set(shape.element or ())
    if shape.envelope == "runs":
        return "langsmith"
    if shape.envelope == "data":
        if shape.empty:
            return "jaeger"
        found = _record_format(element)
        if found is not None:
            return found
        if "traceID" in element or "spans" in element:
            return "jaeger"
        _refuse_langfuse_traces(element)
        named = ", ".join(sorted(element)[:8]) or "not an object"
        raise UnknownFormat(
            f"a page (data) whose first element is none of Jaeger traces (traceID, spans), {_RECORDS}; "
            f"its keys: {named}"
        )
    if shape.envelope == "spans" or "traceID" in keys:
        return "jaeger-trace"
    found = _record_format(keys)
    if found is not None:
        return found
    _refuse_langfuse_traces(keys)
    named = ", ".join(sorted(keys)[:8]) or "no keys"
    raise UnknownFormat(
        f"a JSON object that is none of {_OTLP}, Jaeger (data/spans), {_RECORDS}; its keys: {named}"
    )


def _array_format(shape: _Shape) -> str:
    """A top-level array's format, told by its first element: OTLP requests, LangSmith runs, Langfuse
    observations, or Zipkin spans (which carry ``traceId`` and ``id``; an empty array reads as none)."""
    element = set(shape.element or ())
    if element & _OTLP_ENVELOPES or _store_answer(element):
        return "otlp-json-array"
    found = _record_format(element)
    if found is not None:
        return found
    if shape.empty or element >= {"traceId", "id"}:
        return "zipkin"
    _refuse_langfuse_traces(element)
    named = ", ".join(sorted(element)[:8]) or "not an object"
    raise UnknownFormat(
        f"a JSON array whose first element is none of {_OTLP}, Zipkin spans (traceId, id), {_RECORDS}; "
        f"its keys: {named}"
    )


def _store_answer(keys: set[str]) -> bool:
    """Whether an object's keys are a trace store's answer that wraps an OTLP request."""
    return any(wrapper in keys and keys <= allowed for wrapper, allowed in _STORE_ANSWERS.items())


def _refuse_langfuse_traces(keys: set[str]) -> None:
    """Langfuse's traces (the traces table's export, ``/api/public/traces``) list their observations by
    id and carry no span times: say which export to take instead."""
    if {"observations", "timestamp"} <= keys and "startTime" not in keys:
        raise UnknownFormat(
            "Langfuse traces, which hold no span times: export their observations instead "
            "(GET /api/public/observations, or the observations table) and ingest those"
        )


def _record_format(keys: set[str]) -> str | None:
    """``langsmith``, ``langfuse`` or ``phoenix`` when an object's keys are a run's, an observation's or a
    Phoenix span's.

    LangSmith runs carry ``run_type`` and snake_case times; Langfuse observations
    camelCase ``traceId`` with ``startTime`` (Jaeger writes ``traceID``, Zipkin
    ``timestamp``, OTLP ``startTimeUnixNano``); Phoenix's spans ``context`` and
    ``span_kind``, or (its ``otlpv1`` shape) ``trace_id`` with ``start_time_unix_nano``.
    """
    if "run_type" in keys and ("start_time" in keys or "parent_run_id" in keys):
        return "langsmith"
    if "traceId" in keys and "startTime" in keys:
        return "langfuse"
    if keys >= phoenix.SPAN_KEYS or keys >= phoenix.OTLP_SPAN_KEYS:
        return "phoenix"
    return None


_ARCHIVES = {
    b"PK\x03\x04": "a zip archive",
    b"BZh": "a bzip2 file",
    b"\xfd7zXZ\x00": "an xz file",
    b"\x28\xb5\x2f\xfd": "a zstd file",
    b"7z\xbc\xaf\x27\x1c": "a 7-Zip archive",
}
"""Leading bytes of containers agentscope does not open (it reads gzip): named, not read as protobuf."""
PARQUET_MAGIC = b"PAR1"


def _judge_binary(data: bytes, eof: bool) -> str:
    """OTLP protobuf: length-delimited messages when the first varint frames a whole request."""
    framed = _first_frame(data, eof)
    if framed is not None:
        return "otlp-proto-delimited"
    for magic, what in _ARCHIVES.items():
        if data.startswith(magic):
            raise UnknownFormat(f"{what}: agentscope reads plain and gzip files; unpack it first")
    if data.startswith(PARQUET_MAGIC):
        raise UnknownFormat(
            "a Parquet file: agentscope reads Parquet only as a folder it exported, with "
            "`agentscope blame --tasks DIR` (a task table) or `agentscope blame --engine spark DIR` (spans)"
        )
    if otlp.parse_proto_message(data) is None and _is_text(data[:256]):
        raise UnknownFormat("a text file that is not JSON")
    return "otlp-proto"


def _is_text(head: bytes) -> bool:
    """Whether a file's first bytes are UTF-8 text (a character cut at their end allowed), with no control
    characters but tabs and line ends: a log or a report, not a protobuf message."""
    try:
        text = head.decode()
    except UnicodeDecodeError as exc:
        if exc.reason != "unexpected end of data":
            return False
        text = head[: exc.start].decode()
    return all((ch >= " " and ch != "\x7f") or ch in "\t\n\r" for ch in text)


def _first_frame(data: bytes, eof: bool) -> bytes | None:
    """The first message of a length-delimited stream, when ``data`` starts with one."""
    size = shift = used = 0
    while True:
        if used >= len(data):
            if eof:
                return None
            raise Incomplete
        if used == 10:
            return None
        byte = data[used]
        used += 1
        size |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    if used + size > len(data):
        if eof:
            return None
        raise Incomplete
    message = data[used : used + size]
    return message if otlp.parse_proto_message(message) is not None else None


# --- the walk: key names read, values skipped -----------------------------


def _skip_space(text: bytes, at: int) -> int:
    while at < len(text) and text[at] in _SPACE:
        at += 1
    return at


def _ran_out(eof: bool) -> NoReturn:
    """The bytes ended inside a value: broken JSON at the end of the file, else read more."""
    if eof:
        raise _Invalid
    raise Incomplete


def _need(text: bytes, at: int, eof: bool) -> None:
    if at >= len(text):
        _ran_out(eof)


def _string_end(text: bytes, at: int, eof: bool) -> int:
    match = _STRING.match(text, at)
    if match is None:  # no closing quote in what was read
        _ran_out(eof)
    return match.end()


def _value_end(text: bytes, at: int, eof: bool) -> int:
    """Where the JSON value at ``at`` ends (its brackets matched; strings skipped whole)."""
    _need(text, at, eof)
    first = text[at]
    if first == ord('"'):
        return _string_end(text, at, eof)
    if first not in b"[{":
        end = _SCALAR.match(text, at).end()
        if end == at:
            raise _Invalid
        _need(text, end, eof)
        return end
    depth, cursor = 0, at
    while True:
        match = _STRUCTURE.search(text, cursor)
        if match is None:
            _ran_out(eof)
        token = match.group()
        if token == b'"':
            cursor = _string_end(text, match.start(), eof)
            continue
        depth += 1 if token in (b"[", b"{") else -1
        cursor = match.end()
        if depth == 0:
            return cursor


def _object_keys(text: bytes, at: int, eof: bool, envelopes: frozenset[str]) -> tuple[_Shape, int]:
    """The keys of the object at ``at``; stops at the first key in ``envelopes`` whose value is an array."""
    shape = _Shape()
    cursor = at + 1
    while True:
        key_at = _skip_space(text, cursor)
        _need(text, key_at, eof)
        if text[key_at] == ord("}"):
            return shape, key_at + 1
        if text[key_at] == ord(",") and shape.keys:
            key_at = _skip_space(text, key_at + 1)
            _need(text, key_at, eof)
        if text[key_at] != ord('"'):
            raise _Invalid
        if not shape.keys:
            shape.newline_before_first_key = b"\n" in text[at:key_at]
        key_end = _string_end(text, key_at, eof)
        try:
            key = orjson.loads(text[key_at:key_end])
        except orjson.JSONDecodeError:
            raise _Invalid from None
        shape.keys.append(key)
        colon = _skip_space(text, key_end)
        _need(text, colon, eof)
        if text[colon] != ord(":"):
            raise _Invalid
        value_at = _skip_space(text, colon + 1)
        _need(text, value_at, eof)
        if key in envelopes and text[value_at] == ord("["):
            shape.envelope = key
            _first_element(text, value_at, eof, shape)
            return shape, value_at
        cursor = _value_end(text, value_at, eof)


def _first_element(text: bytes, at: int, eof: bool, shape: _Shape) -> None:
    """Record in ``shape`` the keys of the first element of the array at ``at``."""
    first = _skip_space(text, at + 1)
    _need(text, first, eof)
    if text[first] == ord("]"):
        shape.empty = True
        return
    if text[first] == ord("{"):
        element, _ = _object_keys(text, first, eof, _TRACE_SPANS)
        shape.element = element.keys
    else:
        _value_end(text, first, eof)
        shape.element = []


def _walk(text: bytes, at: int, eof: bool) -> _Shape:
    """The shape of the first record of the JSON text at ``at`` (an array or an object)."""
    if text[at] == ord("["):
        shape = _Shape()
        _first_element(text, at, eof, shape)
        return shape
    shape, _ = _object_keys(text, at, eof, _ENVELOPES)
    return shape
