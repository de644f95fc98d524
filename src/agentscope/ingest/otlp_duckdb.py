"""OTLP JSON lines parsed, flattened and classified inside DuckDB.

The Python reader (:func:`agentscope.ingest.otlp.read_json_lines`) costs about
25 µs a span; DuckDB parses and unnests the same lines in its own threads at a
few µs a span.  Lines are read in blocks of about 16 MB and streamed to DuckDB as
an Arrow column; one query a file turns them into ``spans`` rows, classified and
normalised by SQL built from the same rule tables as the Python classifier
(:func:`agentscope.classify.kind_sql`, :func:`agentscope.classify.aliases_sql`),
and its rows are handed back block by block.

Only lines the query can take exactly are taken.  A line goes to the Python
reader instead, which names what is wrong with it and keeps its good spans, if
it is not valid JSON, not a request with spans, carries a span that fails a
check (ids, times, names, attribute keys and values, sizes, first-token events'
times), a value kind the query does not read (kvlist, bytes, nested arrays), an
escaped control character, a repeated attribute key, a Langfuse field not written
as its SDK writes it, or a span that appears twice in the block.  Either way
a span gets the same row, byte for byte.

One limit: ``from_json`` reads a container of the wrong type inside a span (attributes
given as an object or a number, a status that is a number) as an absent one, so the
query takes such a span without its attributes or status, where the Python reader
names the fault and skips the span.  Telling them apart would take a second parse of
every line, or a scan of every block for each such shape; exporters do not write them.

Another: DuckDB's parser is more lenient than JSON.  Numbers past a double's range and ``NaN`` or
``Infinity`` both readers read (:func:`agentscope.ingest.otlp.loads`); a trailing comma, or ``nan`` and
``inf`` in other cases, only DuckDB's does, so a line holding them where the query reads nothing is
taken with its spans, where the Python reader would refuse it as not JSON.  Telling would take a
second parse of every line.
"""

from __future__ import annotations

import functools
import json
import zlib
from array import array
from bisect import bisect_left
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import accumulate
from typing import IO

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from agentscope import attributes as A
from agentscope.classify import (
    FIRST_TOKEN_EVENTS,
    LANGFUSE_FIRST_TOKEN,
    LANGFUSE_USAGE,
    USAGE_CACHED_KEYS,
    USAGE_INPUT_KEYS,
    USAGE_OUTPUT_KEYS,
    aliases_sql,
    kind_sql,
    sql_text,
)
from agentscope.ingest.otlp import SPAN_KINDS, STATUS
from agentscope.ingest.records import MAX_ATTRIBUTE_BYTES
from agentscope.store import arrays, columns
from agentscope.store.schema import ARROW_SCHEMA, COLUMN_NAMES
from agentscope.store.store import connect, is_interrupt

BLOCK_BYTES = 16 << 20
"""Text handed to DuckDB at a time: large enough to keep its threads busy, small enough for memory."""
BATCH_BYTES = 1 << 20
"""Text per Arrow record batch: DuckDB scans batches in parallel, so a block needs several; but each
batch is one small chunk through every operator, and the query's list lambdas cost per chunk as much
as per element, so a batch must hold many spans (a quarter of a megabyte took 40% longer)."""
VECTOR_ROWS = 2048
"""DuckDB's chunk: a batch of fewer lines reaches every operator as a chunk of that few rows.  Short lines
(a span or two each) are taken a vector to a batch: one span a line, a 1 MB batch is 770 lines, and the
query took 6-14% longer on them than on batches of 2,048."""
SHORT_LINES_MAX_BATCHES = 4
"""Lines are short if a vector of them fits in this many BATCH_BYTES.  Longer lines unnest into many
spans, so their batches stay at BATCH_BYTES."""
LONG_LINE_BYTES = 8 << 20
"""Longer lines go to the Python reader, which cuts oversized values rather than parse them whole."""
ROUTED_MARKERS = (b"instrumentationLibrary", b"\\u000", b"\\u001")
"""Lines containing these go to the Python reader: the legacy key of scope spans, which the query does not
read; and escaped control characters, which DuckDB writes back as ``\\u001F`` where Python writes
``\\u001f``.  Other packages' timing and usage shapes (:func:`agentscope.classify.read_peer_fields`) the
query reads itself (:data:`_FIRST_TOKEN_SQL`, :data:`_PEER_ENTRIES`).
Value kinds the query does not read (kvlist, bytes) need no marker: such a value has none of the fields the
query reads, so its span fails the query's checks and goes to the Python reader anyway,
at no cost to the blocks that have none (each marker is a scan of the whole block)."""
_ESCAPE_PREFIX = b"\\u00"
"""What the escaped control characters' markers begin with: a block without it (most have not even a
backslash, which one ``memchr`` finds) is not scanned for them one by one."""

