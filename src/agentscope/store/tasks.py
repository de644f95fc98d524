"""The task table's SQL (DESIGN §15): which traces need analysing, the rows a selection keeps, writing
rows back.

Every write that adds spans gives their traces the next sequence number (``trace_writes``); a trace
whose analysis (``task_traces``) has an older number, or another analysis version, is analysed again.
These functions take an open store and Arrow tables; what a row holds is the analysis' business
(``agentscope.analysis.rows``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from agentscope import attributes as A
from agentscope.store.columns import column
from agentscope.store.query import IN_REGISTERED, PROBE_SERVICE, registered, span_count
from agentscope.store.schema import INSERT_TASK_ROWS, TASK_ARROW_SCHEMA, whatif_list
from agentscope.store.selection import Selection
from agentscope.store.store import Store

_CHANGED = """
SELECT w.trace_id, w.seq, w.first_ns FROM trace_writes w LEFT JOIN task_traces t USING (trace_id)
WHERE w.seq > ? AND (t.trace_id IS NULL OR t.seq <> w.seq OR t.version <> ?)
"""
_MARKS_EQUAL = """
SELECT (SELECT ({marks}) FROM trace_writes WHERE seq > ?)
     = (SELECT ({marks}) FROM task_traces WHERE seq > ? AND version = ?)
"""
_ALL_CURRENT = [
    _MARKS_EQUAL.format(marks=marks)
    for marks in ("count(*), coalesce(sum(seq), 0)", "coalesce(sum(hash(trace_id, seq)), 0)")
]
"""Whether every trace written after a write (the parameter) was analysed at its last write by this
version, from scans of each table's marks: the join that finds which were not builds a hash table of
every trace (at 500,000 traces, 25 ms against 40-90).  The counts and sums come first: when traces
changed they mostly differ, and the hashes (most of the 25 ms) are not computed.

A trace's analysis mark is never newer than its write mark (rows are kept at the write they were read
at, and a trace's marks are deleted together).  So when the traces this version analysed after the
write are as many as those written after it, they are the same traces, and equal sums of their
sequence numbers leave none analysed before its last write.  The sums of a hash of each mark guard a
store whose marks break that rule."""
_SERVICES = f"""
SELECT trace_id, list(DISTINCT s ORDER BY s) AS services FROM (
    SELECT trace_id, service AS s FROM spans WHERE {{spans}}
    UNION ALL
    SELECT trace_id, json_extract_string(attributes, '$."{A.SERVICE_NAME_OURS}"') FROM spans
    WHERE {{spans}} AND attributes LIKE '%{A.SERVICE_NAME_OURS}%'
) WHERE s IS NOT NULL GROUP BY trace_id
"""
NO_SERVICES = pa.Table.from_arrays(
    [column([], pa.string()), column([], pa.list_(pa.string()))], names=["trace_id", "services"]
)
""":func:`trace_services` of no trace (built from buffers: ``Schema.empty_table`` imports pandas)."""
_KEPT_SINCE = "SELECT trace_id FROM task_traces WHERE seq > ?"
"""The traces whose rows were kept after a write (its sequence number the parameter)."""
_ANALYSED_TRACES = pa.schema([("trace_id", pa.string()), ("seq", pa.int64())])
NOT_CHANGED = pa.Table.from_arrays(
    [column([], pa.string()), column([], pa.int64()), column([], pa.int64())],
    names=["trace_id", "seq", "first_ns"],
)
""":func:`changed_traces` when no trace changed."""


def changed_traces(store: Store, version: str, since: int | None = None) -> pa.Table:
    """(trace_id, seq, first_ns) of every trace written since its analysis, or analysed by another
    version; with ``since``, only of those written after that write (a reader that holds the rows of
    every trace as it stood then needs no others: at 500,000 traces a third of the time).  When none
    is, the marks' counts and sums say so without the join (``_ALL_CURRENT``)."""
    after = -1 if since is None else since  # a migrated store's traces were all written at 0
    if all(store.con.execute(sql, [after, after, version]).fetchall()[0][0] for sql in _ALL_CURRENT):
        return NOT_CHANGED
    return store.con.sql(_CHANGED, params=[after, version]).to_arrow_table()


