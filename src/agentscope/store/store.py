"""A DuckDB file of spans: open it, write batches, count what is in it.

Writing is ``INSERT OR IGNORE`` of whole Arrow batches: a batch lands whole or
not at all, and a span already stored is left as it was.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pyarrow as pa

from agentscope.store.schema import COLUMN_NAMES, DDL, SCHEMA_VERSION

connect = duckdb.connect
"""Taken at import, before any instrumentation can patch ``duckdb.connect``: agentscope's own
queries (the store's, the ingest parser's) must never become spans (spans of its writes would feed back)."""

DEFAULT_STORE = "agentscope.duckdb"
STORE_ENV = "AGENTSCOPE_STORE"


class StoreError(Exception):
    """The store cannot be opened or written (locked, unwritable, newer schema)."""


def default_store_path() -> str:
    """``$AGENTSCOPE_STORE`` if set, else ``./agentscope.duckdb``."""
    return os.environ.get(STORE_ENV) or DEFAULT_STORE


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

    def insert(self, batch: pa.Table) -> int:
        """Store a batch of span rows; spans already stored are skipped.  Returns rows added."""
        columns = ", ".join(COLUMN_NAMES)
        self.con.register("agentscope_batch", batch)
        try:
            return self.scalar(
                f"INSERT OR IGNORE INTO spans ({columns}) SELECT {columns} FROM agentscope_batch"
            )
        finally:
            self.con.unregister("agentscope_batch")

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
