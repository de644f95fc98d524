"""Load trace files into a store: streaming, idempotent, and honest about bad input.

Rows are written in batches, each one ``INSERT OR IGNORE`` statement, so an
interrupted ingest leaves whole batches only, and loading a span twice stores it
once.  Every problem is kept with its file and line; the good spans of a file
are stored whatever else is wrong with it.
"""

from __future__ import annotations

import os
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from agentscope.ingest import otlp_duckdb
from agentscope.ingest.batching import BATCH_ROWS, Batcher, Problem
from agentscope.ingest.otlp import json_lines_records
from agentscope.ingest.records import Record
from agentscope.ingest.sources import UnknownFormat, expand, open_detected, records, stream_problem
from agentscope.store.rows import without_content
from agentscope.store.schema import rows_to_table
from agentscope.store.shared import SharedStore
from agentscope.store.store import Inserted, Store

Sink = Store | SharedStore
"""Where an ingest writes: a store this process holds, or a store file shared with other processes."""

KEPT_PROBLEMS = 50


@dataclass
class IngestSummary:
    """What an ingest read, stored and skipped."""

    files: int = 0
    formats: Counter[str] = field(default_factory=Counter)
    spans_read: int = 0
    stored: int = 0
    already_stored: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    problems: list[Problem] = field(default_factory=list)
    problem_count: int = 0
    traces: int = 0
    tasks: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.problem_count == 0

    def add_problem(self, problem: Problem, skipped: bool) -> None:
        self.problem_count += 1
        if skipped:
            self.skipped[_reason_kind(problem.reason)] += 1
        if len(self.problems) < KEPT_PROBLEMS:
            self.problems.append(problem)


def _reason_kind(reason: str) -> str:
    """A short, countable form of a reason ("invalid JSON: ..." → "invalid JSON")."""
    head = reason.split(":", 1)[0]
    return head if len(head) <= 60 else head[:57] + "..."


class _Writer:
    """Writes batches of one file into the store and reports spans stored before with other content.

    The store's work runs on a thread of its own, one batch at a time, while the
    next batch is parsed (both are DuckDB work that releases the GIL); each
    batch's outcome is counted on the calling thread, in order.
    """

    def __init__(
        self,
        store: Sink,
        summary: IngestSummary,
        name: str,
        progress: Callable[[int], None] | None,
        traces: set[str],
    ) -> None:
        self.store, self.summary, self.name, self.progress = store, summary, name, progress
        self.traces = traces
        self.thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentscope-ingest")
        self.in_flight: tuple[Future[Inserted], pa.Table, list[int]] | None = None

    def write(self, batch: pa.Table, lines: list[int]) -> None:
        self.wait()
        if batch.num_rows:
            self.in_flight = (self.thread.submit(self._store, batch), batch, lines)

    def wait(self) -> None:
        """Count the outcome of the batch being written (raising what writing it raised)."""
        if self.in_flight is None:
            return
        future, batch, lines = self.in_flight
        self.in_flight = None
        inserted = future.result()
        added, conflicts = inserted.added, inserted.conflicts
        if conflicts:
            keys = zip(batch.column("trace_id").to_pylist(), batch.column("span_id").to_pylist(), strict=True)
            for (trace_id, span_id), line in zip(keys, lines, strict=True):
                if (trace_id, span_id) in conflicts:
                    reason = f"span {span_id} is already stored with different content; kept the stored one"
                    self.summary.add_problem(Problem(self.name, line, reason), skipped=True)
        self.summary.stored += added
        self.summary.already_stored += batch.num_rows - added - len(conflicts)
        if self.progress is not None:
            self.progress(batch.num_rows)

    def close(self) -> None:
        try:
            self.wait()
        finally:
            self.thread.shutdown()

    def _store(self, batch: pa.Table) -> Inserted:
        inserted = self.store.insert(batch)
        self.traces.update(pc.unique(batch.column("trace_id")).to_pylist())
        return inserted


