"""A DuckDB file of spans: open it, write batches, count what is in it.

Writing stores whole Arrow batches, as ``INSERT OR IGNORE`` would: a batch lands
whole or not at all, and a span already stored is left as it was.
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from agentscope.store.schema import COLUMN_NAMES, DDL, SCHEMA_VERSION

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


_COLUMNS = ", ".join(COLUMN_NAMES)
_INSERT_NEW = f"INSERT INTO spans ({_COLUMNS}) SELECT {_COLUMNS} FROM agentscope_batch"
_INSERT = f"INSERT OR IGNORE INTO spans ({_COLUMNS}) SELECT {_COLUMNS} FROM agentscope_batch"
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
            for statement in DDL:
                self.con.execute(statement)
            self.con.execute(
                "INSERT OR IGNORE INTO agentscope_meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)]
            ).fetchall()
        self._check_version()

    def _check_version(self) -> None:
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
                added = int(self.scalar(_INSERT_NEW))
            except duckdb.ConstraintException:
                added = int(self.scalar(_INSERT))
            # Only spans that were already stored can conflict; the new ones match themselves.
            conflicts = set(self.con.execute(_CONFLICTS).fetchall()) if added < batch.num_rows else set()
        finally:
            self.con.unregister("agentscope_batch")
        return Inserted(added, frozenset(conflicts))

    def merge(self, other: Path) -> tuple[int, int, list[str]]:
        """Copy another store file's spans in (spans already here are kept): (read, added, its trace ids)."""
        before = self.span_count()
        quoted = str(other).replace("'", "''")
        self.con.execute(f"ATTACH '{quoted}' AS agentscope_other (READ_ONLY)")
        try:
            read = int(self.scalar("SELECT count(*) FROM agentscope_other.spans"))
            self.con.execute(
                f"INSERT OR IGNORE INTO spans ({_COLUMNS}) SELECT {_COLUMNS} FROM agentscope_other.spans"
            ).fetchall()
            traces = [
                row[0]
                for row in self.con.execute("SELECT DISTINCT trace_id FROM agentscope_other.spans").fetchall()
            ]
        finally:
            self.con.execute("DETACH agentscope_other")
        return read, self.span_count() - before, traces

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
        return int(self.scalar("SELECT count(DISTINCT trace_id) FROM spans"))

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
