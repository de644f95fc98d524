"""The analyzer's input: a batch of whole traces as columns, whatever container holds them.

``SpanBatch.from_any`` accepts an Arrow table, a pandas DataFrame or a mapping of
column name to sequence, with nulls as None, NaN or ``pd.NA``.  Missing optional
columns read as null.  Without a ``trace_id`` column (a frame whose grouping key
was dropped) spans are grouped into traces by following parent links.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from operator import itemgetter
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc

from agentscope.store.arrays import int64_array, numbers, whole

T = TypeVar("T")

REQUIRED = ("span_id", "start_ns", "end_ns")
COLUMNS = (
    "trace_id",
    "span_id",
    "parent_id",
    "name",
    "kind",
    "span_kind",
    "scope",
    "start_ns",
    "end_ns",
    "status",
    "thread_id",
    "cpu_ns",
    "operation",
    "label",
    "attempt",
    "http_status",
    "ttft_s",
    "stream_wait_ns",
    "server_queue_ms",
    "server_prefill_ms",
    "server_decode_ms",
    "server_total_ms",
    "task_name",
    "accepted",
    "input_tokens",
    "output_tokens",
    "cached_tokens",
)
"""Columns the analyzer reads; ``agentscope.store.query`` selects them from a store."""


def _is_null(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    return type(value).__name__ in ("NAType", "NaTType")


def _clean(values: list[Any]) -> list[Any]:
    return [None if _is_null(v) else v for v in values]


def _int_or_none(values: list[Any]) -> list[Any]:
    return [None if _is_null(v) else int(v) for v in values]


INT_COLUMNS = frozenset(
    {"start_ns", "end_ns", "thread_id", "cpu_ns", "attempt", "http_status", "stream_wait_ns"}
)
INT_COLUMNS |= {"input_tokens", "output_tokens", "cached_tokens"}


def _arrow_column(column: Any) -> list[Any]:
    """Arrow gives nulls as None already; only floating columns can hold NaN."""
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        return _arrow_strings(column)
    values = column.to_pylist()
    if pa.types.is_floating(column.type):
        return [None if v is not None and v != v else v for v in values]
    return values


def _encoded(column: Any) -> tuple[Any, np.ndarray]:
    """The column's distinct values (null is one too) and each row's code, codes given in order of first
    appearance."""
    encoded = pc.dictionary_encode(whole(column), null_encoding="encode")
    return encoded.dictionary, numbers(encoded.indices)


def _arrow_strings(column: Any) -> list[str | None]:
    """A text column read through its dictionary, so that each distinct value is one string object
    where values repeat (kinds, statuses, names, a trace's id on each of its spans): a batch of
    100,000 rich spans is read in three quarters of the time with a third of the page faults, and
    each string is hashed once.  A column whose values are all distinct (span ids) is its
    dictionary's values, converted once."""
    dictionary, codes = _encoded(column)
    values = dictionary.to_pylist()
    if len(values) == len(column):  # every value distinct (span ids): the dictionary is the column
        return values
    return np.array(values, dtype=object)[codes].tolist()


def _column(container: Any, name: str, length: int) -> list[Any]:
    if hasattr(container, "column_names"):
        if name not in container.column_names:
            return [None] * length
        return _arrow_column(container.column(name))
    if hasattr(container, "columns") and hasattr(container, "iloc"):
        if name not in container.columns:
            return [None] * length
        values = container[name].tolist()
    else:
        if name not in container:
            return [None] * length
        values = list(container[name])
    if name in INT_COLUMNS:
        return _int_or_none(values)
    return _clean(values)


def _length(container: Any) -> int:
    if hasattr(container, "num_rows"):
        return container.num_rows
    if hasattr(container, "iloc"):
        return len(container)
    return len(next(iter(container.values()))) if container else 0


@dataclass
class SpanBatch:
    """Columns of spans as Python lists (nulls are None), each trace's rows side by side."""

    columns: dict[str, list[Any]]
    bounds: list[int]
    """Where each trace's rows begin, then the end: trace k is rows ``bounds[k]`` to ``bounds[k + 1]``,
    so a trace's values are slices of the columns (copied in C, not gathered row by row)."""

    @classmethod
    def from_any(cls, container: Any) -> SpanBatch:
        """Read an Arrow table, a pandas DataFrame or a mapping of columns, rows in any order."""
        length = _length(container)
        names = (
            container.column_names
            if hasattr(container, "column_names")
            else list(container.columns)
            if hasattr(container, "iloc")
            else list(container)
        )
        missing = [name for name in REQUIRED if name not in names]
        if missing:
            raise ValueError(f"span batch lacks required column(s): {', '.join(missing)}")
        if hasattr(container, "column_names") and "trace_id" in names:
            container, bounds = _arrow_grouped(container)
            if bounds is not None:
                return cls({name: _column(container, name, length) for name in COLUMNS}, bounds)
        return cls.grouped({name: _column(container, name, length) for name in COLUMNS})

    @classmethod
    def grouped(cls, columns: dict[str, list[Any]]) -> SpanBatch:
        """``columns`` with each trace's rows moved side by side: traces in first-seen order, a trace's
        rows in their order.  A batch already grouped is kept as it is; a store written by the SDK,
        whose parents end (and are flushed) after their children, often is not."""
        groups = list(_trace_groups(columns))
        order = [row for group in groups for row in group]
        if order != list(range(len(order))):  # two rows at least, so ``gather`` returns a tuple
            gather = itemgetter(*order)  # in C: a list comprehension per column cost 4× as much
            columns = {name: list(gather(values)) for name, values in columns.items()}
        return cls(columns, list(accumulate(map(len, groups), initial=0)))

    def __len__(self) -> int:
        return len(self.columns["span_id"])

    def __getitem__(self, name: str) -> list[Any]:
        return self.columns[name]

    def traces(self) -> Iterator[range]:
        """The rows of each trace, in first-seen order."""
        return map(range, self.bounds, self.bounds[1:])


def _arrow_grouped(table: Any) -> tuple[Any, list[int] | None]:
    """``table`` with each trace's rows side by side, as ``SpanBatch.grouped`` orders them, moved in
    Arrow (3 ms for 50,000 rows, where regrouping Python lists took 27), and where each trace's rows
    begin, then the end (found in NumPy, not by a Python pass over the rows); no bounds when no span
    has a trace id, since the trees are then told apart by their parent links."""
    column = table.column("trace_id")
    if column.null_count == len(column):
        return table, None
    _, codes = _encoded(column)
    if not bool((codes[1:] >= codes[:-1]).all()):
        order = np.argsort(codes, kind="stable")
        table = table.take(int64_array(order))
        codes = codes[order]
    starts = np.flatnonzero(codes[1:] != codes[:-1]) + 1
    return table, [0, *starts.tolist(), len(codes)]


def _trace_groups(columns: Mapping[str, Sequence[Any]]) -> Iterator[list[int]]:
    """Row indices of each trace, in first-seen order: by trace id, else by parent links."""
    trace_ids = columns["trace_id"]
    if any(t is not None for t in trace_ids):
        groups: dict[Any, list[int]] = {}
        for row, trace_id in enumerate(trace_ids):
            groups.setdefault(trace_id, []).append(row)
        yield from groups.values()
        return
    yield from _components(columns["span_id"], columns["parent_id"])


def _components(span_ids: Sequence[Any], parent_ids: Sequence[Any]) -> Iterator[list[int]]:
    """Group rows into trees by parent links (for batches without trace ids)."""
    row_of = {span_id: row for row, span_id in enumerate(span_ids)}
    root_of: list[int] = [-1] * len(span_ids)
    for row in range(len(span_ids)):
        path = []
        current = row
        while root_of[current] == -1:
            path.append(current)
            parent = row_of.get(parent_ids[current])
            if parent is None or parent in path:
                root_of[current] = current
                break
            current = parent
        root = root_of[current]
        for visited in path:
            root_of[visited] = root
    groups: dict[int, list[int]] = {}
    for row, root in enumerate(root_of):
        groups.setdefault(root, []).append(row)
    yield from groups.values()


def as_columns(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Rows (mappings) to the column mapping ``SpanBatch.from_any`` reads; for tests and small inputs."""
    return {name: [row.get(name) for row in rows] for name in COLUMNS}


def write_file(batch: pa.Table, path: str) -> None:
    """Write a batch as an Arrow IPC file, for :func:`on_file` in another process."""
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, batch.schema) as writer:
        writer.write_table(batch)


def on_file(work: Callable[..., T], path: str, *args: Any, **options: Any) -> T:
    """``work(batch, *args, **options)`` of the batch :func:`write_file` wrote to ``path``.

    How a batch reaches a worker process: written once as Arrow and mapped here, rather than pickled
    through a pipe, which copies it four times (into the pickle, the pipe, out of it and into the
    arrays) and costs the reader, which also reads the store, a third of a CPU-second a million rich
    spans."""
    with pa.memory_map(path) as source:
        return work(pa.ipc.open_file(source).read_all(), *args, **options)
