"""Hand-written traces for analyzer tests: spans as small dicts, times in ms."""

from __future__ import annotations

import json
from pathlib import Path
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


def store_row(trace, span_id, parent, kind, start_ms, end_ms, name=None, **attributes) -> tuple:
    """A ``spans`` row for writing straight into a store (times in ms)."""
    return (
        trace,
        span_id,
        parent,
        name or span_id,
        kind,
        "INTERNAL",
        int(start_ms * MS),
        int(end_ms * MS),
        "UNSET",
        None,
        "svc",
        "test",
        1,
        None,
        json.dumps(attributes),
    )


def llm_task_store(path: Path, sizes: list[tuple[int, int]], model: str | None = None) -> Path:
    """A store of one 1,000 ms task a size, each holding a 900 ms LLM call of that (input, output)."""
    from agentscope.store import Store
    from agentscope.store.schema import rows_to_table

    rows = []
    for k, (inputs, outputs) in enumerate(sizes):
        trace_id, task, call = f"{k + 1:032x}", f"{k:015x}a", f"{k:015x}b"
        usage = {"gen_ai.usage.input_tokens": inputs, "gen_ai.usage.output_tokens": outputs}
        if model is not None:
            usage["gen_ai.request.model"] = model
        rows += [
            store_row(trace_id, task, None, "task", 0, 1000, "ticket"),
            store_row(trace_id, call, task, "llm", 0, 900, "chat", **usage),
        ]
    with Store(path) as store:
        store.insert(rows_to_table(rows))
    return path