_PRIMITIVE = {
    "stringValue": "VARCHAR",
    "boolValue": "BOOLEAN",
    "intValue": "VARCHAR",
    "doubleValue": "VARCHAR",
}
_ATTRIBUTES = [{"key": "JSON", "value": {**_PRIMITIVE, "arrayValue": {"values": [_PRIMITIVE]}}}]
_SPAN = {
    "traceId": "VARCHAR",
    "spanId": "VARCHAR",
    "parentSpanId": "VARCHAR",
    "name": "JSON",
    "kind": "VARCHAR",
    "startTimeUnixNano": "VARCHAR",
    "endTimeUnixNano": "VARCHAR",
    "status": {"code": "VARCHAR", "message": "VARCHAR"},
    "attributes": _ATTRIBUTES,
    "events": [{"name": "VARCHAR", "timeUnixNano": "VARCHAR"}],
}
_REQUEST = {
    "resourceSpans": [
        {
            "resource": {"attributes": _ATTRIBUTES},
            "scopeSpans": [{"scope": {"name": "VARCHAR"}, "spans": [_SPAN]}],
        }
    ]
}
STRUCTURE = json.dumps(_REQUEST)


def _enum_sql(column: str, table: dict[int, str | None], prefix: str) -> str:
    """An OTLP enum given as its number or its (prefixed) name, as the name; NULL if unknown.

    ``table`` is the Python reader's table of the enum (:data:`otlp.SPAN_KINDS`, :data:`otlp.STATUS`).
    """
    named = {number: name for number, name in table.items() if name is not None}
    numbers = " ".join(f"WHEN '{number}' THEN '{name}'" for number, name in named.items())
    by_name = " ".join(
        f"WHEN '{name}' THEN '{name}' WHEN '{prefix}{name}' THEN '{name}'" for name in named.values()
    )
    return f"CASE {column} {numbers} ELSE CASE upper({column}) {by_name} END END"


def _value_sql(v: str) -> str:
    """The JSON of a primitive AnyValue struct ``v``, in the Python reader's order of precedence."""
    return (
        f"CASE WHEN {v}.stringValue IS NOT NULL THEN to_json({v}.stringValue) "
        f"WHEN {v}.boolValue IS NOT NULL THEN to_json({v}.boolValue) "
        f"WHEN {v}.intValue IS NOT NULL THEN to_json(TRY_CAST({v}.intValue AS BIGINT)) "
        f"WHEN {v}.doubleValue IS NOT NULL THEN to_json(TRY_CAST({v}.doubleValue AS DOUBLE)) END"
    )


_PLAIN_DOUBLE = "coalesce({0} = 0 OR abs({0}) >= 1e-4 AND abs({0}) < 1e16, false)"
"""Whether a double is written alike by DuckDB and Python: both write the shortest digits, but outside
this range Python writes an exponent (``1e-05``, ``1e+16``) where DuckDB does not or writes it otherwise."""


def _value_ok_sql(v: str) -> str:
    """Whether the query reads primitive AnyValue ``v`` exactly as the Python reader would.

    A value with none of the primitive fields is left to the Python reader: it
    may be empty (null) or not an AnyValue at all, which the query cannot tell apart.
    A string is measured in bytes (``strlen`` reads its length; ``length`` counts its
    characters), at least its length in characters, so a string the Python reader would
    cut is never taken, and a shorter one of many multi-byte characters goes to it too.
    """
    double = f"TRY_CAST({v}.doubleValue AS DOUBLE)"
    return (
        f"CASE WHEN {v}.stringValue IS NOT NULL THEN strlen({v}.stringValue) <= {MAX_ATTRIBUTE_BYTES} "
        f"WHEN {v}.boolValue IS NOT NULL THEN true "
        f"WHEN {v}.intValue IS NOT NULL THEN TRY_CAST({v}.intValue AS BIGINT)::VARCHAR = {v}.intValue "
        f"WHEN {v}.doubleValue IS NOT NULL THEN {_PLAIN_DOUBLE.format(double)} "
        "ELSE false END"
    )


