"""Read spans out of a store in the shape the analyzer takes (``analysis.batch.COLUMNS``).

The attributes the analyzer reads were typed as the spans were written
(``schema.TYPED_COLUMNS``), so a read parses no JSON.  Traces are read in
buckets (a hash of the trace id), each a batch of whole traces, so memory stays
bounded whatever the store's size.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Iterator
from itertools import pairwise
from typing import Any

import duckdb
import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from agentscope import attributes as A
from agentscope.store.arrays import int64_array, numbers
from agentscope.store.selection import Selection
from agentscope.store.store import Store

SPANS_PER_BUCKET = 50_000
"""Spans a batch of traces holds, about.  On a million rich spans and two workers, batches of 50,000
took 6-11% less time than batches of 100,000 (less memory each, so fewer page faults, and a shorter
wait on the last batch) and 25,000 more (each query scans the whole table to find its bucket)."""
PROBE_SERVICE = "agentscope-probe"
"""The service of ``agentscope probe``'s own calls: kept in the store, left out of the app's analysis."""
APP_SPANS = f"service IS DISTINCT FROM '{PROBE_SERVICE}'"

_SELECT = """
SELECT trace_id, span_id, parent_id, name, kind, span_kind, scope, start_ns, end_ns, status, thread_id,
    cpu_ns, operation, attempt, http_status, ttft_s, stream_wait_ns, server_queue_ms, server_prefill_ms,
    server_decode_ms, server_total_ms, task_name, accepted, input_tokens, output_tokens, cached_tokens,
    label{carry}
FROM agentscope_spans WHERE {where}
"""
ANALYSIS_SELECT = _SELECT.replace("{carry}", "")
"""The analyzer's columns for the spans matching ``{where}``."""
_IN_STORE_ORDER = _SELECT.replace("{carry}", ", row_in_store")
"""The same, and each span's row in the table, to put spans back in the order they were stored."""


def selected_traces(selection: Selection | None) -> tuple[str, list[Any]]:
    """A predicate over ``spans`` that keeps the traces which may hold a selected task, and its parameters.

    A superset, so that the exact task-level check (``Selection.admits``) loses
    nothing: the name is looked for on task-like spans (kind task or agent, or a
    root) as the analyzer names tasks; the window keeps traces with a span
    starting after ``since`` and one before ``until``.
    """
    if not selection:
        return "TRUE", []
    clauses: list[str] = []
    params: list[Any] = []
    if selection.service is not None:
        clauses.append(
            "trace_id IN (SELECT trace_id FROM spans WHERE service = ? "
            f"OR json_extract_string(attributes, '$.\"{A.SERVICE_NAME_OURS}\"') = ?)"
        )
        params += [selection.service, selection.service]
    if selection.task is not None:
        task_like = ANALYSIS_SELECT.format(where="(kind IN ('task', 'agent') OR parent_id IS NULL)")
        named = "coalesce(nullif(task_name, ''), label) = ?"
        clauses.append(f"trace_id IN (SELECT trace_id FROM ({task_like}) WHERE {named})")
        params.append(selection.task)
    if selection.since_ns is not None:
        clauses.append("trace_id IN (SELECT trace_id FROM spans GROUP BY trace_id HAVING max(start_ns) >= ?)")
        params.append(selection.since_ns)
    if selection.until_ns is not None:
        clauses.append("trace_id IN (SELECT trace_id FROM spans GROUP BY trace_id HAVING min(start_ns) < ?)")
        params.append(selection.until_ns)
    return " AND ".join(clauses), params


SPANS_PER_QUERY = 500_000
"""Spans one query reads at most, about (the first queries of a read fewer: ``_group_starts``), sorted
into their buckets by DuckDB: the sort holds them in memory.
Reading a million rich spans took 1.34-1.44 CPU-s in five queries of four buckets split with Arrow
(378 MB peak), 1.23-1.40 in two sorted queries (590 MB) and 1.09-1.20 in one (750 MB)."""


def buckets_for(store: Store, spans: int | None = None) -> int:
    """How many hash buckets keep each batch near ``SPANS_PER_BUCKET`` spans (of ``spans``, or of the
    whole store)."""
    return max(1, math.ceil((store.span_count() if spans is None else spans) / SPANS_PER_BUCKET))


IN_REGISTERED = "trace_id IN (SELECT trace_id FROM agentscope_traces)"
"""The rows of the traces registered as ``agentscope_traces`` (:func:`registered`)."""


