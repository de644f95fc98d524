"""Helpers of the LangSmith and Langfuse readers: exact ISO times, foreign ids, format detection."""

from __future__ import annotations

import io

import pytest

from agentscope.ingest.records import BadSpan
from agentscope.ingest.runs import iso_ns, iter_objects, span_id_of, trace_id_of
from agentscope.ingest.sources import detect


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("1970-01-01T00:00:01Z", 1_000_000_000),
        ("1970-01-01T00:00:01.000000001Z", 1_000_000_001),
        ("2026-12-01T08:11:26.015387+00:00", 1_796_112_686_015_387_000),
        ("2026-12-01T09:11:26.015387+01:00", 1_796_112_686_015_387_000),
        ("2026-12-01 08:11:26.015387", 1_796_112_686_015_387_000),  # naive: UTC
        ("2026-12-01T08:11:26.0153871234Z", 1_796_112_686_015_387_123),  # past ns: cut
    ],
)
def test_iso_times_are_exact_nanoseconds(text, ns):
    assert iso_ns(text, "t") == ns


@pytest.mark.parametrize("bad", ["yesterday", "2026-13-01T00:00:00Z", 1796112686, None])
def test_bad_times_are_named(bad):
    with pytest.raises(BadSpan, match=r"^start_time"):
        iso_ns(bad, "start_time")


def test_foreign_ids():
    assert span_id_of("01a230a8-9bbf-7685-b1c1-c7275dcd7623", "id") == "b1c1c7275dcd7623"
    assert span_id_of("cafe0000cafe0000", "id") == "cafe0000cafe0000"
    hashed = span_id_of("obs-42", "id")
    assert len(hashed) == 16 and hashed == span_id_of("obs-42", "id") != span_id_of("obs-43", "id")
    assert trace_id_of("01a230a8-9ba7-710f-9f16-beb5c64f98c5", "id") == "01a230a89ba7710f9f16beb5c64f98c5"
    assert len(trace_id_of("trace one", "id")) == 32
    with pytest.raises(BadSpan, match="missing"):
        span_id_of(None, "run id")


def stream(text: str) -> io.BufferedReader:
    return io.BufferedReader(io.BytesIO(text.encode()))


@pytest.mark.parametrize(
    ("text", "fmt"),
    [
        ('[{"id": "1", "run_type": "llm", "start_time": "2026-01-01T00:00:00Z"}]', "langsmith"),
        ('{"id": "1", "run_type": "chain", "parent_run_id": null, "start_time": "x"}\n', "langsmith"),
        ('{"data": [{"id": "a", "traceId": "t", "startTime": "2026-01-01T00:00:00Z"}]}', "langfuse"),
        ('[{"traceId": "ab", "id": "cd", "timestamp": 1, "duration": 2}]', "zipkin"),
        ('{"data": [{"traceID": "ab", "spans": [{"startTime": 1}]}]}', "jaeger"),
    ],
)
def test_exports_are_told_apart_by_content(text, fmt):
    assert detect(stream(text)) == fmt


def test_objects_of_lines_arrays_and_pages():
    assert [p for p, _ in iter_objects(stream('{"a": 1}\n\n{"a": 2}\nnot json\n'))][:2] == [1, 3]
    *_, (line, problem) = iter_objects(stream('{"a": 1}\nnot json\n'))
    assert line == 2 and "invalid JSON" in str(problem)
    assert [o["a"] for _, o in iter_objects(stream('[{"a": 1}, {"a": 2}]'))] == [1, 2]
    assert [o["a"] for _, o in iter_objects(stream('{"data": [{"a": 3}], "meta": {}}'))] == [3]
    assert [o["a"] for _, o in iter_objects(stream('{\n  "data": [\n {"a": 4}\n]\n}'))] == [4]
