"""Hand-written traces for analyzer tests: spans as small dicts, times in ms."""

from __future__ import annotations

from typing import Any

from agentscope.analysis.batch import SpanBatch, as_columns
from agentscope.analysis.trace import Trace

MS = 1_000_000


def span(
    span_id: str, parent: str | None, kind: str, start: float, end: float, **extra: Any
) -> dict[str, Any]:
    """A span from ``start`` to ``end`` ms; ``extra`` fills other analysis columns."""
    row = {
        "trace_id": extra.pop("trace_id", "t1"),
        "span_id": span_id,
        "parent_id": parent,
        "name": extra.pop("name", span_id),
        "kind": kind,
        "start_ns": int(start * MS),
        "end_ns": int(end * MS),
        "status": extra.pop("status", "UNSET"),
    }
    row.update(extra)
    return row


def batch(*spans: dict[str, Any]) -> SpanBatch:
    return SpanBatch.from_any(as_columns(spans))


def trace(*spans: dict[str, Any], repair: bool = True) -> Trace:
    b = batch(*spans)
    (rows,) = list(b.traces())
    return Trace.build(b, rows, repair=repair)


def path(t: Trace, task: int = 0) -> list[tuple[str, float, float]]:
    """The critical path as (span id, start ms, end ms), relative to the epoch of the test."""
    from agentscope.analysis.critical_path import critical_path

    return [(t.span_id(i), a / MS, b / MS) for i, a, b in critical_path(t, task)]