_ELEMENTS = "coalesce(a.value.arrayValue.values, [])"
_ONLY_ARRAY = (
    "a.value.arrayValue IS NOT NULL AND a.value.stringValue IS NULL AND a.value.boolValue IS NULL "
    "AND a.value.intValue IS NULL AND a.value.doubleValue IS NULL"
)
_ENTRY_OK = (
    "a.key IS NOT NULL AND json_type(a.key) = 'VARCHAR' AND a.value IS NOT NULL AND "
    f"CASE WHEN {_ONLY_ARRAY} "
    f"THEN list_bool_and(list_transform({_ELEMENTS}, lambda x: {_value_ok_sql('x')})) IS NOT false "
    f"ELSE {_value_ok_sql('a.value')} END"
)
"""Whether the query reads attribute ``a`` (an OTLP key and value) exactly as the Python reader would."""


def _entries_sql(attributes: str) -> str:
    """An OTLP attribute list as ``{k, v, s}`` structs: key, JSON value, string.

    The key is NULL where the query cannot read the attribute exactly, so one
    test on the keys finds both faults: ``list_distinct`` drops NULLs as well as repeats.
    """
    value = (
        f"CASE WHEN {_ONLY_ARRAY} THEN to_json(list_transform({_ELEMENTS}, lambda x: {_value_sql('x')})) "
        f"ELSE coalesce({_value_sql('a.value')}, 'null'::JSON) END"
    )
    return (
        f"list_transform(coalesce({attributes}, []), "
        f"lambda a: {{k: CASE WHEN {_ENTRY_OK} THEN a.key ->> '$' END, "
        f"v: {value}, s: coalesce(a.value.stringValue, a.value.intValue)}})"
    )


def _resource_sql(attributes: str) -> str:
    """A resource's attribute list as ``ok`` (the query reads every attribute exactly) and ``service``.

    The service is the string of the last ``service.name`` attribute, NULL if that one
    is not a string, as the Python reader takes it (its dict of them keeps the last).
    Nothing else of a resource is stored, so its attributes are checked, not made into
    entries: a line of one span carries a resource of its own, and entries for it cost
    the query 4% on such lines.
    """
    listed = f"coalesce({attributes}, [])"
    return (
        f"list_bool_and(list_transform({listed}, lambda a: {_ENTRY_OK})) IS NOT false AS resource_ok, "
        f"list_filter({listed}, lambda a: a.key ->> '$' = '{A.SERVICE_NAME}')[-1].value.stringValue "
        "AS service"
    )


def _value_of_sql(key: str) -> str:
    """The string (or integer's text) of the span's first attribute with key ``key`` (a SQL literal);
    NULL if absent.

    ``list_position`` over the span's keys, not a lambda over its entries: this runs
    for every span, and most spans lack most keys.  And indexed in the list of the
    strings alone: an entry taken whole would copy its key and JSON value as well.
    """
    return f"strings[list_position(keys, {key})]"


def _column_sql(key: str) -> str:
    """A digits-only attribute (thread id, CPU ns) as a BIGINT column, as :func:`make_row` reads it."""
    return f"TRY_CAST(nullif(regexp_extract({_value_of_sql(repr(key))}, '^[0-9]+$'), '') AS BIGINT)"


def _json_object_sql(*lists: str) -> str:
    """A JSON object's text from lists of ``{k, v}`` entries (``v`` already JSON), in their order.

    Joined as text rather than built as a MAP and serialised: that would parse
    every value again.  Keys are unique (the query takes no span with a repeated key).
    """
    members = ", ".join(
        f"list_transform({entries}, lambda x: to_json(x.k) || ':' || x.v)" for entries in lists
    )
    return f"'{{' || array_to_string(list_concat({members}), ',') || '}}'"


