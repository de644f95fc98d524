"""The store's tables, in one place: DDL, the Arrow schema of a batch, the version.

A store is a DuckDB file.  ``spans`` holds one row per span, keyed by
(trace_id, span_id) so that writing the same span twice stores it once.  The
columns the analyzer reads on every span (kind, times, thread, CPU) are columns;
everything else stays in ``attributes``, a JSON object.  ``agentscope_meta``
records the schema version and the write sequence.

The second level (DESIGN §15): ``trace_writes`` gives each trace the sequence
number of the last write that added spans to it; ``tasks`` keeps each analysed
task's result and ``task_traces`` the sequence number and analysis version each
trace was analysed at, so a reader analyses only the traces written since.
docs/store.md describes every table.
"""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 2
"""1: spans and meta.  2: the task table (``trace_writes``, ``task_traces``, ``tasks``); a version 1 store
is migrated in place when it is first opened for writing."""

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

TASK_COLUMNS: tuple[tuple[str, str, pa.DataType], ...] = (
    ("trace_id", "VARCHAR NOT NULL", pa.string()),
    ("span_id", "VARCHAR NOT NULL", pa.string()),
    ("name", "VARCHAR NOT NULL", pa.string()),
    ("services", "VARCHAR[]", pa.list_(pa.string())),
    ("start_ns", "BIGINT NOT NULL", pa.int64()),
    ("duration_ns", "BIGINT NOT NULL", pa.int64()),
    ("accepted", "BOOLEAN NOT NULL", pa.bool_()),
    ("components", "DOUBLE[] NOT NULL", pa.list_(pa.float64())),
    ("whatif_ns", "DOUBLE[] NOT NULL", pa.list_(pa.float64())),
    ("operations", "VARCHAR NOT NULL", pa.string()),
    ("models", "VARCHAR NOT NULL", pa.string()),
    ("serial_llm_calls", "INTEGER NOT NULL", pa.int32()),
    ("llm_calls", "INTEGER NOT NULL", pa.int32()),
    ("input_tokens", "BIGINT NOT NULL", pa.int64()),
    ("output_tokens", "BIGINT NOT NULL", pa.int64()),
    ("cached_tokens", "BIGINT NOT NULL", pa.int64()),
    ("repaired", "INTEGER NOT NULL", pa.int32()),
    ("calls_without_tokens", "INTEGER NOT NULL", pa.int32()),
)
"""(column, DuckDB type, Arrow type) of the ``tasks`` table: ``TaskResult``'s fields as the Spark path's
per-task table has them (``operations`` and ``models`` as JSON objects), and the trace's services."""
TASK_ARROW_SCHEMA = pa.schema([(name, arrow_type) for name, _, arrow_type in TASK_COLUMNS])
ARROW_SCHEMA = pa.schema([(name, arrow_type) for name, _, arrow_type in COLUMNS])

DDL = (
    "CREATE TABLE IF NOT EXISTS agentscope_meta (key VARCHAR PRIMARY KEY, value VARCHAR)",
    "CREATE TABLE IF NOT EXISTS spans ("
    + ", ".join(f"{name} {sql_type}" for name, sql_type, _ in COLUMNS)
    + ", PRIMARY KEY (trace_id, span_id))",
    "CREATE TABLE IF NOT EXISTS trace_writes (trace_id VARCHAR PRIMARY KEY, seq BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS task_traces ("
    "trace_id VARCHAR PRIMARY KEY, seq BIGINT NOT NULL, version VARCHAR NOT NULL, tasks INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS tasks ("
    + ", ".join(f"{name} {sql_type}" for name, sql_type, _ in TASK_COLUMNS)
    + ")",
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