def trace_services(store: Store, traces: pa.Table) -> pa.Table:
    """(trace_id, services) of the traces that name any: the services their spans name
    (``service.name``, or agentscope's own beside another).

    On a connection of its own to the store, so that it may run in another thread beside a read of
    the same traces' spans: at a million spans it scans 0.15 CPU-s of attributes."""
    con = store.con.cursor()
    try:
        with registered(con, traces) as of_traces:
            return con.sql(_SERVICES.format(spans=of_traces)).to_arrow_table()
    finally:
        con.close()


def names_of(rows: pa.Table) -> tuple[list[str], list[str]]:
    """The task names of task-table ``rows`` and the services of their traces (but agentscope's probe),
    each sorted: what a reader picks a selection from."""
    names = pc.unique(rows.column("name")).to_pylist()
    services = pc.unique(pc.list_flatten(rows.column("services"))).to_pylist()
    return sorted(names), sorted(s for s in services if s is not None and s != PROBE_SERVICE)


def span_count_of(store: Store, traces: pa.Table) -> int:
    """Spans stored for these traces."""
    with registered(store.con, traces) as of_traces:
        return span_count(store, of_traces)


def kept_since(store: Store, since: int) -> pa.Table:
    """(trace_id) of the traces whose rows were kept after write ``since``, selected or not: a reader
    holding their earlier rows drops those, even where the new rows fall outside its selection."""
    return store.con.sql(_KEPT_SINCE, params=[since]).to_arrow_table()


def _where(selection: Selection | None, skip: pa.Table | None, since: int | None) -> tuple[str, list[Any]]:
    """The clauses of :func:`selected_rows` that choose rows, and their parameters."""
    clauses = ["TRUE" if not _skips(skip) else f"NOT {IN_REGISTERED}"]
    params: list[Any] = []
    if since is not None:
        clauses.append(f"trace_id IN ({_KEPT_SINCE})")
        params.append(since)
    if selection is not None:
        for value, clause in (
            (selection.task, "name = ?"),
            (selection.service, "list_contains(services, ?)"),
            (selection.since_ns, "start_ns >= ?"),
            (selection.until_ns, "start_ns < ?"),
        ):
            if value is not None:
                clauses.append(clause)
                params.append(value)
    return " AND ".join(clauses), params


_OPERATIONS_BETWEEN = """
LEFT JOIN (SELECT rowid AS agentscope_row, operations AS agentscope_operations FROM tasks
           WHERE duration_ns BETWEEN {low} AND {high})
ON rowid = agentscope_row AND duration_ns BETWEEN {low} AND {high}
"""
"""The ``operations`` of the rows whose duration lies between two bounds, by row id within one query:
DuckDB reads the text of those rows only, where a scan of the column reads every row's (at 500,000
tasks about 190 MB, a third of a report's read)."""


def selected_rows(
    store: Store,
    selection: Selection | None,
    skip: pa.Table | None = None,
    whatifs: list[int] | None = None,
    since: int | None = None,
    table: str = "tasks",
    columns: Sequence[str] | None = None,
    operations_between: tuple[int, int] | None = None,
) -> pa.Table:
    """The rows of ``table`` (the store's, or an Arrow table of rows registered under that name) that
    ``selection`` keeps, as the per-task table has them (``analysis.rows``), less those of the traces in
    ``skip`` (being analysed again); with ``whatifs``, only those what-if times of each row, in that order
    (0-based); with ``since``, only the rows of traces analysed at a later write than that sequence
    number.  Only the ``columns`` given, in that order (every column where not given); with
    ``operations_between`` (the store's table only), ``operations`` only of the rows whose duration lies
    between these bounds, null elsewhere.

    The selection is exact on rows: a task's name, its start in the window, a service among its
    trace's services."""
    where, params = _where(selection, skip, since)
    chosen = {name: name for name in columns or TASK_ARROW_SCHEMA.names}
    if "whatif_ns" in chosen and table == "tasks":  # the store's: a column each (``WHATIF_COLUMNS``)
        chosen["whatif_ns"] = whatif_list(whatifs)
    elif "whatif_ns" in chosen and whatifs is not None:  # a row keeps dozens; a report reads a few
        chosen["whatif_ns"] = f"list_select(whatif_ns, {[i + 1 for i in whatifs]}::INTEGER[])"
    join = ""
    if operations_between is not None and "operations" in chosen:
        chosen["operations"] = "agentscope_operations"
        low, high = (int(bound) for bound in operations_between)
        join = _OPERATIONS_BETWEEN.format(low=low, high=high)
    exprs = ", ".join(name if expr == name else f"{expr} AS {name}" for name, expr in chosen.items())
    return _rows(store, f"SELECT {exprs} FROM {table} {join} WHERE {where}", params, skip)