_OR_NULL = "CASE WHEN {0} IS NULL AND {1} IS NULL THEN [NULL] ELSE {1} END"
"""The list to unnest from a resource or scope: ``{1}``, its list; or, where it has neither that list nor
``{0}`` (its resource or scope object), one NULL, which comes out of the unnests as a span that fails the
span's checks, so that the line goes to the Python reader, which names the fault.  ``from_json`` reads an
entry that is not an object (a number, a string, a list) as an object with no fields, which an empty one
also is; the Python reader tells them apart.  A span that is not an object fails its checks alike."""
_MARKS = (
    "CASE WHEN len(s.events) > 0 THEN list_filter(s.events, lambda e: e.name IN ("
    + ", ".join(map(sql_text, sorted(FIRST_TOKEN_EVENTS)))
    + ")) END"
)
"""A span's first-token events (``classify.FIRST_TOKEN_EVENTS``); NULL for a span without events."""
_FIRST_TOKEN_SQL = (
    "list_min(list_transform(marks, lambda e: CASE WHEN regexp_full_match(e.timeUnixNano, '[0-9]+') "
    "THEN TRY_CAST(e.timeUnixNano AS BIGINT) END))"
)
"""When a span's first token came, as the Python reader finds it (``otlp._json_first_token``): the earliest of
its first-token events' times that are digits; NULL if none is."""
_MARKS_OK = (
    "list_bool_and(list_transform(marks, lambda e: e.timeUnixNano IS NULL OR "
    "CASE WHEN regexp_full_match(e.timeUnixNano, '[0-9]+') "
    "THEN TRY_CAST(e.timeUnixNano AS BIGINT) IS NOT NULL "
    "ELSE NOT regexp_matches(e.timeUnixNano, '[^\\x00-\\x7f]') END)) IS NOT false"
)
"""Whether the query reads every first-token time as the Python reader does: a time of digits too long
for a BIGINT, or with characters other than ASCII (which Python may count as digits), is left to it."""
_WS = "[ \\t\\n\\r]*"
_COUNT = "(-?(0|[1-9][0-9]{0,17})|null)"


def _plain_object(value: str) -> str:
    """A JSON object of ``value``s by plain keys (letters and underscores), as a regular expression."""
    member = f'"[A-Za-z_]+"{_WS}:{_WS}{value}{_WS}'
    return f"\\{{{_WS}({member}(,{_WS}{member})*)?\\}}"


_PLAIN_USAGE = _plain_object(f"({_COUNT}|{_plain_object(_COUNT)})")
"""A Langfuse usage object the query reads itself: whole numbers, nulls, and objects of them (OpenAI's
token details) by plain keys, as its SDK writes them; any other text, JSON or not, goes to the Python
reader."""
_PLAIN_ISO = (
    '"[1-9][0-9]{3}-[0-9]{2}-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]([.][0-9]{6})?'
    '(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])?"'
)
"""A Langfuse completion start time the query reads itself: a JSON string of an ISO time to the second or
the microsecond, in UTC, at an offset or with none, as its SDK writes them."""
_ZONED = "regexp_matches(started, '(Z|[+-][0-9]{2}:[0-9]{2})\"$')"
_STARTED_NS = (
    f"CASE WHEN {_ZONED} THEN epoch_us(TRY_CAST(started[2:-2] AS TIMESTAMPTZ)) "
    "ELSE epoch_us(TRY_CAST(started[2:-2] AS TIMESTAMP)) END * 1000"
)
"""The epoch ns of a :data:`_PLAIN_ISO` time; one without an offset is UTC, as ``classify._iso_ns`` reads it
(and NULL where there is no such day, as there it is None)."""
_PEER_OK = (
    f"(usage IS NULL OR regexp_full_match(usage, '{_PLAIN_USAGE}') "
    "AND len(list_distinct(json_keys(usage))) = len(json_keys(usage))) "
    f"AND (started IS NULL OR regexp_full_match(started, '{_PLAIN_ISO}') "
    "AND started BETWEEN '\"1678' AND '\"2262')"
)
"""Whether the query reads a span's Langfuse fields as the Python reader does: not a repeated key (DuckDB
keeps the first, Python the last), nor a time whose epoch ns a BIGINT does not hold (years 1678-2261 do)."""
_NO_ENTRIES = "[]::STRUCT(k VARCHAR, v JSON)[]"
_USAGE_STRUCTURE = json.dumps(
    {key: "BIGINT" for key in (*USAGE_INPUT_KEYS, *USAGE_OUTPUT_KEYS, *USAGE_CACHED_KEYS)}
)


