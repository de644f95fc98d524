"""Code that runs in separate processes for the store concurrency tests (spawned, so importable)."""

from __future__ import annotations

import os
import time
from pathlib import Path


def write_tasks(store: str, tasks: int, progress: str | None = None, flush_every: int = 0) -> None:
    """An instrumented worker: ``tasks`` tasks of two spans each (a task and a tool), then shutdown.

    With ``progress``, every ``flush_every`` tasks it flushes and, when the flush was
    written, records how many of its tasks are in the store (for readers to check against).
    """
    import agentscope as ags

    ags.init(service_name=f"worker-{os.getpid()}", store=store, instrument=False)

    @ags.tool("lookup")
    def lookup(i: int) -> int:
        return i * 2

    @ags.task("resolve")
    def resolve(i: int) -> int:
        return lookup(i)

    for i in range(tasks):
        resolve(i)
        if progress and flush_every and (i + 1) % flush_every == 0 and ags.flush():
            temporary = Path(progress + ".tmp")
            temporary.write_text(str(i + 1))
            temporary.replace(progress)
    ags.shutdown()


def start_writers(path: Path, progress: list[Path], tasks: int, flush_every: int) -> list:
    """One spawned :func:`write_tasks` process per progress file, started; returned once the store
    exists (or after a minute)."""
    import multiprocessing

    spawn = multiprocessing.get_context("spawn")
    workers = [
        spawn.Process(target=write_tasks, args=(str(path), tasks, str(p), flush_every)) for p in progress
    ]
    for worker in workers:
        worker.start()
    deadline = time.monotonic() + 60
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return workers


def flushed(progress: list[Path]) -> int:
    """Tasks the writers of :func:`start_writers` have flushed into the store so far."""
    return sum(int(p.read_text()) for p in progress if p.exists())


def export_over_otlp(endpoint: str, tasks: int, service: str) -> None:
    """A plain OpenTelemetry app exporting to ``agentscope serve``; its token comes from the environment."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    exporter = OTLPSpanExporter(endpoint=endpoint)
    # A queue that holds the whole run: a span dropped by the exporter's own queue never reaches the receiver.
    provider.add_span_processor(
        BatchSpanProcessor(exporter, max_queue_size=4 * tasks, max_export_batch_size=512)
    )
    tracer = provider.get_tracer("app")
    for i in range(tasks):
        with (
            tracer.start_as_current_span("resolve", attributes={"agentscope.kind": "task"}),
            tracer.start_as_current_span("lookup", attributes={"agentscope.kind": "tool"}),
        ):
            time.sleep(0.0002 if i % 50 == 0 else 0)
    provider.shutdown()


def insert_big_batches(store: str, started: str) -> None:
    """Write large batches in a loop (to be killed with SIGKILL in the middle of one)."""
    import pyarrow as pa

    from agentscope.store.schema import ARROW_SCHEMA
    from agentscope.store.shared import SharedStore

    shared = SharedStore(store)
    for n in range(1000):
        rows = 100_000
        table = pa.table(
            {
                "trace_id": [f"{n:016x}{i:016x}" for i in range(rows)],
                "span_id": [f"{i:016x}" for i in range(rows)],
                "parent_id": [None] * rows,
                "name": ["op"] * rows,
                "kind": ["tool"] * rows,
                "span_kind": ["INTERNAL"] * rows,
                "start_ns": [1_000 + i for i in range(rows)],
                "end_ns": [2_000 + i for i in range(rows)],
                "status": ["UNSET"] * rows,
                "status_message": [None] * rows,
                "service": ["big"] * rows,
                "scope": ["test"] * rows,
                "thread_id": [None] * rows,
                "cpu_ns": [None] * rows,
                "attributes": ["{}"] * rows,
            },
            schema=ARROW_SCHEMA,
        )
        shared.insert(table)
        Path(started).write_text(str(n + 1))
