"""A span processor that writes finished spans into a store from a background thread.

The application thread only takes a small snapshot of each finished span (ids,
times, a reference to its attributes) and appends it to a queue; a writer
thread turns snapshots into rows and inserts them in large batches.  Large
batches matter: every call into DuckDB releases and re-takes the GIL, and under
a busy application each re-take can wait a whole switch interval.

The writer keeps the file open while there is a backlog and closes it once the
queue is drained, so ``agentscope blame`` can read the store between bursts.
When the file cannot be written (locked by another process, unwritable), rows
are kept and retried with the next batch, up to ``max_pending`` spans; the
failure is reported once through the ``agentscope`` logger.
"""

from __future__ import annotations

import threading
from collections import deque
from pathlib import Path

import duckdb
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from agentscope import attributes as A
from agentscope.sdk._safety import report
from agentscope.store.rows import make_row
from agentscope.store.schema import rows_to_table
from agentscope.store.store import Store, StoreError

SPAN_KIND_NAMES = ("INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER")
STATUS_NAMES = ("UNSET", "OK", "ERROR")


def snapshot(span: ReadableSpan) -> tuple:
    """What the writer needs of a finished span; cheap, taken on the application's thread."""
    parent = span.parent
    resource = span.resource
    scope = span.instrumentation_scope
    return (
        span.context.trace_id,
        span.context.span_id,
        parent.span_id if parent is not None else None,
        span.name,
        span.kind.value,
        span.start_time,
        span.end_time,
        span.status.status_code.value,
        span.status.description,
        resource.attributes.get(A.SERVICE_NAME) if resource is not None else None,
        scope.name if scope is not None else None,
        span.attributes,
    )


def snapshot_to_row(snap: tuple) -> tuple:
    """One ``spans`` row from a :func:`snapshot`."""
    trace_id, span_id, parent_id, name, kind, start, end, status, message, service, scope, attrs = snap
    return make_row(
        format(trace_id, "032x"),
        format(span_id, "016x"),
        format(parent_id, "016x") if parent_id is not None else None,
        name,
        SPAN_KIND_NAMES[kind],
        start,
        end,
        STATUS_NAMES[status],
        message,
        service,
        scope,
        dict(attrs or {}),
    )


class StoreSpanProcessor(SpanProcessor):
    """Write every finished span into the DuckDB store at ``path``."""

    def __init__(
        self,
        path: str | Path,
        *,
        batch_size: int = 8192,
        flush_interval_s: float = 0.5,
        max_pending: int = 500_000,
    ) -> None:
        self.path = Path(path)
        self.batch_size = batch_size
        self.flush_interval_s = flush_interval_s
        self.max_pending = max_pending
        self.dropped = 0
        self._queue: deque[tuple] = deque()
        self._retry: list[tuple] = []
        self._write_lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._store: Store | None = None
        self._prepare()
        self._thread = threading.Thread(target=self._run, name="agentscope-store-writer", daemon=True)
        self._thread.start()

    def _prepare(self) -> None:
        """Create the store and warm up Arrow now, on the caller's thread.

        Done later on the writer thread, this first-time work competes for the
        GIL with a busy application and can take seconds while spans pile up.
        """
        rows_to_table([])
        with self._write_lock:
            self._insert([])
            self._close()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        if self._stopping:
            return
        if len(self._queue) + len(self._retry) >= self.max_pending:
            self.dropped += 1
            report(
                f"queueing spans for the store {self.path}",
                BufferError(f"{self.max_pending} spans are waiting to be written; spans are dropped"),
                internal=False,
            )
            return
        self._queue.append(snapshot(span))
        if len(self._queue) >= self.batch_size:
            self._wake.set()

    def _run(self) -> None:
        while not self._stopping:
            self._wake.wait(self.flush_interval_s)
            self._wake.clear()
            self.write_pending()

    def write_pending(self) -> bool:
        """Write everything queued so far; False if the store could not be written."""
        with self._write_lock:
            try:
                while self._queue or self._retry:
                    rows, self._retry = self._retry, []
                    while self._queue and len(rows) < self.batch_size:
                        rows.append(snapshot_to_row(self._queue.popleft()))
                    if not self._insert(rows):
                        return False
                return True
            except Exception as exc:
                report("writing spans to the store", exc)
                return False
            finally:
                self._close()

    def _insert(self, rows: list[tuple]) -> bool:
        try:
            if self._store is None:
                self._store = Store(self.path)
            self._store.insert(rows_to_table(rows))
            return True
        except (StoreError, duckdb.Error, OSError) as exc:
            self._retry = rows
            self._close()
            report(f"writing spans to the store {self.path}", exc, internal=False)
            return False

    def _close(self) -> None:
        if self._store is not None:
            store, self._store = self._store, None
            try:
                store.close()
            except duckdb.Error as exc:
                report(f"closing the store {self.path}", exc, internal=False)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.write_pending()

    def shutdown(self) -> None:
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout=30)
        if not self.write_pending():
            report(
                f"storing the last spans in {self.path}",
                StoreError(f"{len(self._retry) + len(self._queue)} spans could not be stored at shutdown"),
                internal=False,
            )