def _peer_entries_sql() -> str:
    """The entries ``classify.read_peer_fields`` adds, in its order: the token counts of a Langfuse usage
    object, then the time to first chunk (from the first-token events, else Langfuse's start time);
    each only where the span (after its aliases) has none of its own."""
    entries = []
    ours = (A.GEN_AI_USAGE_INPUT_TOKENS, A.GEN_AI_USAGE_OUTPUT_TOKENS, A.GEN_AI_USAGE_CACHED_INPUT_TOKENS)
    for key, theirs in zip(ours, (USAGE_INPUT_KEYS, USAGE_OUTPUT_KEYS, USAGE_CACHED_KEYS), strict=True):
        count = "coalesce(" + ", ".join(f"counts.{name}" for name in theirs) + ")"
        entries.append(
            f"CASE WHEN {count} IS NOT NULL AND NOT list_contains(all_keys, '{key}') "
            f"THEN [{{k: '{key}', v: to_json({count})}}] ELSE {_NO_ENTRIES} END"
        )
    ttft = f"[{{k: '{A.GEN_AI_RESPONSE_TTFC}', v: to_json(ttft)}}]"
    entries.append(f"CASE WHEN ttft IS NULL THEN {_NO_ENTRIES} ELSE {ttft} END")
    listed = ", ".join(entries)
    return f"CASE WHEN counts IS NULL AND ttft IS NULL THEN {_NO_ENTRIES} ELSE list_concat({listed}) END"


_PEER_ENTRIES = _peer_entries_sql()
_KEYS_AFTER_ALIASES = "list_concat(keys, list_transform(aliases, lambda a: a.k))"
"""The span's keys with those the aliases add, as the Python classifier sees them."""
_HEX_ID = "regexp_full_match({0}, '[0-9a-f]{{{1}}}') AND NOT regexp_full_match({0}, '0+')"

_QUERY = f"""
WITH parsed AS (
  SELECT line, try(from_json(text, '{STRUCTURE}')) AS r FROM lines  -- NULL if not JSON: no spans
), resources AS (
  SELECT line, unnest(r.resourceSpans) AS rs FROM parsed
), described AS (
  SELECT line, rs, {_resource_sql("rs.resource.attributes")} FROM resources
), scopes AS (
  SELECT line, service, resource_ok, unnest({_OR_NULL.format("rs.resource", "rs.scopeSpans")}) AS ss
  FROM described
), spans AS (
  SELECT line, service, resource_ok, ss.scope.name AS scope,
    unnest({_OR_NULL.format("ss.scope", "ss.spans")}) AS s
  FROM scopes
), fields AS (
  SELECT line, service, resource_ok,
    lower(s.traceId) AS trace_id,
    lower(s.spanId) AS span_id,
    CASE WHEN s.parentSpanId IS NULL OR regexp_full_match(s.parentSpanId, '0*') THEN NULL
         ELSE lower(s.parentSpanId) END AS parent_id,
    s.name ->> '$' AS name,
    json_type(s.name) AS name_type,
    {_enum_sql("s.kind", SPAN_KINDS, "SPAN_KIND_")} AS span_kind,
    TRY_CAST(s.startTimeUnixNano AS BIGINT) AS start_ns,
    TRY_CAST(s.endTimeUnixNano AS BIGINT) AS end_ns,
    coalesce({_enum_sql("s.status.code", STATUS, "STATUS_CODE_")}, 'UNSET') AS status,
    nullif(s.status.message, '') AS status_message,
    scope,
    {_entries_sql("s.attributes")} AS entries,
    {_MARKS} AS marks
  FROM spans
), keyed AS (
  SELECT *, list_transform(entries, lambda x: x.k) AS keys, list_transform(entries, lambda x: x.s) AS strings,
    {_FIRST_TOKEN_SQL} AS first_token_at, {_MARKS_OK} AS marks_ok
  FROM fields
), filtered AS (
  SELECT *,
    len(list_distinct(keys)) = len(keys) AS entries_ok,  -- no key unread (NULL), none repeated
    CASE WHEN list_has_any(keys, ['{A.CPU_NS}', '{A.THREAD_ID}'])
           OR regexp_matches(array_to_string(keys, chr(10)), '{{dropped_any}}')
      THEN list_filter(entries, lambda x: x.k NOT IN ('{A.CPU_NS}', '{A.THREAD_ID}')
        AND NOT {A.sensitive_sql("x.k")}{{content_each}})
      ELSE entries END AS kept
  FROM keyed
), checked AS (
  SELECT *, {aliases_sql("kept", "keys")} AS aliases FROM filtered
), classified AS (
  SELECT *,
    CASE WHEN len(aliases) = 0 THEN keys ELSE {_KEYS_AFTER_ALIASES} END AS all_keys
  FROM checked
), peered AS (
  SELECT *, list_has_any(keys, ['{LANGFUSE_USAGE}', '{LANGFUSE_FIRST_TOKEN}']) AS langfuse FROM classified
), langfuse_read AS (
  SELECT *,
    CASE WHEN langfuse THEN strings[list_position(keys, '{LANGFUSE_USAGE}')] END AS usage,
    CASE WHEN langfuse AND first_token_at IS NULL THEN strings[list_position(keys, '{LANGFUSE_FIRST_TOKEN}')]
      END AS started
  FROM peered
), langfuse_checked AS (
  SELECT *, CASE WHEN langfuse THEN {_PEER_OK} ELSE true END AS peer_ok FROM langfuse_read
), first_token AS (
  SELECT *,
    CASE WHEN usage IS NOT NULL AND peer_ok THEN from_json(usage, '{_USAGE_STRUCTURE}') END AS counts,
    coalesce(first_token_at, CASE WHEN started IS NOT NULL AND peer_ok THEN {_STARTED_NS} END) AS first_at
  FROM langfuse_checked
), timed AS (
  SELECT *,
    CASE WHEN first_at IS NOT NULL AND NOT list_contains(all_keys, '{A.GEN_AI_RESPONSE_TTFC}')
      THEN CASE WHEN first_at <= start_ns THEN 0.0 ELSE (first_at - start_ns) / 1e9 END END AS ttft
  FROM first_token
)
SELECT line,
  coalesce(
  resource_ok AND entries_ok
  AND {_HEX_ID.format("trace_id", 32)} AND {_HEX_ID.format("span_id", 16)}
  AND (parent_id IS NULL OR regexp_full_match(parent_id, '[0-9a-f]{{16}}'))
  AND name_type = 'VARCHAR' AND start_ns > 0 AND end_ns >= start_ns
  AND marks_ok AND peer_ok AND (ttft IS NULL OR {_PLAIN_DOUBLE.format("ttft")})
  , false) AS ok,
  trace_id, span_id, parent_id, name,
  {kind_sql(_value_of_sql("{key}"), "all_keys", "span_kind", "name")} AS kind,
  span_kind, start_ns, end_ns, status, status_message,
  service,
  scope,
  {_column_sql(A.THREAD_ID)} AS thread_id,
  {_column_sql(A.CPU_NS)} AS cpu_ns,
  CASE WHEN entries_ok THEN {_json_object_sql("kept", "aliases", _PEER_ENTRIES)} END AS attributes
FROM timed
"""
_CONTENT = A.content_pattern()


