"""The store's tables, in one place: DDL, the Arrow schema of a batch, the version.

A store is a DuckDB file.  ``spans`` holds one row per span, keyed by
(trace_id, span_id) so that writing the same span twice stores it once.  A
writer gives the columns of :data:`COLUMNS` (kind, times, thread, CPU, and
``attributes``, a JSON object); the store adds :data:`TYPED_COLUMNS`, the
attributes the analyzer reads on every span, typed, as each span is written, so
that no read parses the JSON again.  ``agentscope_meta`` records the schema
version and the write sequence.

The second level (DESIGN §15): ``trace_writes`` gives each trace the sequence
number of the last write that added spans to it, and its earliest span start; ``tasks`` keeps each analysed
task's result and ``task_traces`` the sequence number and analysis version each
trace was analysed at, so a reader analyses only the traces written since.
docs/store.md describes every table.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import orjson
import pyarrow as pa

from agentscope import attributes as A
from agentscope.store.columns import column

SCHEMA_VERSION = 5
"""1: spans and meta.  2: the task table (``trace_writes``, ``task_traces``, ``tasks``).  3: the typed
columns of ``spans`` (:data:`TYPED_COLUMNS`) and each trace's earliest span start
(``trace_writes.first_ns``).  4: the task table's what-if times in columns of their own
(:data:`WHATIF_COLUMNS`).  5: a what-if on its line is null (:data:`LINE_TOLERANCE`).  An older store
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

ATTRIBUTE_FIELDS = (
    ("operation", A.GEN_AI_OPERATION_NAME, "VARCHAR"),
    ("attempt", A.ATTEMPT, "BIGINT"),
    ("http_status", A.HTTP_RESPONSE_STATUS_CODE, "BIGINT"),
    ("ttft_s", A.GEN_AI_RESPONSE_TTFC, "DOUBLE"),
    ("stream_wait_ns", A.STREAM_WAIT_NS, "BIGINT"),
    ("server_queue_ms", A.SERVER_QUEUE_MS, "DOUBLE"),
    ("server_prefill_ms", A.SERVER_PREFILL_MS, "DOUBLE"),
    ("server_decode_ms", A.SERVER_DECODE_MS, "DOUBLE"),
    ("server_total_ms", A.SERVER_TOTAL_MS, "DOUBLE"),
    ("task_name", A.TASK_NAME, "VARCHAR"),
    ("accepted", A.TASK_ACCEPTED, "BOOLEAN"),
    ("input_tokens", A.GEN_AI_USAGE_INPUT_TOKENS, "BIGINT"),
    ("output_tokens", A.GEN_AI_USAGE_OUTPUT_TOKENS, "BIGINT"),
    ("cached_tokens", A.GEN_AI_USAGE_CACHED_INPUT_TOKENS, "BIGINT"),
)
"""(column, attribute key, DuckDB type) of the attributes kept as typed columns; a value that does not
cast is NULL, as a missing one."""
_LABEL_KEYS = (
    A.GEN_AI_TOOL_NAME,
    A.GEN_AI_REQUEST_MODEL,
    A.GEN_AI_RESPONSE_MODEL,
    A.DB_SYSTEM_NAME,
    "db.system",
    A.DB_OPERATION_NAME,
    A.SERVER_ADDRESS,
    "net.peer.name",
)
"""The attributes a span's label is made of."""


def _v(key: str) -> str:
    return f'agentscope_v."{key}"'


_DB_SYSTEM = f"coalesce({_v(A.DB_SYSTEM_NAME)}, {_v('db.system')})"
_LABEL = f"""CASE kind
        WHEN 'tool' THEN coalesce({_v(A.GEN_AI_TOOL_NAME)}, name)
        WHEN 'llm' THEN coalesce({_v(A.GEN_AI_RESPONSE_MODEL)}, {_v(A.GEN_AI_REQUEST_MODEL)}, name)
        WHEN 'db' THEN coalesce({_DB_SYSTEM} || ' ' || {_v(A.DB_OPERATION_NAME)}, {_DB_SYSTEM}, name)
        WHEN 'http' THEN coalesce({_v(A.SERVER_ADDRESS)}, {_v("net.peer.name")}, name)
        ELSE name
    END"""
"""The operation's name: tool name, model, DB system and operation, HTTP host, else the span's name."""

TYPED_COLUMNS: tuple[tuple[str, str], ...] = (
    *((name, sql_type) for name, _, sql_type in ATTRIBUTE_FIELDS),
    ("label", "VARCHAR"),
)
"""(column, DuckDB type) of what the store derives from each span's attributes as it is written."""
TYPED_NAMES = tuple(name for name, _ in TYPED_COLUMNS)

