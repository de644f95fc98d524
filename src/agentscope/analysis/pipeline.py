"""Blame a whole store: read it in batches of traces, analyse each, aggregate once.

The only place the analysis stage touches I/O; everything it calls is pure.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.forkserver
import os
import tempfile
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import replace
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from agentscope.analysis import report
from agentscope.analysis.batch import REQUIRED, SpanBatch, on_file, write_file
from agentscope.analysis.profiles import CandidateProfile
from agentscope.analysis.rows import analyze_rows, results_from_table, results_table, with_services
from agentscope.analysis.tasks import (
    ANALYSIS_VERSION,
    TaskResult,
    TraceExplanation,
    analyze,
    analyze_by_field,
    collector_paused,
    explain,
    task_name_of,
)
from agentscope.analysis.trace import Trace
from agentscope.analysis.whatif import Scenario
from agentscope.store.arrays import numbers, whole
from agentscope.store.paths import holds_parquet
from agentscope.store.query import span_batches, trace_spans
from agentscope.store.schema import INSERT_TASK_ROWS, SCHEMA_VERSION, TASK_ARROW_SCHEMA, TASK_COLUMNS
from agentscope.store.selection import Selection
from agentscope.store.shared import SharedStore, StoreBusy, StoreUnwritable
from agentscope.store.store import Store, StoreError
from agentscope.store.tasks import (
    NO_SERVICES,
    changed_traces,
    kept_since,
    selected_durations,
    selected_rows,
    span_count_of,
    trace_services,
    write_rows,
)

T = TypeVar("T")

PARALLEL_MIN_SPANS = 200_000
"""Below this many spans, starting worker processes costs more than it saves."""


def default_workers(store: Store) -> int:
    """One worker per core for large stores, else analyse in this process."""
    return _workers_for(store.span_count())


def _workers_for(spans: int) -> int:
    """One worker per core for this many spans, if they are many; else this process alone."""
    return (os.cpu_count() or 1) if spans >= PARALLEL_MIN_SPANS else 1


def _without_empty_columns(batch: pa.Table) -> pa.Table:
    """The batch less its optional columns that are null throughout, which the analysis reads as null
    when missing.  An Arrow column of nulls still carries its values: on traces without server
    timings, a worker is sent and unpickles 29% fewer bytes."""
    empty = [
        name for name in batch.column_names if name not in REQUIRED and batch[name].null_count == len(batch)
    ]
    return batch.drop_columns(empty)


def _worker_context() -> BaseContext:
    """Worker processes forked from a server that has imported the analysis once, where the platform
    has one: a spawned worker imports it itself (a quarter of a CPU-second each), and a fork of this
    process would copy the store's threads.  On a million rich spans with two workers, blame took 6%
    less time, and 2% less again with the server started before the first query (the first worker
    waits for its imports).  Spawned elsewhere."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["agentscope.analysis.rows"])
    multiprocessing.forkserver.ensure_running()  # its imports then overlap the first query
    return context


def task_results(
    store: Store | SharedStore,
    variants: Sequence[Mapping[str, float]] = (),
    task_name: str | None = None,
    workers: int | None = None,
    repair: bool = True,
    targets: Sequence[CandidateProfile] = (),
    selection: Selection | None = None,
) -> list[TaskResult]:
    """Every task in the store, or those named ``task_name`` and kept by ``selection``, ordered by trace
    and span id.

    A shared store file answers from its task table (:func:`kept_results`); an open store is analysed
    whole.  The selection is pushed into the store query (only traces that may hold a selected task
    are read), then checked exactly on each task.
    """
    if task_name is not None:
        selection = replace(selection or Selection(), task=task_name)
    if isinstance(store, SharedStore):
        return kept_results(store, variants, workers, repair, targets, selection)
    workers = default_workers(store) if workers is None else workers
    batches = span_batches(store, selection)
    results = analysed(batches, variants, selection.task if selection else None, workers, repair, targets)
    if selection:
        results = [r for r in results if selection.admits(r.name, r.start_ns)]
    return _ordered(results)