@contextlib.contextmanager
def registered(con: duckdb.DuckDBPyConnection, traces: pa.Table) -> Iterator[str]:
    """``traces`` (a table with a ``trace_id`` column) visible to SQL on ``con`` as ``agentscope_traces``
    for the block, which gets the predicate that keeps their spans.

    With a ``first_ns`` column (each trace's earliest span start, ``trace_writes``), the predicate
    also keeps ``start_ns`` at or after the least of them: spans are stored roughly in time order,
    so DuckDB skips the row groups of older spans by their minimum and maximum without reading
    them, and the few traces just written are found without a scan of the whole table."""
    where = IN_REGISTERED
    if "first_ns" in traces.column_names and len(traces) and not traces["first_ns"].null_count:
        where += f" AND start_ns >= {int(pc.min(traces['first_ns']).as_py())}"
    con.register("agentscope_traces", traces)
    try:
        yield where
    finally:
        with contextlib.suppress(duckdb.ConnectionException):  # closed first, as an error unwound
            con.unregister("agentscope_traces")


def span_batches(
    store: Store, selection: Selection | None = None, traces: pa.Table | None = None, spans: int | None = None
) -> Iterator[pa.Table]:
    """Every trace in the store (or those ``selection`` may keep), as Arrow batches of whole traces.

    With ``traces`` (a table with a ``trace_id`` column), only those traces; ``spans`` is their span
    count, if known.  Within a batch, spans keep the order they were stored in: the walk breaks ties
    between spans of equal times by it, so every read of a store gives the same answers."""
    if traces is None:
        yield from _batches(store, selection, "TRUE", buckets_for(store))
        return
    with registered(store.con, traces) as of_traces:
        spans = span_count(store, of_traces) if spans is None else spans
        yield from _batches(store, selection, of_traces, buckets_for(store, spans))


def span_count(store: Store, where: str) -> int:
    """Spans matching ``where`` (the traces registered, say)."""
    return int(store.scalar(f"SELECT count(*) FROM spans WHERE {where}"))


def _batches(store: Store, selection: Selection | None, where: str, buckets: int) -> Iterator[pa.Table]:
    selected, params = selected_traces(selection)
    where = f"{APP_SPANS} AND {selected} AND {where}"
    if buckets == 1:
        yield store.con.sql(ANALYSIS_SELECT.format(where=where), params=params).to_arrow_table()
        return
    traces = store.con.sql(_TRACES.format(where=where), params=params).to_arrow_table()
    if not traces.num_rows:  # the selection keeps no trace
        return
    for group, first_ns, last_ns in _query_groups(traces):
        store.con.register("agentscope_buckets", group)
        try:
            spans = _IN_STORE_ORDER.format(where=f"{APP_SPANS} AND start_ns BETWEEN {first_ns} AND {last_ns}")
            sql = (
                f"SELECT s.* EXCLUDE (row_in_store), b.bucket FROM ({spans}) s "
                "JOIN agentscope_buckets b ON s.trace_id = b.trace_id ORDER BY b.bucket, s.row_in_store"
            )
            yield from _by_bucket(store.con.sql(sql).to_arrow_reader(SPANS_PER_BUCKET))
        finally:
            with contextlib.suppress(duckdb.ConnectionException):  # closed first, as an error unwound
                store.con.unregister("agentscope_buckets")


_TRACES = """
SELECT trace_id, count(*) AS spans, min(start_ns) AS first_ns, max(start_ns) AS last_ns
FROM agentscope_spans WHERE {where} GROUP BY trace_id ORDER BY first_ns, trace_id
"""
"""Each trace matching ``{where}``: its span count and the range of its spans' starts, earliest first."""


def _query_groups(traces: pa.Table) -> Iterator[tuple[pa.Table, int, int]]:
    """The traces (:data:`_TRACES`, at least one) in groups of at most about ``SPANS_PER_QUERY`` spans,
    the first ones smaller (:func:`_group_starts`), each a table of (trace_id, bucket) with buckets of
    about ``SPANS_PER_BUCKET`` spans, and the range of its spans' starts.

    Traces are taken in the order they began, so a group's spans lie in a narrow range of starts;
    spans are stored roughly in time order, so its query reads only the row groups of that range
    (DuckDB skips the others by their minimum and maximum).  A hash of the trace id would spread each
    batch over the whole table, and every query would read all of it: at ten million spans, twenty
    queries read 200 million rows to return ten million.  Out of order, a group's range is wider and
    its query reads more, never a wrong span."""
    spans = numbers(traces.column("spans"))
    before = np.cumsum(spans) - spans
    bucket = before // SPANS_PER_BUCKET
    group = np.searchsorted(_group_starts(int(bucket[-1]) + 1), bucket, side="right")
    first, last = numbers(traces.column("first_ns")), numbers(traces.column("last_ns"))
    edges = [0, *(np.flatnonzero(group[1:] != group[:-1]) + 1).tolist(), len(spans)]
    for a, z in pairwise(edges):
        ids = traces.column("trace_id").slice(a, z - a)
        table = pa.Table.from_arrays([ids, int64_array(bucket[a:z])], names=["trace_id", "bucket"])
        yield table, int(first[a:z].min()), int(last[a:z].max())