class _Batches:
    """Hands rows to the writer in batches of exactly BATCH_ROWS (the last may be smaller).

    Whichever reader produced them, a killed ingest then leaves whole batches only.
    """

    def __init__(self, writer: _Writer) -> None:
        self.writer = writer
        self.tables: list[pa.Table] = []
        self.lines: list[int] = []
        self.rows = 0

    def add(self, table: pa.Table, lines: list[int]) -> None:
        if not table.num_rows:
            return
        self.tables.append(table)
        self.lines += lines
        self.rows += table.num_rows
        while self.rows >= BATCH_ROWS:
            self._write(BATCH_ROWS)

    def flush(self) -> None:
        """Write what is left and wait until every batch is stored."""
        try:
            if self.rows:
                self._write(self.rows)
        finally:
            self.writer.close()

    def abandon(self) -> None:
        """Stop (Ctrl-C): let the batch being written finish, drop the rows not yet written."""
        self.tables, self.lines, self.rows = [], [], 0
        self.writer.close()

    def _write(self, size: int) -> None:
        table = pa.concat_tables(self.tables)
        self.writer.write(table.slice(0, size), self.lines[:size])
        rest = table.slice(size)
        self.tables = [rest] if rest.num_rows else []
        self.lines, self.rows = self.lines[size:], rest.num_rows


@dataclass
class _Position:
    """The last line read from a file, to name where it ended if it ends early."""

    line: int = 0


def _take_records(
    records: Iterable[Record],
    name: str,
    batches: _Batches,
    summary: IngestSummary,
    position: _Position,
    keep_content: bool,
) -> None:
    """Pass a Python reader's records to ``batches``; problems go to ``summary``."""
    batcher = Batcher(name)
    try:
        for record in records:
            position.line = max(position.line, record.line)
            if record.row is not None:
                summary.spans_read += 1
                row = record.row if keep_content else without_content(record.row)
                if batcher.add(row, record.line):
                    rows, lines = batcher.take()
                    batches.add(rows_to_table(rows), lines)
            if record.problem is not None:
                summary.add_problem(Problem(name, record.line, record.problem), skipped=record.row is None)
    finally:
        rows, lines = batcher.take()
        if rows:
            batches.add(rows_to_table(rows), lines)
        summary.already_stored += batcher.repeats
        for problem in batcher.problems:
            summary.add_problem(problem, skipped=True)


def _take_json_lines(
    stream: IO[bytes],
    name: str,
    batches: _Batches,
    summary: IngestSummary,
    position: _Position,
    keep_content: bool,
) -> None:
    """OTLP JSON lines through DuckDB; the lines it leaves go through the Python reader.

    If a span of a line left to the Python reader is also on a line DuckDB took,
    which one is kept depends on their order, so that block is read by the
    Python reader alone.
    """
    with stream, closing(otlp_duckdb.connect_parser()) as con:
        for parsed in otlp_duckdb.parse_blocks(con, otlp_duckdb.blocks(stream), keep_content):
            first, block = parsed.first, parsed.block
            left = list(json_lines_records((n, block[n - first]) for n in parsed.routed))
            if _overlap(parsed.table, left):
                left = list(json_lines_records(enumerate(block, start=first)))
            else:
                summary.spans_read += parsed.table.num_rows
                batches.add(parsed.table, parsed.lines)
            _take_records(left, name, batches, summary, position, keep_content)
            position.line = first + len(block) - 1


def _overlap(table: pa.Table, records: list[Record]) -> bool:
    """Whether any record's span is also in ``table``."""
    keys = {(r.row[0], r.row[1]) for r in records if r.row is not None}
    if not keys or not table.num_rows:
        return False
    taken = zip(table.column("trace_id").to_pylist(), table.column("span_id").to_pylist(), strict=True)
    return any(key in keys for key in taken)


