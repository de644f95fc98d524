"""Context propagation: across threads, executors and asyncio tasks, every span keeps its parent."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from concurrent.futures import ThreadPoolExecutor

import agentscope as ags


@ags.task
def ticket(i: int) -> int:
    return lookup(i)


@ags.tool
def lookup(i: int) -> int:
    with ags.span(f"inner {i}", kind="step"):
        return i


def test_32_threads_by_200_tasks_lose_no_span_and_keep_parents(captured):
    def worker(first: int) -> None:
        for i in range(first, first + 200):
            ticket(i)

    with ags.span("batch", kind="step"):
        threads = [
            threading.Thread(target=contextvars.copy_context().run, args=(worker, t * 200)) for t in range(32)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    _check_tree(captured, 32 * 200)


def test_executor_with_copied_context(captured):
    with ags.span("batch", kind="step"), ThreadPoolExecutor(max_workers=8) as pool:
        futures = [pool.submit(contextvars.copy_context().run, ticket, i) for i in range(500)]
        assert sorted(f.result() for f in futures) == list(range(500))
    _check_tree(captured, 500)


def test_1000_concurrent_asyncio_tasks(captured):
    @ags.task("ticket")
    async def aticket(i: int) -> int:
        await asyncio.sleep(0.001 * (i % 7))
        return await alookup(i)

    @ags.tool("lookup")
    async def alookup(i: int) -> int:
        await asyncio.sleep(0)
        with ags.span(f"inner {i}", kind="step"):
            return i

    async def main():
        with ags.span("batch", kind="step"):
            return await asyncio.gather(*[asyncio.create_task(aticket(i)) for i in range(1000)])

    assert asyncio.run(main()) == list(range(1000))
    _check_tree(captured, 1000)


def _check_tree(captured, tasks: int) -> None:
    spans = captured.spans
    assert len(spans) == 1 + 3 * tasks
    by_id = {s.context.span_id: s for s in spans}
    (batch,) = [s for s in spans if s.name == "batch"]
    inner = [s for s in spans if s.name.startswith("inner ")]
    assert len(inner) == tasks
    seen = set()
    for span in inner:
        tool = by_id[span.parent.span_id]
        task = by_id[tool.parent.span_id]
        assert captured.kind(tool) == "tool" and captured.kind(task) == "task"
        assert task.parent.span_id == batch.context.span_id
        assert {s.context.trace_id for s in (span, tool, task)} == {batch.context.trace_id}
        seen.add(span.name)
    assert len(seen) == tasks