def _group_starts(buckets: int) -> np.ndarray:
    """The first bucket of each query's group after the first: a bucket, then twice as many as before
    each time, up to ``SPANS_PER_QUERY`` spans.

    A query's rows come back only once it has sorted them all, so the workers wait for the whole first
    query: small ones first hand them their first batches sooner.  On a million rich spans the first
    batch was out 0.36 s into the read instead of 0.6 s, and a first read took 2-3% less time
    (medians of alternating runs), though its five queries cost a little more than two."""
    most = max(1, SPANS_PER_QUERY // SPANS_PER_BUCKET)
    starts, size, at = [], 1, 1
    while at < buckets:
        starts.append(at)
        size = min(size * 2, most)
        at += size
    return np.array(starts, dtype=np.int64)


def _by_bucket(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.Table]:
    """The rows of each bucket in ``batches`` (sorted by their ``bucket`` column), less that column.

    A bucket's pieces are copied into one batch: a slice would pickle (to a worker) with all of the
    buffer it is cut from.
    """
    pieces: list[pa.RecordBatch] = []
    current = -1
    for batch in batches:
        if not batch.num_rows:
            continue
        bucket = numbers(batch.column("bucket"))
        batch = batch.drop_columns(["bucket"])
        edges = [0, *(np.flatnonzero(bucket[1:] != bucket[:-1]) + 1).tolist(), len(batch)]
        for a, z in pairwise(edges):
            if pieces and bucket[a] != current:
                yield pa.Table.from_batches([pa.concat_batches(pieces)])
                pieces = []
            current = bucket[a]
            pieces.append(batch.slice(a, z - a))
    if pieces:
        yield pa.Table.from_batches([pa.concat_batches(pieces)])


def llm_token_counts(store: Store) -> list[tuple[int, int]]:
    """(input, output) tokens of every recorded LLM call that has both (the probe's own calls left out)."""
    rows = store.con.execute(
        f"""
        SELECT input_tokens, output_tokens FROM agentscope_spans
        WHERE kind = 'llm' AND span_kind IS DISTINCT FROM 'SERVER' AND {APP_SPANS}
          AND input_tokens IS NOT NULL AND output_tokens IS NOT NULL
        """
    ).fetchall()
    return [(i, o) for i, o in rows]


def llm_call_intervals(store: Store) -> list[tuple[int, int]]:
    """(start, end) ns of every recorded LLM call that has token counts (the probe's own calls left out):
    when the app had calls in flight."""
    return store.con.execute(
        f"""
        SELECT start_ns, end_ns FROM agentscope_spans
        WHERE kind = 'llm' AND span_kind IS DISTINCT FROM 'SERVER' AND {APP_SPANS}
          AND output_tokens IS NOT NULL
        """
    ).fetchall()


def trace_spans(store: Store, trace_id: str) -> pa.Table:
    """One trace's spans in the analyzer's columns."""
    return store.con.sql(ANALYSIS_SELECT.format(where="trace_id = ?"), params=[trace_id]).to_arrow_table()


def span_details(store: Store, trace_id: str) -> dict[str, dict[str, Any]]:
    """Span id → status, service and attributes (decoded) of one trace, for a reader who clicks a span."""
    rows = store.con.execute(
        "SELECT span_id, status, status_message, service, attributes FROM spans WHERE trace_id = ?",
        [trace_id],
    ).fetchall()
    return {
        span_id: {
            "status": status,
            "status_message": message,
            "service": service,
            "attributes": orjson.loads(attributes) if attributes else {},
        }
        for span_id, status, message, service, attributes in rows
    }


def span_overview(store: Store) -> dict[str, Any]:
    """What the spans tell a reader picking a selection: how many, of how many traces, from when to
    when (the task names and services are the task table's: :func:`agentscope.store.tasks.names_of`)."""
    spans, first, last = store.con.sql(
        f"SELECT count(*), min(start_ns), max(end_ns) FROM spans WHERE {APP_SPANS}"
    ).fetchall()[0]
    return {"spans": spans, "traces": store.trace_count(), "first_ns": first, "last_ns": last}