def ingest_file(
    store: Sink,
    path: Path,
    summary: IngestSummary,
    progress: Callable[[int], None] | None = None,
    traces: set[str] | None = None,
    keep_content: bool = False,
) -> None:
    """Load one file into ``store``, recording its problems in ``summary`` and its trace ids in ``traces``.

    Prompts, completions and query text in the file's spans are dropped unless ``keep_content``
    (a store file is merged as it is: its writer chose)."""
    traces = set() if traces is None else traces
    name = str(path)
    if store.path is not None and path.resolve() == store.path.resolve():
        summary.skipped["the store being written"] += 1  # a folder that holds its store: nothing to add
        return
    summary.files += 1
    try:
        fmt, stream = open_detected(path)
    except (UnknownFormat, OSError) as exc:
        summary.add_problem(Problem(name, 0, f"cannot read: {exc}"), skipped=False)
        return
    summary.formats[fmt] += 1
    if fmt == "store":
        stream.close()
        try:
            read, added, trace_ids = store.merge(path)
        except duckdb.Error as exc:
            summary.add_problem(Problem(name, 0, f"cannot read the store: {exc}"), skipped=False)
            return
        summary.spans_read += read
        summary.stored += added
        summary.already_stored += read - added
        traces.update(trace_ids)
        return
    batches = _Batches(_Writer(store, summary, name, progress, traces))
    position = _Position()
    try:
        if fmt == "otlp-json-lines":
            _take_json_lines(stream, name, batches, summary, position, keep_content)
        else:
            _take_records(records(fmt, stream), name, batches, summary, position, keep_content)
        cut = stream_problem(stream)
        if cut is not None:
            where = f"after line {position.line:,}" if position.line else "before its first whole line"
            summary.add_problem(
                Problem(name, position.line + 1, f"{cut} {where}; the lines before it were kept"),
                skipped=False,
            )
    except (EOFError, OSError, zlib.error) as exc:
        summary.add_problem(Problem(name, position.line + 1, f"the file ends early: {exc}"), skipped=False)
    except UnicodeDecodeError as exc:
        summary.add_problem(Problem(name, position.line + 1, f"not UTF-8 text: {exc.reason}"), skipped=False)
    except BaseException:
        batches.abandon()
        raise
    batches.flush()


def ingest(
    store: Sink,
    paths: Iterable[str | os.PathLike[str]],
    progress: Callable[[int], None] | None = None,
    *,
    keep_content: bool = False,
) -> IngestSummary:
    """Load files and folders of traces (paths, as text or ``Path``) into ``store``; see
    :class:`IngestSummary`.

    ``store`` is a :class:`Store` this process holds, or a :class:`SharedStore`
    file that other processes use too: the file is then kept from one batch to the
    next only while no other process waits for it (:meth:`SharedStore.holding`).
    Either way the store's writes keep to one thread (:meth:`Store.one_thread`).
    Prompts, completions and query text are dropped unless ``keep_content``.
    """
    summary = IngestSummary()
    started = time.perf_counter()
    traces: set[str] = set()
    with store.holding() if isinstance(store, SharedStore) else store.one_thread():
        _ingest_paths(store, [Path(path) for path in paths], progress, summary, traces, keep_content)
    summary.seconds = time.perf_counter() - started
    return summary


def _ingest_paths(
    store: Sink,
    paths: list[Path],
    progress: Callable[[int], None] | None,
    summary: IngestSummary,
    traces: set[str],
    keep_content: bool,
) -> None:
    for path in paths:
        if not path.exists():
            summary.files += 1
            summary.add_problem(Problem(str(path), 0, "no such file or folder"), skipped=False)
            continue
        skipped: list[tuple[Path, str]] = []
        found = False
        for file in expand([path], skipped):
            found = True
            ingest_file(store, file, summary, progress, traces, keep_content)
        if not found and not skipped:  # a folder named with nothing in it to read
            summary.files += 1
            reason = "a folder with no files (hidden ones skipped)"
            summary.add_problem(Problem(str(path), 0, reason), skipped=False)
        for folder, reason in skipped:
            summary.files += 1
            summary.add_problem(Problem(str(folder), 0, reason), skipped=False)
    summary.traces = len(traces)
    summary.tasks = store.count_tasks(sorted(traces)) if traces else 0
