"""A DuckDB file of spans: open it, write batches, count what is in it.

Writing stores whole Arrow batches, as ``INSERT OR IGNORE`` would: a batch lands
whole or not at all, and a span already stored is left as it was.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from agentscope.store.schema import (
    COLUMN_NAMES,
    DDL,
    INSERT_TASK_ROWS,
    SCHEMA_VERSION,
    SPANS_DDL,
    STORE_TABLES,
    TASKS_DDL,
    TRACE_WRITES_DDL,
    TYPED_NAMES,
    WHATIF_COLUMNS,
    typed_rows,
)

_duckdb_connect = inspect.unwrap(duckdb.connect)
"""``duckdb.connect`` as DuckDB defines it, whoever has patched it (agentscope's duckdb integration
patches it as soon as DuckDB is imported, which may be this module's own import): agentscope's own
queries (the store's, the ingest parser's) must never become spans (spans of its writes would feed back)."""


def connect(database: str, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection for agentscope's own queries, without DuckDB's progress bar: in an
    interactive interpreter (a notebook, ``python -c``) a query past two seconds draws one on standard
    output, into a blame's JSON say.  It is turned off by a setting, not the connection's config,
    since DuckDB refuses a second connection to a file opened with another config (the user's own)."""
    con = _duckdb_connect(database, read_only=read_only)
    con.execute("SET enable_progress_bar = false")
    return con


CHECKPOINT_THRESHOLD = "64MB"
"""Write-ahead log a writer holds before DuckDB checkpoints it into the file.  A checkpoint compresses and
rewrites the row group still being filled (122,880 rows); at DuckDB's default of 16 MB a long ingest of
rich spans checkpointed every 30,000 rows or so, rewriting each row group about four times: a million
rich spans took 23-30 s instead of 19-21 s, and made a store 16% larger.  64 MB is about one row group of
rich spans, and what a writer that gives the file to a waiting reader checkpoints at most on closing."""


def quoted_path(path: Path) -> str:
    """A file's path inside a single-quoted SQL string (``ATTACH '…'``)."""
    return str(path).replace("'", "''")


_STORED = ", ".join((*COLUMN_NAMES, *TYPED_NAMES))
_INSERT_NEW = f"INSERT INTO spans ({_STORED}) {typed_rows('agentscope_batch')}"
_INSERT = f"INSERT OR IGNORE INTO spans ({_STORED}) {typed_rows('agentscope_batch')}"
_TYPE_UNTYPED = (
    f"UPDATE spans SET {', '.join(f'{name} = t.{name}' for name in TYPED_NAMES)} "
    f"FROM ({typed_rows('(SELECT * FROM spans WHERE label IS NULL)')}) t "
    "WHERE spans.trace_id = t.trace_id AND spans.span_id = t.span_id"
)
"""Derive the typed columns of the spans written without them (by SQL outside agentscope): a typed span
always has a label."""
_VIEW = "CREATE OR REPLACE TEMP VIEW agentscope_spans AS {select}"
"""What the analysis reads (``agentscope.store.query``): the spans with their typed columns and their
rows in the table (``row_in_store``).  Derived from the attributes as it is read in a store of an older
schema opened read-only (which cannot be migrated)."""
_NEXT_SEQ = (
    "UPDATE agentscope_meta SET value = CAST(CAST(value AS BIGINT) + 1 AS VARCHAR) "
    "WHERE key = 'write_seq' RETURNING CAST(value AS BIGINT)"
)
_MARK_WRITTEN = (
    "INSERT INTO trace_writes SELECT trace_id, ?, min(start_ns) FROM {source} GROUP BY trace_id "
    "ON CONFLICT (trace_id) DO UPDATE SET seq = excluded.seq, first_ns = least(first_ns, excluded.first_ns)"
)
_OLD_TASK_ROWS = (
    f"(SELECT * EXCLUDE ({', '.join(WHATIF_COLUMNS)}), [{', '.join(WHATIF_COLUMNS)}]::DOUBLE[] AS whatif_ns "
    "FROM agentscope_tasks_old)"
)
"""A version 4 store's task rows as the per-task table has them: every what-if in its column."""
_COUNT_SPANS = "INSERT OR REPLACE INTO agentscope_meta SELECT 'spans', CAST(count(*) AS VARCHAR) FROM spans"
_DELETED = (
    "INSERT OR REPLACE INTO agentscope_meta SELECT 'deleted_seq', value FROM agentscope_meta "
    "WHERE key = 'write_seq'"
)
"""Note the write that deleted traces: a reader holding rows from before it must read them all again."""
_CONFLICTS = """
SELECT b.trace_id, b.span_id FROM agentscope_batch b JOIN spans s USING (trace_id, span_id)
WHERE s.start_ns <> b.start_ns OR s.end_ns <> b.end_ns OR s.name <> b.name
   OR coalesce(s.parent_id, '') <> coalesce(b.parent_id, '')
"""


_TASKS = """
WITH t AS (SELECT s.* FROM spans s WHERE trace_id IN (SELECT unnest(?::VARCHAR[]))),
work AS (SELECT trace_id FROM t WHERE kind IN ('llm', 'tool') GROUP BY trace_id),
tasks AS (SELECT trace_id, count(*) AS n FROM t WHERE kind = 'task' GROUP BY trace_id)
SELECT coalesce(sum(coalesce(tasks.n, 1)), 0)
FROM work LEFT JOIN tasks USING (trace_id)
"""


@dataclass(frozen=True)
class Inserted:
    """What :meth:`Store.insert` did with a batch."""

    added: int
    conflicts: frozenset[tuple[str, str]]
    """(trace id, span id) of spans stored before with other content; the stored ones were kept."""


def is_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` is how DuckDB reports a query stopped by Ctrl-C (it takes the signal itself)."""
    if isinstance(exc, KeyboardInterrupt | duckdb.InterruptException):
        return True
    return isinstance(exc, RuntimeError) and "interrupted" in str(exc).lower()


class StoreError(Exception):
    """The store cannot be opened or written (locked, unwritable, newer schema)."""


class Store:
    """A span store.  ``Store(None)`` is an in-memory store (for analysing files directly)."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, read_only: bool = False) -> None:
        self.path = None if path is None else Path(path)
        target = ":memory:" if path is None else str(path)
        try:
            if read_only and self.path is not None and not self.path.exists():
                raise StoreError(f"store {self.path} does not exist")
            self.con = connect(target, read_only=read_only)
        except duckdb.Error as exc:
            raise StoreError(f"cannot open store {target}: {exc}") from exc
        if not read_only:
            if self.path is not None:
                self._refuse_foreign_tables()
                self.con.execute(f"SET checkpoint_threshold = '{CHECKPOINT_THRESHOLD}'")
            for statement in DDL:
                self.con.execute(statement)
            self._migrate()
        self.version = self._check_version()
        """The store's schema version: a version 1 store opened read-only has no task table."""
        typed = "SELECT *, rowid AS row_in_store FROM spans"
        self.con.execute(
            _VIEW.format(select=typed if self.version >= 3 else typed_rows("spans", row_in_store=True))
        )

    def _refuse_foreign_tables(self) -> None:
        """A DuckDB file that is not a store yet but holds a table of a store's name is someone else's data:
        refused, rather than made a store around a table agentscope cannot write to."""
        names = {
            name
            for (name,) in self.con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
                "AND schema_name = 'main'"
            ).fetchall()
        }
        clash = sorted(names & set(STORE_TABLES)) if "agentscope_meta" not in names else []
        if clash:
            self.con.close()
            raise StoreError(
                f"{self.path} is a DuckDB file with its own table {', '.join(clash)}, not an agentscope "
                "store: keep the spans in another file"
            )

    def _migrate(self) -> None:
        """Give a new store its version, and an older one what later versions added, in one transaction:
        from version 1, the task table's write marks (every trace it holds counts as written before any
        analysis, sequence 0); from version 1 or 2, the typed columns (the spans table is rewritten, its
        rows in their order, each with its columns derived from its attributes) and each trace's
        earliest span start; from version 2, 3 or 4, the task rows' what-if times in columns, null on their
        lines."""
        rows = self.con.execute("SELECT value FROM agentscope_meta WHERE key = 'schema_version'").fetchall()
        older = rows[0][0] if rows and rows[0][0] in ("1", "2", "3", "4") else None
        with self.transaction():
            if not rows:
                self.con.execute(
                    "INSERT INTO agentscope_meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)]
                )
            if older == "2":
                self.con.execute("ALTER TABLE trace_writes RENAME TO agentscope_trace_writes_v2")
                self.con.execute(TRACE_WRITES_DDL)
                self.con.execute(
                    "INSERT INTO trace_writes SELECT w.trace_id, w.seq, f.first_ns "
                    "FROM agentscope_trace_writes_v2 w JOIN (SELECT trace_id, min(start_ns) AS first_ns "
                    "FROM spans GROUP BY trace_id) f USING (trace_id)"
                )
                self.con.execute("DROP TABLE agentscope_trace_writes_v2")
            if older == "1":
                self.con.execute(_MARK_WRITTEN.format(source="spans"), [0])
            if older in ("1", "2"):
                self.con.execute(SPANS_DDL.format(table="agentscope_spans_typed"))
                self.con.execute(f"INSERT INTO agentscope_spans_typed {typed_rows('spans')}")
                self.con.execute("DROP TABLE spans")
                self.con.execute("ALTER TABLE agentscope_spans_typed RENAME TO spans")
            if older in ("2", "3", "4"):
                self.con.execute("ALTER TABLE tasks RENAME TO agentscope_tasks_old")
                self.con.execute(TASKS_DDL)
                old_rows = _OLD_TASK_ROWS if older == "4" else "agentscope_tasks_old"  # 2, 3: a list
                self.con.execute(f"{INSERT_TASK_ROWS} FROM {old_rows}")
                self.con.execute("DROP TABLE agentscope_tasks_old")
            if older is not None:
                self.con.execute(
                    "UPDATE agentscope_meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION)]
                )
            self.con.execute("INSERT OR IGNORE INTO agentscope_meta VALUES ('write_seq', '0')")
            if not rows or older == "1":
                self.con.execute(_COUNT_SPANS)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One DuckDB transaction: every statement inside lands, or none does."""
        self.con.execute("BEGIN TRANSACTION")
        try:
            yield
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("COMMIT")

    def _check_version(self) -> int:
        try:
            rows = self.con.execute(
                "SELECT value FROM agentscope_meta WHERE key = 'schema_version'"
            ).fetchall()
        except duckdb.CatalogException as exc:
            raise StoreError(f"{self.path} is not an agentscope store (no agentscope_meta table)") from exc
        try:
            version = int(rows[0][0]) if rows else 0
        except ValueError:
            raise StoreError(f"{self.path} has an unreadable schema version {rows[0][0]!r}") from None
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"store {self.path} has schema version {version}; "
                f"this agentscope reads up to {SCHEMA_VERSION}"
            )
        return version

    def _mark_written(self, source: str) -> None:
        """Give the traces of ``source``'s spans the next write sequence number (in the writing
        transaction), so that a reader re-analyses them; and count the spans now stored."""
        (seq,) = self.con.execute(_NEXT_SEQ).fetchall()[0]
        self.con.execute(_MARK_WRITTEN.format(source=source), [seq]).fetchall()
        self.con.execute(_COUNT_SPANS)

    def content_version(self) -> tuple[int, int]:
        """(the last span write's sequence number, the spans stored): changes whenever spans do, by any
        writer (a write outside agentscope's changes the count), and not when task rows are written."""
        return self.write_seq(), self.span_count()

    def write_seq(self) -> int:
        """The sequence number of the last write of spans (0 in a store without the task table)."""
        return self._meta_number("write_seq")

    def deleted_seq(self) -> int:
        """The sequence number of the last write that deleted traces (``prune``, or writes outside
        agentscope's writers); 0 if none has."""
        return self._meta_number("deleted_seq")

    def _meta_number(self, key: str) -> int:
        found = self.con.execute("SELECT value FROM agentscope_meta WHERE key = ?", [key]).fetchall()
        return int(found[0][0]) if found else 0

    def unmarked_writes(self) -> bool:
        """Whether spans were written or deleted by other means than this class (a DuckDB shell, say):
        the count of spans differs from the one its last write left.  Such writes leave no write
        marks, so a reader cannot tell which traces they changed."""
        counted = self.con.execute("SELECT value FROM agentscope_meta WHERE key = 'spans'").fetchall()
        return not counted or int(counted[0][0]) != self.span_count()

    def mark_all_written(self) -> None:
        """Every trace counts as written now, to be analysed again, the task rows of traces no
        longer stored go, and spans inserted without their typed columns get them (after
        :meth:`unmarked_writes`)."""
        gone = "trace_id NOT IN (SELECT DISTINCT trace_id FROM spans)"
        with self.transaction():
            for table in ("tasks", "task_traces", "trace_writes"):
                self.con.execute(f"DELETE FROM {table} WHERE {gone}")
            self.con.execute(_TYPE_UNTYPED)
            self._mark_written("spans")
            self.con.execute(_DELETED)

    def insert(self, batch: pa.Table) -> Inserted:
        """Store a batch of span rows in one statement; spans already stored are skipped, not replaced.

        Returns the rows added and the spans of the batch that were stored before
        with other content (times, name or parent), which a caller should report.
        """
        self.con.register("agentscope_batch", batch)
        try:
            try:
                # A batch of new spans, the usual case, skips the per-row conflict handling of
                # OR IGNORE (a quarter of the insert's time); a failed statement stores nothing.
                with self.transaction():
                    added = int(self.scalar(_INSERT_NEW))
                    self._mark_written("agentscope_batch")
            except duckdb.ConstraintException:
                with self.transaction():
                    added = int(self.scalar(_INSERT))
                    if added:
                        self._mark_written("agentscope_batch")
            # Only spans that were already stored can conflict; the new ones match themselves.
            conflicts = set(self.con.execute(_CONFLICTS).fetchall()) if added < batch.num_rows else set()
        finally:
            self.con.unregister("agentscope_batch")
        return Inserted(added, frozenset(conflicts))

    @contextmanager
    def one_thread(self) -> Iterator[None]:
        """DuckDB's work for this store on the calling thread alone, for the block: for a run of
        writes beside other DuckDB work, as an ingest's inserts beside its parser.

        An insert of a batch gains little from DuckDB's other threads and pays for handing them
        work; beside the parser, whose threads then keep the cores, an ingest of 200,000 rich
        spans took 3.5-4.1 s instead of 4.5-4.9 s (alternating runs).  Set once for the run:
        setting it at every insert restarts DuckDB's threads each time, which cost what it saved.
        """
        ((threads,),) = self.con.execute("SELECT current_setting('threads')").fetchall()
        self.con.execute("SET threads = 1")
        try:
            yield
        finally:
            self.con.execute(f"SET threads = {threads}")

    def merge(self, other: Path) -> tuple[int, int, list[str]]:
        """Copy another store file's spans in (spans already here are kept): (read, added, its trace ids)."""
        before = self.span_count()
        self.con.execute(f"ATTACH '{quoted_path(other)}' AS agentscope_other (READ_ONLY)")
        try:
            read = int(self.scalar("SELECT count(*) FROM agentscope_other.spans"))
            with self.transaction():
                self.con.execute(
                    f"INSERT OR IGNORE INTO spans ({_STORED}) {typed_rows('agentscope_other.spans')}"
                ).fetchall()
                self._mark_written("agentscope_other.spans")
            traces = [
                row[0]
                for row in self.con.execute("SELECT DISTINCT trace_id FROM agentscope_other.spans").fetchall()
            ]
        finally:
            self.con.execute("DETACH agentscope_other")
        return read, self.span_count() - before, traces

    def prune(self, before_ns: int) -> tuple[int, int]:
        """Delete every trace whose spans all ended before ``before_ns``, with its task rows and write
        mark, in one transaction: (traces, spans) deleted.  Whole traces go, so no trace is left cut
        in two; the space is reused by later writes (:meth:`SharedStore.compact` gives it back)."""
        with self.transaction():
            self.con.execute(
                "CREATE OR REPLACE TEMP TABLE agentscope_old AS "
                "SELECT trace_id FROM spans GROUP BY trace_id HAVING max(end_ns) < ?",
                [before_ns],
            )
            old = "trace_id IN (SELECT trace_id FROM agentscope_old)"
            traces = int(self.scalar("SELECT count(*) FROM agentscope_old"))
            spans = int(self.scalar(f"DELETE FROM spans WHERE {old}"))
            for table in ("tasks", "task_traces", "trace_writes"):
                self.con.execute(f"DELETE FROM {table} WHERE {old}")
            self.con.execute(_NEXT_SEQ).fetchall()  # a write of spans, for whoever numbers what it read
            self.con.execute(_COUNT_SPANS)
            self.con.execute(_DELETED)
            self.con.execute("DROP TABLE agentscope_old")
        return traces, spans

    def count_tasks(self, trace_ids: list[str]) -> int:
        """Tasks in these traces, as ``agentscope ingest`` reports them: traces with an llm or tool span,
        counting each explicit task span (or the trace once when it has none)."""
        return int(self.scalar(_TASKS, [trace_ids]))

    def scalar(self, sql: str, params: list | None = None) -> object:
        """The single value a query returns (the result is read to the end, as DuckDB requires)."""
        return self.con.execute(sql, params or []).fetchall()[0][0]

    def span_count(self) -> int:
        return int(self.scalar("SELECT count(*) FROM spans"))

    def trace_count(self) -> int:
        """Traces in the store: one write mark each, read without a scan of the spans."""
        if self.version < 2:
            return int(self.scalar("SELECT count(DISTINCT trace_id) FROM spans"))
        return int(self.scalar("SELECT count(*) FROM trace_writes"))

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
