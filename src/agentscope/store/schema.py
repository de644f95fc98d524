"""The store's tables, in one place: DDL, the Arrow schema of a batch, the version.

A store is a DuckDB file.  ``spans`` holds one row per span, keyed by
(trace_id, span_id) so that writing the same span twice stores it once.  The
columns the analyzer reads on every span (kind, times, thread, CPU) are columns;
everything else stays in ``attributes``, a JSON object.  ``agentscope_meta``
records the schema version; docs/store.md describes both tables.
"""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 1

COLUMNS: tuple[tuple[str, str, pa.DataType], ...] = (
    ("trace_id", "VARCHAR NOT NULL", pa.string()),
    ("span_id", "VARCHAR NOT NULL", pa.string()),
    ("parent_id", "VARCHAR", pa.string()),
    ("name", "VARCHAR NOT NULL", pa.string()),
    ("kind", "VARCHAR NOT NULL", pa.string()),
    ("span_kind", "VARCHAR", pa.string()),
    ("start_ns", "BIGINT NOT NULL", pa.int64()),
    ("end_ns", "BIGINT NOT NULL", pa.int64()),
    ("status", "VARCHAR", pa.string()),
    ("status_message", "VARCHAR", pa.string()),
    ("service", "VARCHAR", pa.string()),
    ("scope", "VARCHAR", pa.string()),
    ("thread_id", "BIGINT", pa.int64()),
    ("cpu_ns", "BIGINT", pa.int64()),
    ("attributes", "JSON", pa.string()),
)
"""(column, DuckDB type, Arrow type) of the spans table, in order."""

COLUMN_NAMES = tuple(name for name, _, _ in COLUMNS)
ARROW_SCHEMA = pa.schema([(name, arrow_type) for name, _, arrow_type in COLUMNS])

DDL = (
    "CREATE TABLE IF NOT EXISTS agentscope_meta (key VARCHAR PRIMARY KEY, value VARCHAR)",
    "CREATE TABLE IF NOT EXISTS spans ("
    + ", ".join(f"{name} {sql_type}" for name, sql_type, _ in COLUMNS)
    + ", PRIMARY KEY (trace_id, span_id))",
)


def rows_to_table(rows: list[tuple]) -> pa.Table:
    """An Arrow batch of ``spans`` rows (tuples in COLUMNS order)."""
    columns = list(zip(*rows, strict=True)) if rows else [[] for _ in COLUMNS]
    return pa.Table.from_arrays(
        [
            pa.array(column, type=arrow_type)
            for column, (_, _, arrow_type) in zip(columns, COLUMNS, strict=True)
        ],
        schema=ARROW_SCHEMA,
    )