def _ordered(results: list[TaskResult]) -> list[TaskResult]:
    """One order for every way of getting the same tasks (a report's ties, a budget's model order)."""
    results.sort(key=lambda r: (r.trace_id or "", r.span_id))
    return results


def analysed(
    batches: Iterable[pa.Table],
    variants: Sequence[Mapping[str, float]],
    task_name: str | None,
    workers: int,
    repair: bool,
    targets: Sequence[CandidateProfile],
) -> list[TaskResult]:
    """The tasks of batches of whole traces, analysed in ``workers`` processes (:func:`each_batch`)."""
    options = {"task_name": task_name, "repair": repair, "targets": targets}
    if workers <= 1:
        return [r for batch in batches for r in analyze(batch, variants, **options)]
    results: list[TaskResult] = []
    for fields in each_batch(batches, analyze_by_field, workers, variants, **options):
        results.extend(map(TaskResult, *fields))
    return results


def analysed_rows(batches: Iterable[pa.Table], workers: int) -> pa.Table:
    """The task table's rows of batches of whole traces, with every kept what-if (``ROW_VARIANTS``) and
    their services null (``rows.with_services``), built in ``workers`` processes."""
    tables = list(each_batch(batches, analyze_rows, workers, ROW_VARIANTS, task_name=None, repair=True))
    return pa.concat_tables(tables) if tables else results_table([])


def each_batch(
    batches: Iterable[pa.Table],
    work: Callable[..., T],
    workers: int,
    variants: Sequence[Mapping[str, float]],
    **options: Any,
) -> Iterator[T]:
    """``work(batch, variants, **options)`` of each batch, in order.  Batches are independent, so with
    ``workers`` > 1 they are worked on in worker processes, at most one batch ahead of each worker,
    each handed over as a file (``batch.on_file``) in a folder of this process' own."""
    if workers <= 1:
        for batch in batches:
            yield work(batch, variants, **options)
        return
    with (
        _handover_folder() as folder,
        ProcessPoolExecutor(max_workers=workers, mp_context=_worker_context()) as pool,
        collector_paused(),
    ):
        pending: deque[tuple[Future[T], str | None]] = deque()
        for n, batch in enumerate(batches):
            batch = _without_empty_columns(batch)
            path = _handed_over(batch, folder, n)
            if path is None:
                pending.append((pool.submit(work, batch, variants, **options), None))
            else:
                pending.append((pool.submit(on_file, work, path, variants, **options), path))
            while len(pending) > workers:
                yield _handed_back(*pending.popleft())
        while pending:
            yield _handed_back(*pending.popleft())


@contextlib.contextmanager
def _handover_folder() -> Iterator[str | None]:
    """A temporary folder for the batches handed to workers; None where none can be made."""
    try:
        folder = tempfile.TemporaryDirectory(prefix="agentscope-batches-", ignore_cleanup_errors=True)
    except OSError:
        yield None
        return
    with folder as path:
        yield path