_AS_TEXT = orjson.dumps(
    {key: "VARCHAR" for key in (*(key for _, key, _ in ATTRIBUTE_FIELDS), *_LABEL_KEYS)}
).decode()
"""``json_transform``'s structure: every key read as text, as ``json_extract_string`` reads it (a number's
text, an object's or array's JSON), in one pass over the document, a third less CPU than a list of paths.
One difference: a number with an exponent is written ``1e-07`` where ``json_extract_string`` writes
``1e-7``; cast to a number it is the same, and in a key read as text (a model or tool name) it is only
spelled differently."""


def typed_rows(source: str, *, row_in_store: bool = False) -> str:
    """SQL for the rows of ``source`` (a relation with the :data:`COLUMNS`) with their typed columns
    (:data:`TYPED_COLUMNS`) derived from the attributes; with ``row_in_store``, each row's ``rowid``
    too, as ``row_in_store`` (``source`` must then be a table)."""
    columns = ", ".join(COLUMN_NAMES)
    typed = ", ".join(
        [f"TRY_CAST({_v(key)} AS {sql_type}) AS {name}" for name, key, sql_type in ATTRIBUTE_FIELDS]
        + [f"{_LABEL} AS label"]
    )
    inner, outer = (", rowid AS row_in_store", ", row_in_store") if row_in_store else ("", "")
    return (
        f"SELECT {columns}, {typed}{outer} FROM "
        f"(SELECT {columns}{inner}, json_transform(attributes, '{_AS_TEXT}') AS agentscope_v FROM {source})"
    )


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
_BLAME_SPEEDUPS = (1.7, 3.6, math.inf)
_CURVE_SPEEDUPS = (1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, math.inf)
WHATIF_FACTORS: tuple[tuple[float, bool], ...] = tuple(
    (factor, pessimistic) for factor in (*_BLAME_SPEEDUPS, *_CURVE_SPEEDUPS) for pessimistic in (False, True)
)
"""The what-if times a row of the store's ``tasks`` table keeps, as (inference speedup, pessimistic): the
variants of ``analysis.pipeline.ROW_VARIANTS``, in order (a test holds them equal): blame's three
defaults, then the budget's curve."""
WHATIF_COLUMNS = tuple(f"whatif_{i}" for i in range(len(WHATIF_FACTORS)))
"""The store's ``tasks`` columns of a row's what-if times, in ``whatif_ns`` order.

A list column is stored as one run of its values: a reader of six of 38 what-ifs reads and
decompresses all 38 (at 500,000 tasks, 152 MB, 0.11 s of a reader's 0.25 s SQL), where six columns
of their own are 18 ms.  Readers still see the per-task table's ``whatif_ns`` list
(:func:`whatif_list`)."""
LINE_TOLERANCE = 1e-12
"""How far, per ns of the task's duration, a what-if may lie from its line and be kept as the line.

A task's duration with inference sped up f times is convex in 1/f, and a line in it when the critical
path's shape does not change with the speedup: most agent tasks, whose model calls follow one another.
On the line, it is the inference limit (f = ∞) plus what remains of the rest, 1/f of it.  A kept
what-if on its line is stored as null and read as the line, so that such a row keeps its inference
limits, not 38 what-ifs.  The analysis puts what-ifs this close on their lines
(``analysis.whatif.on_lines``), so that what a row gives back is what the analysis made: the
simulation's sums differ from the line's in the last bits."""
_LIMITS = {pessimistic: WHATIF_FACTORS.index((math.inf, pessimistic)) for pessimistic in (False, True)}
"""The columns of the inference limit, optimistic and pessimistic: the anchors of every line."""


def _line(k: int, whatif: Callable[[int], str]) -> str | None:
    """SQL for the k-th kept what-if's line, given SQL for the i-th what-if (``whatif(i)``); None for the
    optimistic inference limit, which has none.  The pessimistic limit's line is the optimistic one:
    the two are the same where no inference time is unsplit."""
    factor, pessimistic = WHATIF_FACTORS[k]
    if k == _LIMITS[False]:
        return None
    if k == _LIMITS[True]:
        return whatif(_LIMITS[False])
    if factor == 1:
        return "duration_ns::DOUBLE"
    limit = whatif(_LIMITS[pessimistic])
    if factor == math.inf:
        return limit
    return f"({limit} + (duration_ns - {limit}) / {factor!r}::DOUBLE)"


def _kept(k: int) -> str:
    """SQL for the k-th what-if of a stored row: its column, or its line where that is null."""
    line = _line(k, _kept)
    return WHATIF_COLUMNS[k] if line is None else f"coalesce({WHATIF_COLUMNS[k]}, {line})"


