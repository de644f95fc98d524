"""Instrumentation never breaks the program: failures are reported once, user errors pass unchanged."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import time
import traceback

import duckdb
import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import StatusCode

import agentscope as ags
from agentscope import attributes as A
from agentscope.sdk.setup import ReportingBatchSpanProcessor


def agentscope_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "agentscope" and r.levelno >= logging.WARNING]


class RaisingProcessor(SpanProcessor):
    def on_end(self, span: ReadableSpan) -> None:
        raise RuntimeError("processor exploded")


class RaisingExporter(SpanExporter):
    def export(self, spans):
        raise RuntimeError("exporter exploded")


class SlowExporter(SpanExporter):
    def export(self, spans):
        time.sleep(0.05)
        return SpanExportResult.SUCCESS


def test_user_exception_is_the_same_object_with_its_traceback(captured):
    error = ValueError("bad ticket")

    @ags.tool
    def fails():
        raise error

    with pytest.raises(ValueError) as info:
        fails()
    assert info.value is error
    frames = traceback.extract_tb(info.value.__traceback__)
    assert frames[-1].name == "fails" and frames[-1].line == "raise error"
    span = captured.one("execute_tool fails")
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes[A.ERROR_TYPE] == "ValueError"
    assert span.events[0].name == "exception"


async def _raise_in_coroutine(error):
    raise error


def test_async_exception_and_cancellation_propagate(captured):
    import asyncio

    error = KeyError("missing")

    @ags.tool
    async def fails():
        await asyncio.sleep(0)
        raise error

    @ags.tool
    async def slow():
        await asyncio.sleep(10)

    async def main():
        with pytest.raises(KeyError) as info:
            await fails()
        assert info.value is error
        task = asyncio.ensure_future(slow())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert captured.one("execute_tool slow").status.status_code is StatusCode.ERROR


def test_a_raising_processor_or_exporter_does_not_reach_user_code(caplog):
    ags.init(
        store=None,
        instrument=False,
        span_processors=[RaisingProcessor(), SimpleSpanProcessor(RaisingExporter())],
    )
    try:

        @ags.tool
        def work(x):
            return x + 1

        assert [work(i) for i in range(5)] == [1, 2, 3, 4, 5]
    finally:
        ags.shutdown()
    messages = agentscope_warnings(caplog)
    assert sum("processor exploded" in m for m in messages) == 1


def test_a_full_queue_drops_spans_but_never_blocks_or_raises(caplog):
    processor = ReportingBatchSpanProcessor(SlowExporter(), max_queue_size=4, max_export_batch_size=2)
    ags.init(store=None, instrument=False, span_processors=[processor])
    try:

        @ags.step
        def quick(i):
            return i

        assert [quick(i) for i in range(200)] == list(range(200))
    finally:
        ags.shutdown()
    assert sum("queue is full" in m for m in agentscope_warnings(caplog)) == 1


def test_unwritable_store_is_reported_once(tmp_path, caplog):
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where a folder should be")
    ags.init(store=blocked / "store.duckdb", instrument=False)
    try:

        @ags.step
        def work():
            return "done"

        assert work() == "done"
        ags.flush()
        assert work() == "done"
        ags.flush()
    finally:
        ags.shutdown()
    messages = agentscope_warnings(caplog)
    assert sum("writing spans to the store" in m for m in messages) == 1


def test_locked_store_keeps_spans_until_the_lock_is_released(tmp_path, caplog):
    path = tmp_path / "locked.duckdb"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import duckdb, sys
                con = duckdb.connect({str(path)!r})
                print("locked", flush=True)
                sys.stdin.readline()
                con.close()
                """
            ),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        ags.init(store=path, instrument=False)

        @ags.tool
        def lookup(i):
            return i * 2

        assert [lookup(i) for i in range(10)] == [i * 2 for i in range(10)]
        ags.flush()
    finally:
        holder.communicate("\n", timeout=30)
    ags.shutdown()
    assert sum("writing spans to the store" in m for m in agentscope_warnings(caplog)) == 1
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM spans").fetchall() == [(10,)]


def test_broken_attribute_values_are_coerced_not_raised(captured):
    class Unprintable:
        def __str__(self):
            raise RuntimeError("no str")

        __repr__ = __str__

    with ags.span("odd", kind="step", obj=object(), bad=Unprintable(), nums=[1, 2], mixed=[1, "a"]):
        ags.current_llm().usage(input_tokens=Unprintable())
    span = captured.one("odd")
    assert span.attributes["bad"].startswith("<unprintable ")
    assert span.attributes["nums"] == (1, 2)
    assert span.attributes["obj"].startswith("<object object")
    assert isinstance(span.attributes["mixed"], str)


def test_no_content_is_recorded_unless_capture_is_on(captured):
    @ags.llm(model="m")
    def chat(prompt):
        return "the secret answer"

    chat("the secret prompt")
    span = captured.one("chat m")
    assert A.INPUT not in span.attributes and A.OUTPUT not in span.attributes
    assert "secret" not in repr(dict(span.attributes))


def test_content_is_recorded_with_capture_on():
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    ags.init(
        store=None, instrument=False, capture_content=True, span_processors=[SimpleSpanProcessor(exporter)]
    )
    try:

        @ags.llm(model="m")
        def chat(prompt):
            return "the answer"

        chat("the prompt")
    finally:
        ags.shutdown()
        ags.init(store=None, instrument=False, capture_content=False)
        ags.shutdown()
    (span,) = exporter.get_finished_spans()
    assert "the prompt" in span.attributes[A.INPUT]
    assert "the answer" in span.attributes[A.OUTPUT]


def test_credentials_are_never_recorded_or_stored(captured, tmp_path):
    with ags.span(
        "call", kind="http", **{"http.request.header.authorization": "Bearer sk-1", "api_key": "sk-2"}
    ):
        pass
    assert captured.one("call").attributes.get("api_key") is None
    assert "sk-" not in repr(dict(captured.one("call").attributes))


def test_store_writer_bounds_its_backlog_and_reports_drops(tmp_path, caplog):
    from agentscope.store.writer import StoreSpanProcessor

    processor = StoreSpanProcessor(tmp_path / "bounded.duckdb", max_pending=10, flush_interval_s=60)
    ags.init(store=None, instrument=False, span_processors=[processor])
    try:

        @ags.step
        def quick(i):
            return i

        assert [quick(i) for i in range(50)] == list(range(50))
    finally:
        ags.shutdown()
    assert processor.dropped == 40
    assert sum("spans are dropped" in m for m in agentscope_warnings(caplog)) == 1
    with duckdb.connect(str(tmp_path / "bounded.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM spans").fetchall() == [(10,)]
