"""psycopg 3: one ``db`` span per statement a cursor executes (sync and async).

A server-side cursor (``conn.cursor(name=...)``) runs its query as rows are
fetched: its ``execute`` only declares it, so each ``fetchone``/``fetchmany``/
``fetchall`` is a ``FETCH`` span of its own.  Iterating such a cursor, and
``Cursor.stream()``, fetch inside the caller's loop and are not timed apart.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentscope.integrations._spans import db_attributes, traced, traced_async

from agentscope import attributes as A
from agentscope.sdk.instrumentation import Instrumentor


def _statement(cursor: Any, args: tuple, kwargs: dict) -> Any:
    """The query being executed, as text: a ``psycopg.sql`` composition (``sql.SQL(...).format(...)``)
    rendered for the cursor's connection, as psycopg itself renders it (its ``str()`` is its repr)."""
    query = args[0] if args else kwargs.get("query", "")
    as_string = getattr(query, "as_string", None)
    if as_string is None:
        return query
    try:
        return as_string(cursor)
    except Exception:
        return "QUERY"


def _execute(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    attributes = db_attributes("postgresql", _statement(instance, args, kwargs))
    name = f"{attributes['db.operation.name']} postgresql"
    return traced(name, "db", attributes, lambda: wrapped(*args, **kwargs))


async def _execute_async(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    attributes = db_attributes("postgresql", _statement(instance, args, kwargs))
    name = f"{attributes['db.operation.name']} postgresql"
    return await traced_async(name, "db", attributes, lambda: wrapped(*args, **kwargs))


_FETCH = {A.DB_SYSTEM_NAME: "postgresql", A.DB_OPERATION_NAME: "FETCH"}


def _fetch(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    return traced("FETCH postgresql", "db", _FETCH, lambda: wrapped(*args, **kwargs))


async def _fetch_async(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    return await traced_async("FETCH postgresql", "db", _FETCH, lambda: wrapped(*args, **kwargs))


class PsycopgInstrumentor(Instrumentor):
    library = "psycopg"

    def _instrument(self) -> None:
        for method in ("execute", "executemany"):
            self.wrap("psycopg", f"Cursor.{method}", _execute)
            self.wrap("psycopg", f"AsyncCursor.{method}", _execute_async)
        self.wrap("psycopg", "ServerCursor.execute", _execute)
        self.wrap("psycopg", "AsyncServerCursor.execute", _execute_async)
        for method in ("fetchone", "fetchmany", "fetchall"):
            self.wrap("psycopg", f"ServerCursor.{method}", _fetch)
            self.wrap("psycopg", f"AsyncServerCursor.{method}", _fetch_async)