def whatif_list(picks: Sequence[int] | None = None) -> str:
    """SQL for a stored row's what-if times (those at ``picks``, 0-based, in that order, where given) as
    the list of the per-task table's ``whatif_ns``."""
    chosen = range(len(WHATIF_COLUMNS)) if picks is None else picks
    return f"[{', '.join(_kept(k) for k in chosen)}]::DOUBLE[]"


def _stored(k: int) -> str:
    """SQL for the k-th what-if of a per-task row (a ``whatif_ns`` list) as its column keeps it: null on its
    line (within :data:`LINE_TOLERANCE`; the pessimistic limit only where it equals the optimistic)."""
    value = f"whatif_ns[{k + 1}]"
    line = _line(k, lambda i: f"whatif_ns[{i + 1}]")
    if line is None:
        return value
    if k == _LIMITS[True]:
        return f"CASE WHEN {value} = {line} THEN NULL ELSE {value} END"
    near = f"abs({value} - {line}) <= {LINE_TOLERANCE!r}::DOUBLE * duration_ns"
    return f"CASE WHEN {near} THEN NULL ELSE {value} END"


INSERT_TASK_ROWS = "INSERT INTO tasks BY NAME SELECT * EXCLUDE (whatif_ns), " + ", ".join(
    f"{_stored(i)} AS {name}" for i, name in enumerate(WHATIF_COLUMNS)
)
"""SQL that inserts rows as the per-task table has them (a ``whatif_ns`` list) into the store's ``tasks``,
each what-if in its column, null on its line (and past the list's end): append ``FROM`` and the rows'
relation."""


TASK_ROWS = ", ".join(
    f"{whatif_list()} AS whatif_ns" if name == "whatif_ns" else name for name in TASK_ARROW_SCHEMA.names
)
"""SQL for the store's ``tasks`` rows as the per-task table's: ``SELECT {TASK_ROWS} FROM tasks``."""
TASKS_DDL = (
    "CREATE TABLE IF NOT EXISTS tasks ("
    + ", ".join(
        f"{name} {sql_type}" if name != "whatif_ns" else ", ".join(f"{w} DOUBLE" for w in WHATIF_COLUMNS)
        for name, sql_type, _ in TASK_COLUMNS
    )
    + ")"
)
"""The store's ``tasks`` table: :data:`TASK_COLUMNS`, ``whatif_ns`` as :data:`WHATIF_COLUMNS`."""
ARROW_SCHEMA = pa.schema([(name, arrow_type) for name, _, arrow_type in COLUMNS])

SPANS_DDL = (
    "CREATE TABLE IF NOT EXISTS {table} ("
    + ", ".join(
        [f"{name} {sql_type}" for name, sql_type, _ in COLUMNS]
        + [f"{name} {sql_type}" for name, sql_type in TYPED_COLUMNS]
    )
    + ", PRIMARY KEY (trace_id, span_id))"
)
"""The spans table, named ``{table}``."""

TRACE_WRITES_DDL = (
    "CREATE TABLE IF NOT EXISTS trace_writes "
    "(trace_id VARCHAR PRIMARY KEY, seq BIGINT NOT NULL, first_ns BIGINT NOT NULL)"
)
"""Each trace's last write (its sequence number) and earliest span start."""

STORE_TABLES = ("spans", "trace_writes", "task_traces", "tasks")
"""The tables of a store besides ``agentscope_meta``, which marks a DuckDB file as one."""
DDL = (
    "CREATE TABLE IF NOT EXISTS agentscope_meta (key VARCHAR PRIMARY KEY, value VARCHAR)",
    SPANS_DDL.format(table="spans"),
    TRACE_WRITES_DDL,
    "CREATE TABLE IF NOT EXISTS task_traces ("
    "trace_id VARCHAR PRIMARY KEY, seq BIGINT NOT NULL, version VARCHAR NOT NULL, tasks INTEGER NOT NULL)",
    TASKS_DDL,
)


def rows_to_table(rows: list[tuple]) -> pa.Table:
    """An Arrow batch of ``spans`` rows (tuples in COLUMNS order), built from buffers
    (``store.columns.column``): ``pa.array`` of Python values imports pandas, which an app recording
    spans would then carry (about 50 MB and a third of a CPU-second on its writer thread)."""
    columns = list(zip(*rows, strict=True)) if rows else [[] for _ in COLUMNS]
    return pa.Table.from_arrays(
        [column(values, arrow_type) for values, (_, _, arrow_type) in zip(columns, COLUMNS, strict=True)],
        schema=ARROW_SCHEMA,
    )