@functools.lru_cache(maxsize=2)
def query(keep_content: bool) -> str:
    """The parse query; content attributes (:func:`agentscope.attributes.is_content`) are dropped from
    the stored JSON unless ``keep_content`` (the kind is judged on every key either way).

    Whether a span may have an attribute to drop is one scan of its keys joined by newlines, the
    sensitive parts matched regardless of case and the content keys one a line; only the entries of a
    span that has one are judged one by one, the sensitive parts in the lowered key.  With two scans
    and a lowering of every span's keys, the step took a quarter longer.
    """
    dropped_any = f"(?m)(?i:{A.sensitive_pattern()})" + ("" if keep_content else f"|{_CONTENT}")
    each_content = f" AND NOT regexp_matches(x.k, '{_CONTENT}')"
    return _QUERY.replace("{dropped_any}", dropped_any).replace(
        "{content_each}", "" if keep_content else each_content
    )


def connect_parser() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB for parsing, apart from the store (its memory is its own), that hands rows
    back in their lines' order."""
    con = connect(":memory:")
    con.execute("SET memory_limit = '512MB'")
    con.execute("SET preserve_insertion_order = true")
    return con


def blocks(stream: IO[bytes]) -> Iterator[tuple[int, list[bytes]]]:
    """The stream's lines in blocks of about BLOCK_BYTES, with the number of each block's first line.

    The next block is read on a thread while the caller queries this one (DuckDB lets go of the GIL):
    200,000 rich spans one a line went in 3.8 s instead of 4.1 (medians of six alternating runs), 200
    a line in 2.64 s instead of 2.71.  A stream that fails part way (a truncated gzip) still yields
    the lines read before the failure, then raises it.
    """
    read = _blocks(stream)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentscope-read") as reader:
        ahead = reader.submit(next, read, None)
        while (block := ahead.result()) is not None:
            ahead = reader.submit(next, read, None)
            yield block


def _blocks(stream: IO[bytes]) -> Iterator[tuple[int, list[bytes]]]:
    """``blocks``, read on the caller's thread."""
    first, block, size = 1, [], 0
    failure: Exception | None = None
    try:
        for line in stream:
            block.append(line)
            size += len(line)
            if size >= BLOCK_BYTES:
                yield first, block
                first, block, size = first + len(block), [], 0
    except (EOFError, OSError, zlib.error) as exc:
        failure = exc
    if block:
        yield first, block
    if failure is not None:
        raise failure