def selected_durations(
    store: Store, selection: Selection | None, skip: pa.Table | None = None
) -> pa.ChunkedArray:
    """The ``duration_ns`` of the rows :func:`selected_rows` would read: what a reader places the
    budget's window with before it reads the rest."""
    where, params = _where(selection, skip, None)
    return _rows(store, f"SELECT duration_ns FROM tasks WHERE {where}", params, skip).column(0)


def _skips(skip: pa.Table | None) -> bool:
    """Whether ``skip`` holds a trace: an anti-join with none still reads every row's trace id (on
    500,000 rows, a query of their durations took 15-27 ms with it, 3-7 ms without)."""
    return skip is not None and len(skip) > 0


def _rows(store: Store, sql: str, params: list[Any], skip: pa.Table | None) -> pa.Table:
    """What ``sql`` selects, with the traces in ``skip`` registered for its clauses (:func:`_where`)."""
    if not _skips(skip):
        return store.con.sql(sql, params=params).to_arrow_table()
    with registered(store.con, skip):
        return store.con.sql(sql, params=params).to_arrow_table()


def write_rows(store: Store, rows: pa.Table, analysed: pa.Table, version: str) -> int:
    """Keep the rows of freshly analysed traces: ``analysed`` is (trace_id, seq) of each, as they were
    read (its other columns are ignored).  A trace another reader has meanwhile kept at a newer
    sequence is left as it is, and one no longer stored (pruned since it was read) is left out; the
    traces whose rows were replaced are counted."""
    store.con.register("agentscope_rows", rows.select(TASK_ARROW_SCHEMA.names).cast(TASK_ARROW_SCHEMA))
    store.con.register("agentscope_analysed", analysed.select(_ANALYSED_TRACES.names).cast(_ANALYSED_TRACES))
    try:
        with store.transaction():
            store.con.execute(
                "CREATE OR REPLACE TEMP TABLE agentscope_newer AS "
                "SELECT a.trace_id, a.seq, coalesce(n.tasks, 0)::INTEGER AS tasks FROM agentscope_analysed a "
                "JOIN trace_writes USING (trace_id) "
                "LEFT JOIN task_traces t USING (trace_id) "
                "LEFT JOIN (SELECT trace_id, count(*) AS tasks FROM agentscope_rows GROUP BY trace_id) n "
                "USING (trace_id) "
                "WHERE t.trace_id IS NULL OR t.seq < a.seq OR t.version <> ?",
                [version],
            )
            newer = "trace_id IN (SELECT trace_id FROM agentscope_newer)"
            store.con.execute(f"DELETE FROM tasks WHERE {newer}")
            store.con.execute(f"{INSERT_TASK_ROWS} FROM agentscope_rows WHERE {newer}")
            store.con.execute(
                "INSERT OR REPLACE INTO task_traces SELECT trace_id, seq, ?, tasks FROM agentscope_newer",
                [version],
            )
            kept = int(store.scalar("SELECT count(*) FROM agentscope_newer"))
            store.con.execute("DROP TABLE agentscope_newer")
        return kept
    finally:
        store.con.unregister("agentscope_rows")
        store.con.unregister("agentscope_analysed")
