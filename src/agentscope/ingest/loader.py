"""Load trace files into a store: streaming, idempotent, and honest about bad input.

Rows are written in batches, each one ``INSERT OR IGNORE`` statement, so an
interrupted ingest leaves whole batches only, and loading a span twice stores it
once.  Every problem is kept with its file and line; the good spans of a file
are stored whatever else is wrong with it.
"""

from __future__ import annotations

import time
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa

from agentscope.ingest import parallel
from agentscope.ingest.batching import Batcher, Problem
from agentscope.ingest.records import Record
from agentscope.ingest.sources import UnknownFormat, expand, read
from agentscope.store.schema import COLUMN_NAMES, rows_to_table
from agentscope.store.store import Store

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


_CONFLICTS = """
SELECT b.trace_id, b.span_id FROM agentscope_batch b JOIN spans s USING (trace_id, span_id)
WHERE s.start_ns <> b.start_ns OR s.end_ns <> b.end_ns OR s.name <> b.name
   OR coalesce(s.parent_id, '') <> coalesce(b.parent_id, '')
"""
_INSERT = (
    f"INSERT OR IGNORE INTO spans ({', '.join(COLUMN_NAMES)}) "
    f"SELECT {', '.join(COLUMN_NAMES)} FROM agentscope_batch"
)


class _Writer:
    """Writes batches of one file into the store and reports spans stored before with other content."""

    def __init__(
        self, store: Store, summary: IngestSummary, name: str, progress: Callable[[int], None] | None
    ) -> None:
        self.store, self.summary, self.name, self.progress = store, summary, name, progress

    def write(self, batch: pa.Table, lines: list[int]) -> None:
        if not batch.num_rows:
            return
        con = self.store.con
        con.register("agentscope_batch", batch)
        try:
            added = con.execute(_INSERT).fetchall()[0][0]
            # Only spans that were already stored can conflict; the new ones match themselves.
            conflicts = set(con.execute(_CONFLICTS).fetchall()) if added < batch.num_rows else set()
            con.execute(
                "INSERT OR IGNORE INTO agentscope_ingested SELECT DISTINCT trace_id FROM agentscope_batch"
            ).fetchall()
        finally:
            con.unregister("agentscope_batch")
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


def _ingest_store(store: Store, path: Path, summary: IngestSummary) -> None:
    """Merge another agentscope store into this one."""
    before = store.span_count()
    store.con.execute(f"ATTACH '{path}' AS other (READ_ONLY)")
    try:
        read_rows = store.con.execute("SELECT count(*) FROM other.spans").fetchall()[0][0]
        columns = ", ".join(COLUMN_NAMES)
        store.con.execute(
            f"INSERT OR IGNORE INTO spans ({columns}) SELECT {columns} FROM other.spans"
        ).fetchall()
        store.con.execute(
            "INSERT OR IGNORE INTO agentscope_ingested SELECT DISTINCT trace_id FROM other.spans"
        ).fetchall()
    finally:
        store.con.execute("DETACH other")
    added = store.span_count() - before
    summary.spans_read += read_rows
    summary.stored += added
    summary.already_stored += read_rows - added


def ingest_file(
    store: Store, path: Path, summary: IngestSummary, progress: Callable[[int], None] | None = None
) -> None:
    """Load one file into ``store``, recording its problems in ``summary``."""
    name = str(path)
    summary.files += 1
    try:
        fmt, records = read(path)
    except (UnknownFormat, OSError) as exc:
        summary.add_problem(Problem(name, 0, f"cannot read: {exc}"), skipped=False)
        return
    summary.formats[fmt] += 1
    if fmt == "store":
        try:
            _ingest_store(store, path, summary)
        except duckdb.Error as exc:
            summary.add_problem(Problem(name, 0, f"cannot read the store: {exc}"), skipped=False)
        return
    writer = _Writer(store, summary, name, progress)
    if fmt == "otlp-json-lines" and parallel.worth_it(path):
        try:
            parallel.ingest_lines(path, name, writer, summary)
            return
        except parallel.WorkersUnavailable:
            fmt, records = read(path)
    batcher = Batcher(name)
    last_line = 0
    try:
        record: Record
        for record in records:
            last_line = record.line
            if record.row is not None:
                summary.spans_read += 1
                if batcher.add(record.row, record.line):
                    writer.write(rows_to_table(batcher.rows), batcher.take()[1])
            if record.problem is not None:
                summary.add_problem(Problem(name, record.line, record.problem), skipped=record.row is None)
    except (EOFError, OSError, zlib.error) as exc:
        summary.add_problem(Problem(name, last_line + 1, f"the file ends early: {exc}"), skipped=False)
    except UnicodeDecodeError as exc:
        summary.add_problem(Problem(name, last_line + 1, f"not UTF-8 text: {exc.reason}"), skipped=False)
    finally:
        rows, lines = batcher.take()
        writer.write(rows_to_table(rows), lines)
        summary.already_stored += batcher.repeats
        for problem in batcher.problems:
            summary.add_problem(problem, skipped=True)


_TASKS = """
WITH t AS (SELECT s.* FROM spans s JOIN agentscope_ingested USING (trace_id)),
work AS (SELECT trace_id FROM t WHERE kind IN ('llm', 'tool') GROUP BY trace_id),
tasks AS (SELECT trace_id, count(*) AS n FROM t WHERE kind = 'task' GROUP BY trace_id)
SELECT coalesce(sum(coalesce(tasks.n, 1)), 0)
FROM work LEFT JOIN tasks USING (trace_id)
"""


def ingest(
    store: Store,
    paths: list[Path],
    progress: Callable[[int], None] | None = None,
) -> IngestSummary:
    """Load files and folders of traces into ``store``; see :class:`IngestSummary`."""
    summary = IngestSummary()
    started = time.perf_counter()
    store.con.execute("CREATE TEMP TABLE IF NOT EXISTS agentscope_ingested (trace_id VARCHAR PRIMARY KEY)")
    store.con.execute("DELETE FROM agentscope_ingested").fetchall()
    for path in paths:
        if not path.exists():
            summary.files += 1
            summary.add_problem(Problem(str(path), 0, "no such file or folder"), skipped=False)
            continue
        for file in expand([path]):
            ingest_file(store, file, summary, progress)
    summary.traces = store.con.execute("SELECT count(*) FROM agentscope_ingested").fetchall()[0][0]
    summary.tasks = int(store.con.execute(_TASKS).fetchall()[0][0])
    summary.seconds = time.perf_counter() - started
    return summary