LINES_SCHEMA = pa.schema([("line", pa.int64()), ("text", pa.large_string())])
"""What the query reads: lines by number."""
ROWS_PER_BATCH = 8 * VECTOR_ROWS
"""Rows a batch of the query's result: a few batches a block."""


@dataclass
class Parsed:
    """One block through the query: its lines, the rows it took (with their lines), the lines left to
    Python."""

    first: int
    block: list[bytes]
    table: pa.Table
    lines: list[int]
    routed: list[int]


@dataclass
class _Fed:
    """A block handed to the query: the lines it reads (``numbers``), those routed before parsing."""

    first: int
    block: list[bytes]
    numbers: list[int]
    routed: set[int]

    @property
    def end(self) -> int:
        """The number of the line after the block."""
        return self.first + len(self.block)


def parse_blocks(
    con: duckdb.DuckDBPyConnection, blocks: Iterable[tuple[int, list[bytes]]], keep_content: bool = False
) -> Iterator[Parsed]:
    """Block by block, in order: the rows (in ``spans`` column order) of the lines the query takes
    exactly, and the numbers of the others.

    All the blocks stream through one query, so its 18 KB of SQL are bound once rather than once a
    block (40 ms), and DuckDB's threads stay busy across a block's end: the query on 200,000 rich
    spans took 3.6 s instead of 4.4-4.9.  Rows come back in their lines' order, so a block's rows
    are all in once a later block's appear.  An error reading the stream (a truncated gzip) is raised
    after the blocks read before it.  If DuckDB fails (out of memory), the blocks not yet handed back
    and the rest go to the Python reader whole.
    """
    source = iter(blocks)
    fed: deque[_Fed] = deque()
    failure: list[Exception] = []

    def lines() -> Iterator[pa.RecordBatch]:  # pulled by a DuckDB thread as its scan needs them
        try:
            for first, block in source:
                item, table = _prepared(first, block)
                fed.append(item)
                yield from table.to_batches()
        except (EOFError, OSError, zlib.error) as exc:
            failure.append(exc)

    try:
        lines_read = pa.RecordBatchReader.from_batches(LINES_SCHEMA, lines())
        with _streamed(con, lines_read, query(keep_content)) as result:
            pending: list[pa.RecordBatch] = []
            for batch in result:
                line = arrays.numbers(batch.column(0))
                start = 0
                while len(line) and line[-1] >= fed[0].end:
                    cut = bisect_left(line, fed[0].end)
                    pending.append(batch.slice(start, cut - start))
                    yield _taken(fed.popleft(), pa.Table.from_batches(pending, result.schema))
                    pending, start = [], cut
                pending.append(batch.slice(start))
            while fed:
                yield _taken(fed.popleft(), pa.Table.from_batches(pending, result.schema))
                pending = []
    except (duckdb.OutOfMemoryException, duckdb.InvalidInputException):
        for item in fed:
            yield _whole_block_routed(item.first, item.block)
        for first, block in source:
            yield _whole_block_routed(first, block)
    if failure:
        raise failure[0]


def _prepared(first: int, block: list[bytes]) -> tuple[_Fed, pa.Table]:
    """A block as the query's lines, less those it cannot read (marked or not UTF-8)."""
    whole = b"".join(block)
    routed = _routed_before_parsing(first, block, whole)
    everyone = range(first, first + len(block))
    numbers = [n for n in everyone if n not in routed] if routed else list(everyone)
    try:
        texts = [block[n - first] for n in numbers] if routed else block
        lines = _lines_table(numbers, texts, whole if not routed else b"".join(texts))
    except pa.ArrowInvalid:  # not UTF-8: the Python reader names the line
        routed.update(n for n in numbers if not _utf8(block[n - first]))
        numbers = [n for n in numbers if n not in routed]
        texts = [block[n - first] for n in numbers]
        lines = _lines_table(numbers, texts, b"".join(texts))
    return _Fed(first, block, numbers, routed), lines


