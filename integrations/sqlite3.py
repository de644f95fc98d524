"""sqlite3: connections from ``sqlite3.connect`` make a ``db`` span per statement.

sqlite3's connection and cursor are C types that cannot be patched, so
``connect`` returns a thin proxy that times ``execute``, ``executemany`` and
``executescript`` on the connection and on its cursors, which iterate as the
real ones do (``next(con.execute(...))`` included), and hands ``backup`` the
real connection it is given.  C code that takes a connection checks its type, so
``sqlite3.Cursor(connection)`` needs ``connection.cursor()`` instead.  Modules that imported
``connect`` by name before ``ags.instrument()`` keep the original.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import wrapt
from agentscope.integrations._spans import db_attributes, traced

from agentscope.sdk.instrumentation import Instrumentor


def _statement(method: str, proxy: Any, args: tuple, kwargs: dict) -> Any:
    statement = args[0] if args else kwargs.get("sql", "")
    attributes = db_attributes("sqlite", statement)
    call = getattr(proxy.__wrapped__, method)
    return traced(
        f"{attributes['db.operation.name']} sqlite", "db", attributes, lambda: call(*args, **kwargs)
    )


class TracedCursor(wrapt.ObjectProxy):
    def execute(self, *args: Any, **kwargs: Any) -> Any:
        _statement("execute", self, args, kwargs)
        return self

    def executemany(self, *args: Any, **kwargs: Any) -> Any:
        _statement("executemany", self, args, kwargs)
        return self

    def executescript(self, *args: Any, **kwargs: Any) -> Any:
        _statement("executescript", self, args, kwargs)
        return self

    def __iter__(self) -> Any:
        return iter(self.__wrapped__)

    def __next__(self) -> Any:
        return next(self.__wrapped__)


class TracedConnection(wrapt.ObjectProxy):
    def cursor(self, *args: Any, **kwargs: Any) -> TracedCursor:
        return TracedCursor(self.__wrapped__.cursor(*args, **kwargs))

    def execute(self, *args: Any, **kwargs: Any) -> TracedCursor:
        return TracedCursor(_statement("execute", self, args, kwargs))

    def executemany(self, *args: Any, **kwargs: Any) -> TracedCursor:
        return TracedCursor(_statement("executemany", self, args, kwargs))

    def executescript(self, *args: Any, **kwargs: Any) -> TracedCursor:
        return TracedCursor(_statement("executescript", self, args, kwargs))

    def backup(self, target: Any, *args: Any, **kwargs: Any) -> None:
        """The C method takes only a real connection as its target: a traced one is unwrapped."""
        self.__wrapped__.backup(getattr(target, "__wrapped__", target), *args, **kwargs)

    def __enter__(self) -> TracedConnection:
        self.__wrapped__.__enter__()
        return self

    def __exit__(self, *exc_info: Any) -> Any:
        return self.__wrapped__.__exit__(*exc_info)


def _connect(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    return TracedConnection(wrapped(*args, **kwargs))


class SQLite3Instrumentor(Instrumentor):
    library = "sqlite3"

    def _instrument(self) -> None:
        self.wrap("sqlite3", "connect", _connect)
