"""The per-task table's rows: ``TaskResult`` objects to columns and back (DESIGN §15).

One shape serves the store's ``tasks`` table and the Spark path's per-task table:
``TaskResult``'s fields, with ``operations`` and ``models`` as JSON objects
(orjson keeps their order, which decides the order of ties in a report, and
writes every float so that it reads back the same).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from agentscope.analysis.tasks import RESULT_FIELDS, TaskResult, analyze, collector_paused
from agentscope.store.columns import column
from agentscope.store.schema import TASK_ARROW_SCHEMA

SCALARS = (
    "trace_id",
    "span_id",
    "name",
    "start_ns",
    "duration_ns",
    "accepted",
    "serial_llm_calls",
    "llm_calls",
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "repaired",
    "calls_without_tokens",
)
"""The fields stored as they are; ``components`` and ``whatif_ns`` are lists, the rest JSON."""


def columns_of(results: Sequence[TaskResult]) -> dict[str, list[Any]]:
    """The results as one list per column (the per-task table's, less ``services``)."""
    frame: dict[str, list[Any]] = {name: [getattr(r, name) for r in results] for name in SCALARS}
    frame["components"] = [list(r.components) for r in results]
    frame["whatif_ns"] = [list(r.whatif_ns) for r in results]
    frame["operations"] = [orjson.dumps(r.operations).decode() for r in results]
    frame["models"] = [orjson.dumps(r.models).decode() for r in results]
    return frame


def _operations(text: str) -> dict[str, tuple[str, float, int]]:
    return {label: tuple(op) for label, op in orjson.loads(text).items()}


def operations_of(texts: pa.Array | pa.ChunkedArray) -> list[dict[str, list[Any]]]:
    """Rows of the ``operations`` column as label → [category, ns, calls]: what a report sums, without
    the tuples a ``TaskResult`` holds."""
    return [orjson.loads(text) for text in texts.to_pylist()]


def results_table(results: Sequence[TaskResult], services: Sequence[list[str]] | None = None) -> pa.Table:
    """The results as rows of the store's ``tasks`` table; ``services[i]`` are the services of the
    trace of ``results[i]`` (what ``--service`` selects on), or every row's are null (see
    :func:`with_services`).  Built from buffers (``store.columns``): ``pa.table`` of Python lists would
    import pandas, a fifth of a second of a reader's answer."""
    frame = columns_of(results)
    if services is not None:
        frame["services"] = list(services)
    arrays = [
        column(frame[field.name], field.type) if field.name in frame else pa.nulls(len(results), field.type)
        for field in TASK_ARROW_SCHEMA
    ]
    return pa.Table.from_arrays(arrays, schema=TASK_ARROW_SCHEMA)


def analyze_rows(spans: Any, variants: Sequence[Mapping[str, float]] = (), **options: Any) -> pa.Table:
    """``analyze``'s results as rows of the task table, their services null: what a worker process sends
    back when the rows are to be kept.  Building the rows in the workers leaves the reader, which
    waits for them, only a concatenation; and a table pickles as a few buffers."""
    with collector_paused():  # until the results are rows and freed (see collector_paused)
        return results_table(analyze(spans, variants, **options))


def with_services(rows: pa.Table, services: pa.Table) -> pa.Table:
    """``rows`` with the ``services`` column of their traces in ``services`` (trace_id, services); a
    trace it does not list has none (an empty list)."""
    type_ = TASK_ARROW_SCHEMA.field("services").type
    where = pc.index_in(rows.column("trace_id"), value_set=services["trace_id"])
    found = services.column("services").take(where)
    named = pc.fill_null(found, column([[]], type_)[0]).cast(type_)
    return rows.set_column(rows.schema.get_field_index("services"), "services", named)


def results_from_table(table: pa.Table) -> list[TaskResult]:
    """Rows of the ``tasks`` table (any column order; extra columns ignored) as ``TaskResult`` objects,
    built column by column: a dict per row would cost twice as much."""
    fields: dict[str, list[Any]] = {name: table.column(name).to_pylist() for name in SCALARS}
    fields["components"] = table.column("components").to_pylist()
    fields["whatif_ns"] = table.column("whatif_ns").to_pylist()
    fields["operations"] = [_operations(text) for text in table.column("operations").to_pylist()]
    fields["models"] = [orjson.loads(text) for text in table.column("models").to_pylist()]
    return list(map(TaskResult, *(fields[name] for name in RESULT_FIELDS)))