def _taken(item: _Fed, table: pa.Table) -> Parsed:
    """A block's rows from the query's ``table`` of them, less the lines it read but does not take."""
    untaken = _untaken(table, item.numbers)
    if untaken:  # a filter copies every column, so a block whose lines are all taken skips it
        table = table.filter(
            pc.invert(pc.is_in(table.column("line"), value_set=columns.column(sorted(untaken), pa.int64())))
        )
    rows = table.select(list(COLUMN_NAMES)).cast(ARROW_SCHEMA)
    return Parsed(
        item.first, item.block, rows, table.column("line").to_pylist(), sorted(item.routed | untaken)
    )


def _whole_block_routed(first: int, block: list[bytes]) -> Parsed:
    return Parsed(first, block, ARROW_SCHEMA.empty_table(), [], list(range(first, first + len(block))))


def _routed_before_parsing(first: int, block: list[bytes], whole: bytes) -> set[int]:
    """Lines that are blank, too long, or carry a marker of what the query does not read
    (``whole`` is the block's lines joined)."""
    escapes = b"\\" in whole and _ESCAPE_PREFIX in whole
    markers = [m for m in ROUTED_MARKERS if (escapes or not m.startswith(_ESCAPE_PREFIX)) and m in whole]
    if (
        not markers
        and max(map(len, block)) <= LONG_LINE_BYTES
        and all(block)
        and not any(map(bytes.isspace, block))
    ):
        return set()  # the usual block, told by loops in C
    return {
        first + i
        for i, line in enumerate(block)
        if len(line) > LONG_LINE_BYTES
        or not line
        or line.isspace()
        or (markers and any(m in line for m in markers))
    }


def _untaken(table: pa.Table, numbers: list[int]) -> set[int]:
    """Lines the query read but does not take: a span failed a check, a span is repeated in the
    block (the Python reader keeps the first and says so), or the line held no span at all."""
    line = table.column("line")
    bad = pc.filter(line, pc.invert(table.column("ok")))
    if pc.count_distinct(table.column("span_id")).as_py() < table.num_rows:  # rare: look closer
        repeated = table.group_by(["trace_id", "span_id"]).aggregate([("line", "count")])
        repeated = repeated.filter(pc.greater(repeated.column("line_count"), 1))
        if repeated.num_rows:
            twice = pc.is_in(table.column("span_id"), value_set=repeated.column("span_id"))
            bad = pa.concat_arrays([arrays.whole(bad), arrays.whole(pc.filter(line, twice))])
    untaken = set(pc.unique(bad).to_pylist())
    with_spans = set(pc.unique(line).to_pylist())
    if len(with_spans) < len(numbers):
        untaken.update(set(numbers) - with_spans)
    return untaken


def _lines_table(numbers: list[int], texts: list[bytes], joined: bytes) -> pa.Table:
    """Numbered lines as a table of small record batches, so DuckDB reads them in parallel.

    The text column is ``joined`` (the ``texts`` end to end) with the lines'
    offsets: no copy line by line, and Arrow's UTF-8 check over the whole buffer.
    Raises ``pa.ArrowInvalid`` if a line is not UTF-8.
    """
    offsets = array("q", [0])
    offsets.extend(accumulate(map(len, texts)))
    text = pa.LargeStringArray.from_buffers(len(texts), pa.py_buffer(offsets), pa.py_buffer(joined))
    text.validate(full=True)
    table = pa.table({"line": columns.column(numbers, pa.int64()), "text": text})
    per_batch = max(1, len(texts) * BATCH_BYTES // max(1, offsets[-1]))
    if per_batch * SHORT_LINES_MAX_BATCHES >= VECTOR_ROWS:
        per_batch = max(per_batch, VECTOR_ROWS)
    return pa.Table.from_batches(table.to_batches(max_chunksize=per_batch), schema=table.schema)


def _utf8(line: bytes) -> bool:
    try:
        line.decode()
    except UnicodeDecodeError:
        return False
    return True


@contextmanager
def _streamed(
    con: duckdb.DuckDBPyConnection, lines: pa.RecordBatchReader, sql: str
) -> Iterator[pa.RecordBatchReader]:
    """The query's rows for ``lines`` as they come; Ctrl-C in the query is a KeyboardInterrupt.

    The result is closed before ``lines`` is let go (DuckDB refuses while a result is open), also when
    the caller stops part way.
    """
    con.register("lines", lines)
    try:
        with con.sql(sql).to_arrow_reader(ROWS_PER_BATCH) as result:
            yield result
    except (duckdb.InterruptException, RuntimeError) as exc:
        if is_interrupt(exc):
            raise KeyboardInterrupt from None
        raise
    finally:
        con.unregister("lines")