def _handed_over(batch: pa.Table, folder: str | None, n: int) -> str | None:
    """The file ``batch`` was written to for a worker, or None where it could not be (no folder, a full
    or read-only disk): the batch is then pickled to the worker, as it would be without files."""
    if folder is None:
        return None
    path = os.path.join(folder, f"{n}.arrow")
    try:
        write_file(batch, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(path)
        return None
    return path


def _handed_back(future: Future[T], path: str | None) -> T:
    """A worker's answer; the file of its batch, if it had one, is removed."""
    answer = future.result()
    if path is not None:
        os.unlink(path)
    return answer


ROW_VARIANTS = report.variants(report.ROW_SCENARIOS)
"""The what-if times every row of the task table carries, in this order."""
ROW_VERSION = f"{ANALYSIS_VERSION}/{zlib.crc32(repr(ROW_VARIANTS).encode()):08x}"
"""A row's analysis version: the analysis' own, and which what-ifs it keeps (rows of another are redone)."""
LIVE_READ_MAX_SPANS = 200_000
"""Changed spans read from the store itself under the shared lock, at most; past that (a first
analysis, a large ingest) they are read from a snapshot, so that writers are not kept out for long."""
KEPT_CHUNKS = 64
"""Chunks a table of rows brought up to date (:func:`kept_rows`) may have before it is copied into one."""
ROW_WRITE_WAIT_S = 1.0
"""How long a reader waits to write its new rows back; a reader that cannot leaves them to the next."""
HELD_ROWS_S = 5.0
"""Seconds a reader holding its rows (the UI) keeps new rows back before writing them: :class:`HeldRows`."""


def row_picks(
    variants: Sequence[Mapping[str, float]], repair: bool, targets: Sequence[object]
) -> list[int] | None:
    """Where each of ``variants`` is among a row's what-if times (``ROW_VARIANTS``); None when rows
    cannot answer."""
    if not repair or targets:
        return None
    picks = []
    for variant in variants:
        found = next((i for i, kept in enumerate(ROW_VARIANTS) if dict(kept) == dict(variant)), None)
        if found is None:
            return None
        picks.append(found)
    return picks


def _every_whatif(picks: Sequence[int]) -> bool:
    """Whether ``picks`` are each row's what-ifs as they are kept (nothing to pick)."""
    return list(picks) == list(range(len(ROW_VARIANTS)))


class _Kept(NamedTuple):
    """What a reader reads of the store for :func:`kept_results`."""

    changed: pa.Table
    """(trace_id, seq) of the traces written since their rows were kept."""
    rows: pa.Table
    """The selected rows of every other trace."""
    services: pa.Table | None
    """(trace_id, services) of the changed traces that name any; None where their spans are not read."""
    batches: list[pa.Table] | None
    """The changed traces' spans, or None when there are more than a read under the lock takes."""
    version: tuple[int, int]
    """The store's content as read (:meth:`Store.content_version`): its write sequence number first."""
    replaced: pa.Table | None
    """Where the caller holds rows as of a write (``since``): ``rows`` are only those kept after it, and
    these are the traces (trace_id) of every row kept after it, whether ``rows`` selects them or not
    (the caller's rows of those are out of date).  None where ``rows`` are all of them."""


class KeptRows(NamedTuple):
    """Rows of the task table as a read found them (:func:`kept_rows`), to be brought up to date by
    the next read."""

    table: pa.Table
    seq: int | None
    """The store's write sequence number when they were read; None when they cannot be brought up to
    date (an older store answered from its spans)."""
    version: tuple[int, int]
    """The store's content when they were read (:meth:`Store.content_version`): what an answer from them
    is current for."""


class HeldRows:
    """New rows that a reader holding its rows (:func:`kept_rows` with ``previous``; the UI) holds back,
    to write them at most once every ``every_s`` seconds, each trace's newest analysis only.

    The rows matter only to other readers: this one keeps its own.  Writing them back at each read
    took the store's lock twice more and rewrote part of the task table each time: at ten million
    spans while an app wrote, a UI refresh spent about a third of its time on it.  A due write runs on
    a thread of its own, which the read that made it due does not wait for: that read would otherwise
    wait for the store's lock behind the app's writes (up to ``ROW_WRITE_WAIT_S``), and then for the
    write.  The holder writes what it still holds as it stops
    (:meth:`write`); rows held when a process dies are analysed again by the next reader."""

    def __init__(self, every_s: float = HELD_ROWS_S) -> None:
        self.every_s = every_s
        self._held: list[tuple[pa.Table, pa.Table]] = []
        self._since = time.monotonic()
        self._lock = threading.Lock()
        self._writing: threading.Thread | None = None

    def add(self, shared: SharedStore, changed: pa.Table, rows: pa.Table) -> None:
        """Hold the rows of freshly analysed traces (``changed``: their trace_id and seq, as read); once a
        write is due, start writing every row held to ``shared``."""
        with self._lock:
            self._held.append((changed, rows))
            if time.monotonic() - self._since < self.every_s:
                return
            held, earlier = self._taken(), self._writing
            self._writing = threading.Thread(
                target=_write_held, args=(shared, held, earlier), name="agentscope-held-rows"
            )
            self._writing.start()

    def wait(self) -> None:
        """Until the write under way, if any, has ended."""
        with self._lock:
            writing = self._writing
        if writing is not None:
            writing.join()

    def write(self, shared: SharedStore) -> None:
        """Write every row held now, due or not (a holder that stops), after the write under way."""
        self.wait()
        with self._lock:
            held = self._taken()
        if held:
            _write_held(shared, held)

    def _taken(self) -> list[tuple[pa.Table, pa.Table]]:
        """Every held pair, no longer held (called with the lock)."""
        held, self._held, self._since = self._held, [], time.monotonic()
        return held


def _write_held(
    shared: SharedStore, held: Sequence[tuple[pa.Table, pa.Table]], earlier: threading.Thread | None = None
) -> None:
    """Write the ``held`` pairs as one, after the ``earlier`` write (so a trace's rows land in the order
    they were analysed)."""
    if earlier is not None:
        earlier.join()
    _write_back(shared, *_newest(held))


def _newest(held: Sequence[tuple[pa.Table, pa.Table]]) -> tuple[pa.Table, pa.Table]:
    """``(changed, rows)`` pairs, oldest first, as one pair: a trace analysed again keeps only its newest
    analysis' mark and rows."""
    newer = pa.nulls(0, pa.string())
    changed_parts, row_parts = [], []
    for changed, rows in reversed(held):
        changed_parts.append(_without(changed, newer))
        row_parts.append(_without(rows, newer))
        newer = pa.concat_arrays([newer, whole(changed.column("trace_id"))])
    changed = pa.concat_tables([part.select(["trace_id", "seq"]) for part in changed_parts])
    return changed, pa.concat_tables(row_parts)


_WRITES_ASIDE: ContextVar[list[threading.Thread] | None] = ContextVar("agentscope_writes_aside", default=None)


@contextlib.contextmanager
def writes_aside() -> Iterator[None]:
    """Within the block, :func:`kept_rows` writes fresh rows back on a thread of its own, joined as the
    block ends: a report is aggregated from the rows while they are written (at ten million spans, a
    second of each).  Outside it, they are written before ``kept_rows`` returns."""
    threads: list[threading.Thread] = []
    token = _WRITES_ASIDE.set(threads)
    try:
        yield
    finally:
        _WRITES_ASIDE.reset(token)
        for thread in threads:
            thread.join()


def kept_results(
    shared: SharedStore,
    variants: Sequence[Mapping[str, float]] = (),
    workers: int | None = None,
    repair: bool = True,
    targets: Sequence[CandidateProfile] = (),
    selection: Selection | None = None,
) -> list[TaskResult]:
    """The selected tasks of a shared store file from its task table (DESIGN §15).

    Only the traces written since their rows were kept are analysed (and their rows written back, if
    the file can be had within ``ROW_WRITE_WAIT_S``); every other task is read from its row.  What rows
    cannot answer (another what-if, a target, ``repair=False``) is analysed on demand from a snapshot.
    """
    picks = row_picks(variants, repair, targets)
    if picks is None:
        with shared.reading() as store:
            return task_results(store, variants, None, workers, repair, targets, selection)
    return _ordered(results_from_table(kept_table(shared, picks, workers, selection)))


def kept_table(
    shared: SharedStore,
    picks: Sequence[int],
    workers: int | None = None,
    selection: Selection | None = None,
    columns: Sequence[str] | None = None,
    window_at: float | None = None,
) -> pa.Table:
    """:func:`kept_results` as a per-task table (``analysis.rows``), its what-ifs the ``picks`` of each
    row's: what a report aggregates column by column (``report.Population.of_table``).  Only the
    ``columns`` given (all where not given); with ``window_at``, a percentile, ``operations`` only of the
    tasks that may be in the budget's window at it (``report.window_durations``), null elsewhere."""
    return kept_rows(shared, picks, workers, selection, columns=columns, window_at=window_at).table


def kept_rows(
    shared: SharedStore,
    picks: Sequence[int],
    workers: int | None = None,
    selection: Selection | None = None,
    previous: KeptRows | None = None,
    held: HeldRows | None = None,
    columns: Sequence[str] | None = None,
    window_at: float | None = None,
) -> KeptRows:
    """:func:`kept_table`, brought up to date from ``previous`` (an earlier answer of the same picks,
    selection and ``columns``) where it can be: only the rows kept since and the traces written since
    are read, so a reader that asks again and again while the app writes (the UI) does not read every
    row each time.  Every row is read again after a write that deleted traces.  New rows are written
    back by ``held`` when due, if given (:class:`HeldRows`, on its own thread), else at once (within
    :func:`writes_aside`, beside the caller's work).  ``window_at`` is for a
    reader without ``previous``."""
    picks = list(picks)
    since = previous.seq if previous is not None else None
    reading = _Reading(selection, picks, columns, None if previous is not None else window_at)

    def read(store: Store, live: bool = True) -> _Kept | None:
        return _read_kept(store, reading, live, since)

    try:
        kept = shared.read(read)
        if kept is None:  # spans written outside agentscope's writers: every trace is analysed again
            with shared.writing(ROW_WRITE_WAIT_S) as store:
                store.mark_all_written()
            kept = shared.read(read)
    except (StoreBusy, StoreUnwritable, OSError):  # busy, or an older store in a read-only folder
        kept = None
    if (  # nothing written or kept since the previous read: its rows as they are
        previous is not None
        and kept is not None
        and kept.replaced is not None
        and not (len(kept.changed) or len(kept.replaced))
    ):
        return previous._replace(seq=kept.version[0], version=kept.version)
    if kept is not None and kept.batches is not None:
        fresh = analysed_rows(kept.batches, workers or 1)
    else:
        with shared.reading() as store:  # a snapshot, since the file is busy or the change is large
            if store.version < SCHEMA_VERSION or store.unmarked_writes():  # no table to answer from
                variants = [ROW_VARIANTS[i] for i in picks]
                results = task_results(store, variants, None, workers, True, (), selection)
                rows = results_table(results, [[] for _ in results])
                return KeptRows(rows.select(reading.schema.names), None, store.content_version())
            kept = kept or read(store, live=False)
            spans = span_count_of(store, kept.changed)
            workers = _workers_for(spans) if workers is None else workers
            with ThreadPoolExecutor(max_workers=1) as aside:  # DuckDB's scan runs beside the walk
                services = aside.submit(trace_services, store, kept.changed)
                fresh = analysed_rows(span_batches(store, traces=kept.changed, spans=spans), workers)
                kept = kept._replace(services=services.result())
    fresh = with_services(fresh, kept.services)
    if len(kept.changed):
        keep = _write_aside if held is None else held.add
        keep(shared, kept.changed, fresh)
    every = _every_whatif(picks)
    if not fresh.num_rows or (not selection and every):
        selected = fresh
    else:
        with Store(None) as scratch:
            scratch.con.register("agentscope_fresh", fresh)
            whatifs = None if every else picks
            selected = selected_rows(scratch, selection, None, whatifs, table="agentscope_fresh")
    schema = reading.schema
    table = pa.concat_tables([kept.rows.cast(schema), selected.select(schema.names).cast(schema)])
    if kept.replaced is not None and previous is not None:  # the earlier rows, less the traces read again
        again = pa.concat_arrays(
            [
                whole(kept.changed.column("trace_id")),
                whole(kept.replaced.column("trace_id")),
            ]
        )
        earlier = [_without(batch, again) for batch in previous.table.to_batches()]
        table = pa.concat_tables([pa.Table.from_batches(earlier, previous.table.schema), table])
        if table.column("trace_id").num_chunks > KEPT_CHUNKS:  # each read adds one: a long run adds many
            table = table.combine_chunks()
    return KeptRows(table, kept.version[0], kept.version)


class TaskTableError(ValueError):
    """Saved task tables that cannot answer: the message says which and why."""


def saved_results(
    paths: Sequence[Path],
    variants: Sequence[Mapping[str, float]] = (),
    selection: Selection | None = None,
) -> list[TaskResult]:
    """The selected tasks of per-task tables saved as Parquet (files or folders of them): the store's
    (``agentscope export --tasks``) or a Spark run's (``blame --engine spark --tasks-out``).

    Tables add up, so a month of daily tables answers for the month without a span read again.  Their
    what-if times must hold ``variants``; a Spark run's keeps the scenarios it was run with.
    """
    named = ", ".join(map(str, paths))
    with Store(None) as store:
        try:
            store.con.execute(
                "CREATE TEMP TABLE agentscope_saved AS SELECT * FROM read_parquet(?, union_by_name = true)",
                [[_parquet_files(path) for path in paths]],
            )
            _check_task_columns(store, paths)
            store.con.execute(f"{INSERT_TASK_ROWS} FROM agentscope_saved")
            kept = store.scalar("SELECT min(len(whatif_ns)) FROM agentscope_saved")
        except duckdb.Error as exc:  # its first line: the rest quotes agentscope's SQL, not the user's
            raise TaskTableError(f"cannot read task tables {named}: {str(exc).splitlines()[0]}") from None
        unnamed = "SELECT count(*) FROM tasks WHERE services IS NULL"
        if selection is not None and selection.service is not None and store.scalar(unnamed):
            raise TaskTableError("--service: these task tables name no services (a Spark run's do not)")
        results = results_from_table(selected_rows(store, selection))
    picks = row_picks(variants, True, ())
    kept = len(ROW_VARIANTS) if kept is None else int(kept)
    if picks is None or any(i >= kept for i in picks):
        raise TaskTableError("the task tables do not hold these what-if scenarios: analyse the spans instead")
    for result in results:
        result.whatif_ns = [result.whatif_ns[i] for i in picks]
    return _ordered(results)


_SAVED_BY = "`agentscope export --tasks --out DIR` or `agentscope blame --engine spark --tasks-out DIR`"
"""What writes the task tables ``saved_results`` reads, for its messages."""


def _parquet_files(path: Path) -> str:
    """The files (a glob for a folder's) ``read_parquet`` reads for one ``--tasks`` path."""
    if not path.is_dir():
        return str(path)
    if not holds_parquet(path):
        raise TaskTableError(f"{path} holds no Parquet files; task tables are written by {_SAVED_BY}")
    return str(path / "**" / "*.parquet")


def _check_task_columns(store: Store, paths: Sequence[Path]) -> None:
    """Refuse Parquet that is not a per-task table (an export of spans, say), naming what it lacks."""
    present = {row[0] for row in store.con.execute("DESCRIBE agentscope_saved").fetchall()}
    required = [name for name, sql_type, _ in TASK_COLUMNS if sql_type.endswith("NOT NULL")]
    missing = [name for name in required if name not in present]
    if not missing:
        return
    spans = "span_id" in present and "parent_id" in present
    hint = (
        f"these are spans: analyse them with `agentscope blame --engine spark {' '.join(map(str, paths))}`"
        if spans
        else f"task tables are written by {_SAVED_BY}"
    )
    named = ", ".join(map(str, paths))
    raise TaskTableError(f"{named} is not a task table (no column {', '.join(missing[:3])}): {hint}")


def _without(batch: pa.RecordBatch | pa.Table, traces: pa.Array) -> pa.RecordBatch | pa.Table:
    """``batch`` less the rows of ``traces``; the batch itself when it has none, as the older batches of
    rows brought up to date mostly do (the traces read again are the ones still being written)."""
    again = pc.is_in(batch.column("trace_id"), value_set=traces)
    return batch.filter(pc.invert(again)) if pc.any(again).as_py() else batch


class _Reading(NamedTuple):
    """What :func:`kept_rows` reads of the rows kept: its arguments of that name."""

    selection: Selection | None
    picks: list[int]
    columns: Sequence[str] | None
    window_at: float | None

    @property
    def schema(self) -> pa.Schema:
        if self.columns is None:
            return TASK_ARROW_SCHEMA
        return pa.schema([TASK_ARROW_SCHEMA.field(name) for name in self.columns])


def _read_kept(store: Store, reading: _Reading, live: bool, since: int | None = None) -> _Kept | None:
    """The changed traces, the other traces' selected rows (with the ``picks`` of their what-ifs) and,
    ``live``, the changed traces' spans; None when spans were written by other means than agentscope's
    writers, which marked no trace.

    With ``since`` (unless traces were deleted after that write), the caller holds the rows of every
    trace as it stood then: only the traces written after it can have changed, and only the rows kept
    after it are read.  With ``window_at``, the changed traces' spans bound how many tasks their
    analysis adds, and so where the budget's window can lie among the rows read."""
    if store.unmarked_writes():
        return None
    version = store.content_version()
    if since is not None and store.deleted_seq() > since:
        since = None
    changed = changed_traces(store, ROW_VERSION, since)
    counted = len(changed) > 0 and (live or reading.window_at is not None)
    spans = span_count_of(store, changed) if counted else 0
    between = None
    if reading.window_at is not None and since is None:
        durations = numbers(selected_durations(store, reading.selection, changed))
        between = report.window_durations(durations, reading.window_at, spans)
    picks = None if _every_whatif(reading.picks) else reading.picks
    rows = selected_rows(store, reading.selection, changed, picks, since, "tasks", reading.columns, between)
    replaced = None if since is None else kept_since(store, since)
    if not len(changed):
        return _Kept(changed, rows, NO_SERVICES, [], version, replaced)
    if not live or spans > LIVE_READ_MAX_SPANS:
        return _Kept(changed, rows, None, None, version, replaced)  # services read with the spans
    batches = list(span_batches(store, traces=changed, spans=spans))
    return _Kept(changed, rows, trace_services(store, changed), batches, version, replaced)


def _write_aside(shared: SharedStore, changed: pa.Table, rows: pa.Table) -> None:
    """:func:`_write_back` at once, or on a thread beside the caller's work within :func:`writes_aside`."""
    aside = _WRITES_ASIDE.get()
    if aside is None:
        _write_back(shared, changed, rows)
        return
    writer = threading.Thread(target=_write_back, args=(shared, changed, rows))
    writer.start()
    aside.append(writer)


def _write_back(shared: SharedStore, changed: pa.Table, rows: pa.Table) -> None:
    """Keep the fresh rows; a store that cannot be written now (busy, read-only) keeps its old ones."""
    try:
        with shared.writing(ROW_WRITE_WAIT_S) as store:
            write_rows(store, rows, changed, ROW_VERSION)
    except (StoreError, OSError, duckdb.Error):
        return


def blame_store(
    store: Store | SharedStore,
    scenarios: Sequence[Scenario] = report.DEFAULT_SCENARIOS,
    percentile: float = 95,
    task_name: str | None = None,
    headline: Scenario | None = None,
    workers: int | None = None,
    repair: bool = True,
    targets: Sequence[CandidateProfile] = (),
    selection: Selection | None = None,
) -> dict[str, Any] | None:
    """The ``agentscope.blame/v1`` report of the store's selected tasks, or None when there is none.

    The collector stays paused until the report is built: the results were made while it was, so its
    first pass would walk every one of them (a third of a second per million spans) to free nothing.
    """
    variants = report.variants(scenarios)
    with collector_paused():
        picks = row_picks(variants, repair, targets) if isinstance(store, SharedStore) else None
        if picks is not None:  # the task table answers: aggregated column by column
            if task_name is not None:
                selection = replace(selection or Selection(), task=task_name)
            with writes_aside():
                try:
                    table = kept_table(store, picks, workers, selection, report.REPORT_COLUMNS, percentile)
                    return blame_table(table, scenarios, percentile, headline)
                except report.OperationsNotRead:  # spans arrived between the read and the analysis
                    table = kept_table(store, picks, workers, selection, report.REPORT_COLUMNS)
                return blame_table(table, scenarios, percentile, headline)
        results = task_results(store, variants, task_name, workers, repair, targets, selection)
        if not results:
            return None
        return report.blame(results, scenarios, percentile, headline, targets)


def latency_curve(
    store: Store | SharedStore, selection: Selection | None = None, repair: bool = True
) -> tuple[list[tuple[float, float, float]], list[float]] | None:
    """The budget's what-if curve (``report.curve_points``) and the selected tasks' durations in ms,
    ascending; from the task table column by column where it answers.  None when no task is selected."""
    curve = report.curve_scenarios()
    variants = report.variants(curve)
    picks = row_picks(variants, repair, ()) if isinstance(store, SharedStore) else None
    if picks is not None:
        with writes_aside():
            return curve_table(kept_table(store, picks, None, selection, report.CURVE_COLUMNS))
    results = task_results(store, variants, None, None, repair, (), selection)
    if not results:
        return None
    durations = np.array([r.duration_ns for r in results], dtype=np.int64)
    whatifs = np.array([r.whatif_ns for r in results], dtype=np.float64)
    return report.curve_points(whatifs.T, curve), (np.sort(durations) / 1e6).tolist()


def blame_table(
    table: pa.Table,
    scenarios: Sequence[Scenario] = report.DEFAULT_SCENARIOS,
    percentile: float = 95,
    headline: Scenario | None = None,
    picks: Sequence[int] | None = None,
) -> dict[str, Any] | None:
    """:func:`blame_store`'s report from rows of the task table (:func:`kept_table`), or None when there
    are none.  The rows' what-if times are the ``scenarios``' variants, or hold them at ``picks``
    (:func:`row_picks`): one read of every row's what-ifs can answer several questions."""
    if not table.num_rows:
        return None
    with collector_paused():  # a window's operations are thousands of dicts, which the collector would walk
        population = report.Population.of_table(table, percentile, picks)
    return report.render(population, scenarios, percentile, headline)


def curve_table(
    table: pa.Table, picks: Sequence[int] | None = None
) -> tuple[list[tuple[float, float, float]], list[float]] | None:
    """:func:`latency_curve` from rows of the task table whose what-ifs are the curve's variants, or hold
    them at ``picks``; None when there are no rows."""
    if not table.num_rows:
        return None
    whatifs = report.list_columns(table.column("whatif_ns"), picks)
    durations = numbers(table.column("duration_ns"))
    return report.curve_points(whatifs, report.curve_scenarios()), (np.sort(durations) / 1e6).tolist()


def blame_saved(
    paths: Sequence[Path],
    scenarios: Sequence[Scenario] = report.DEFAULT_SCENARIOS,
    percentile: float = 95,
    headline: Scenario | None = None,
    selection: Selection | None = None,
) -> dict[str, Any] | None:
    """The ``agentscope.blame/v1`` report of saved per-task tables (:func:`saved_results`), or None when
    they hold no selected task."""
    results = saved_results(paths, report.variants(scenarios), selection)
    return report.blame(results, scenarios, percentile, headline) if results else None


def explain_stored_trace(
    store: Store, trace_id: str, *, repair: bool = True, selection: Selection | None = None
) -> TraceExplanation | None:
    """The first task of one stored trace (the first ``selection`` admits), explained; None if the
    trace is not in the store (or holds no task the selection admits).

    A trace that holds no task has its earliest root explained instead
    (``is_task`` is False), so any trace can be drawn.
    """
    batch = SpanBatch.from_any(trace_spans(store, trace_id))
    if not len(batch):
        return None
    trace = Trace.build(batch, range(len(batch)), repair=repair)
    tasks = sorted(trace.tasks(), key=lambda i: trace.start[i])
    if selection:
        tasks = [i for i in tasks if selection.admits(task_name_of(trace, i), trace.start[i])]
        if not tasks:
            return None
    if tasks:
        return explain(trace, tasks[0])
    root = min(trace.roots or range(len(trace)), key=lambda i: (trace.start[i], -trace.end[i]))
    explanation = explain(trace, root)
    explanation.is_task = False
    return explanation
