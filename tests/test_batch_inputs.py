"""The analysis core takes Arrow, pandas or plain columns, any null form, with or without trace ids."""

from __future__ import annotations

import math

import pandas as pd
import pyarrow as pa
import pytest
from tracebuild import span

from agentscope.analysis import analyze
from agentscope.analysis.batch import SpanBatch, as_columns

ROWS = [
    span("R", None, "task", 0, 100, cpu_ns=0, thread_id=1),
    span("L", "R", "llm", 10, 60, server_prefill_ms=20.0, server_decode_ms=25.0),
    span("T", "R", "tool", 60, 90),
    span("R2", None, "task", 0, 50, trace_id="t2"),
    span("T2", "R2", "tool", 0, 50, trace_id="t2"),
]


def results_of(container) -> list[tuple[str, int, float]]:
    return sorted((r.span_id, r.duration_ns, round(sum(r.components))) for r in analyze(container))


def test_arrow_pandas_and_columns_agree():
    columns = as_columns(ROWS)
    expected = results_of(columns)
    assert len(expected) == 2
    assert results_of(pa.table(columns)) == expected
    assert results_of(pd.DataFrame(columns)) == expected


def test_every_null_form_and_a_dropped_trace_id():
    frame = pd.DataFrame(as_columns(ROWS))
    frame["server_total_ms"] = [math.nan, pd.NA, None, math.nan, None]
    frame["cpu_ns"] = pd.array([0, pd.NA, pd.NA, pd.NA, pd.NA], dtype="Int64")
    frame["ttft_s"] = float("nan")
    without_key = frame.drop(columns=["trace_id"])
    assert results_of(without_key) == results_of(frame)
    batch = SpanBatch.from_any(without_key)
    assert batch["server_total_ms"] == [None] * 5 and batch["cpu_ns"][:2] == [0, None]


def test_a_batch_without_required_columns_is_refused():
    with pytest.raises(ValueError, match="span_id"):
        analyze({"start_ns": [1], "end_ns": [2]})


@pytest.mark.parametrize("keyed", ["all", "none", "partly"])
def test_interleaved_traces_are_grouped_side_by_side_and_analysed_alike(keyed):
    """Rows of two traces taken in turn (a frame sorted by time, say) give the same results as the
    traces one after the other; each trace's rows become one run, in first-seen order.  Without
    trace ids the trees are told apart by their parents; rows without one are one trace."""
    interleaved = [ROWS[3], ROWS[0], ROWS[4], ROWS[1], ROWS[2]]
    columns = as_columns(interleaved)
    if keyed == "none":
        columns["trace_id"] = [None] * len(interleaved)
    if keyed == "partly":
        columns["trace_id"] = [t if t == "t2" else None for t in columns["trace_id"]]
    for container in (columns, pa.table(columns)):  # lists are regrouped in Python, Arrow in Arrow
        batch = SpanBatch.from_any(container)
        assert [list(rows) for rows in batch.traces()] == [[0, 1], [2, 3, 4]]
        assert batch["span_id"] == ["R2", "T2", "R", "L", "T"]
        assert results_of(container) == results_of(as_columns(ROWS))


def test_arrow_text_reads_as_its_values_with_repeats_shared():
    """Text in several chunks, with nulls, of either string type reads value for value; a value that
    repeats is one string object, so it is hashed once and pickled once."""
    chunks = [pa.array(["llm", None, "tool"]), pa.array(["llm", "llm", None, "tool"])]
    rows = pa.table(as_columns([span(f"S{k}", None, "llm", 0, 1) for k in range(7)]))
    for kind in (pa.string(), pa.large_string()):
        column = pa.chunked_array([chunk.cast(kind) for chunk in chunks])
        batch = SpanBatch.from_any(rows.set_column(rows.schema.get_field_index("kind"), "kind", column))
        assert batch["kind"] == ["llm", None, "tool", "llm", "llm", None, "tool"]
        assert batch["kind"][0] is batch["kind"][3] is batch["kind"][4]
