"""A span processor that writes finished spans into a store from a background thread.

The application thread only takes a small snapshot of each finished span (ids,
times, a reference to its attributes) and appends it to a queue; a writer
thread turns snapshots into rows and inserts them in large batches.  Large
batches matter: every call into DuckDB releases and re-takes the GIL, and under
a busy application each re-take can wait a whole switch interval.

Each flush is one write of the shared store (``agentscope.store.shared``): the
file is held only while the batch is inserted.  When another process holds it
for longer than ``lock_wait_s``, rows are kept in memory and retried at the next
flush; past ``memory_rows`` they are spilled to the store's spool (fsynced), for
whichever writer gets the file next.  At shutdown what cannot be written within
``shutdown_wait_s`` is spilled.  Only a spool that cannot be written (disk full,
read-only folder) loses spans: they are counted in ``dropped`` and reported once
through the ``agentscope`` logger.  The application's threads never wait on any
of this: they only append to a queue.

A fork (multiprocessing, gunicorn's and Celery's prefork workers) waits for a write
in progress, so no child inherits one half done (the store's lock, an open DuckDB
file); the child, which has no writer thread, starts its own and leaves the spans
queued before the fork to the parent.

The store's modules (DuckDB, Arrow) are imported, and the store created, by the
first flush with spans to write, on the writer thread: ``ags.init()`` costs the
application nothing for them, and a process that records no span never loads them.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from agentscope import attributes as A
from agentscope.classify import first_token_ns
from agentscope.sdk._safety import report
from agentscope.store.rows import make_row

if TYPE_CHECKING:
    import pyarrow as pa

    from agentscope.store.shared import SharedStore

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
        span.events,
    )


def snapshot_to_row(snap: tuple, keep_content: bool = False) -> tuple:
    """One ``spans`` row from a :func:`snapshot`; content attributes dropped unless ``keep_content``."""
    (trace_id, span_id, parent_id, name, kind, start, end, status, message, service, scope, attrs, events) = (
        snap
    )
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
        keep_content,
        first_token_ns((event.name, event.timestamp) for event in events),
    )


class StoreSpanProcessor(SpanProcessor):
    """Write every finished span into the DuckDB store at ``path``, shared with other processes.

    Every span the provider ends comes here, other instrumentations' too; their prompts and
    completions are dropped like ours unless ``keep_content`` (``ags.init(capture_content=True)``).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        batch_size: int = 8192,
        flush_interval_s: float = 0.5,
        max_pending: int = 500_000,
        memory_rows: int = 50_000,
        lock_wait_s: float = 1.0,
        shutdown_wait_s: float = 5.0,
        keep_content: bool = False,
    ) -> None:
        self.path = Path(path)
        self.keep_content = keep_content
        self._shared: SharedStore | None = None
        self.batch_size = batch_size
        self.flush_interval_s = flush_interval_s
        self.max_pending = max_pending
        self.memory_rows = memory_rows
        self.lock_wait_s = lock_wait_s
        self.shutdown_wait_s = shutdown_wait_s
        self.dropped = 0
        """Spans lost: the queue was full, or the store was busy and the spool could not be written."""
        self.spilled = 0
        """Spans written to the spool for a later writer to load."""
        self._queue: deque[tuple] = deque()
        self._retry: list[tuple] = []
        self._write_lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._thread = self._writer_thread()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(
                before=_weakly(self._before_fork),
                after_in_parent=_weakly(self._after_fork_in_parent),
                after_in_child=_weakly(self._after_fork_in_child),
            )

    def _writer_thread(self) -> threading.Thread:
        thread = threading.Thread(target=self._run, name="agentscope-store-writer", daemon=True)
        thread.start()
        return thread

    def _before_fork(self) -> None:
        self._write_lock.acquire()  # a write in progress ends first: tens of ms, a second if the file is busy

    def _after_fork_in_parent(self) -> None:
        self._write_lock.release()

    def _after_fork_in_child(self) -> None:
        """The child has no writer thread, and its queue holds the parent's spans, which the parent writes."""
        self._queue.clear()
        self._retry = []
        self._write_lock = threading.Lock()
        self._wake = threading.Event()
        if not self._stopping:
            self._thread = self._writer_thread()

    def _open(self) -> SharedStore:
        """The shared store, opened (its modules imported, the file created) when first needed: by the
        first flush that has spans to write.  Called under the write lock.  A store busy with other
        writers already exists."""
        if self._shared is None:
            import duckdb

            from agentscope.store.schema import rows_to_table
            from agentscope.store.shared import SharedStore, StoreBusy
            from agentscope.store.store import StoreError

            rows_to_table([])  # warm Arrow up before the first batch
            self._shared = SharedStore(self.path)
            try:
                with self._shared.writing(self.lock_wait_s):
                    pass
            except StoreBusy:
                pass
            except (StoreError, duckdb.Error, OSError) as exc:
                report(f"opening the store {self.path}", exc, internal=False)
        return self._shared

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        if self._stopping:
            return
        if len(self._queue) >= self.max_pending:
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

    def write_pending(self, wait_s: float | None = None) -> bool:
        """Write everything queued so far in one write; False if it had to be kept or spilled."""
        if not self._queue and not self._retry:
            return True  # before any import: a process that records no span loads no store
        with self._write_lock:  # the imports too: a fork waits for them (a child would inherit their locks)
            import duckdb

            from agentscope.store.schema import rows_to_table
            from agentscope.store.shared import StoreBusy
            from agentscope.store.store import StoreError

            try:
                rows = self._retry
                self._retry = []
                while self._queue:
                    rows.append(snapshot_to_row(self._queue.popleft(), self.keep_content))
                if not rows:
                    return True
                shared = self._open()
                table = rows_to_table(rows)
            except Exception as exc:
                report("writing spans to the store", exc)
                return False
            try:
                shared.insert(table, self.lock_wait_s if wait_s is None else wait_s)
                return True
            except StoreBusy as exc:
                if exc.foreign:  # another agentscope writer is routine; a program outside the protocol is not
                    report(f"writing spans to the store {self.path}", exc, internal=False)
                self._keep(rows, table, spill=len(rows) >= self.memory_rows)
            except (StoreError, duckdb.Error, OSError) as exc:
                report(f"writing spans to the store {self.path}", exc, internal=False)
                self._keep(rows, table, spill=len(rows) >= self.memory_rows)
            return False

    def _keep(self, rows: list[tuple], table: pa.Table, spill: bool) -> None:
        """Keep rows that could not be written for the next flush, or spill them to the spool."""
        if not spill:
            self._retry = rows
            return
        shared = self._open()
        try:
            shared.spill(table)
            self.spilled += len(rows)
        except OSError as exc:
            self.dropped += len(rows)
            report(f"spilling spans to {shared.spool_dir}", exc, internal=False)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.write_pending()

    def shutdown(self) -> None:
        """Flush within ``shutdown_wait_s``; spill what the store would not take in that time."""
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout=30)
        if self.write_pending(self.shutdown_wait_s):
            return
        with self._write_lock:
            from agentscope.store.schema import rows_to_table

            rows, self._retry = self._retry, []
            if rows:
                self._keep(rows, rows_to_table(rows), spill=True)


def _weakly(method: Callable[[], None]) -> Callable[[], None]:
    """``method``, called only while its object lives: a fork hook cannot be unregistered, and must not
    keep a replaced processor alive."""
    ref = weakref.WeakMethod(method)

    def call() -> None:
        alive = ref()
        if alive is not None:
            alive()

    return call
