"""duckdb: statements run through ``execute``/``executemany`` on connections from ``duckdb.connect``.

DuckDB's connection is a C type, so ``connect`` returns a thin proxy (as for
sqlite3).  The module's own functions check a connection's type
(``duckdb.execute(query, connection=con)``, ``duckdb.set_default_connection(con)``), so
each that takes one is handed the real connection behind a proxy.  Relations built
with ``con.sql(...)`` run lazily when fetched and are
not timed.  agentscope's own store connects through the unwrapped ``duckdb.connect``
(``inspect.unwrap``), so its writes never become spans.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import Any

import wrapt
from agentscope.integrations._spans import db_attributes, traced

from agentscope.sdk.instrumentation import Instrumentor


class TracedDuckDB(wrapt.ObjectProxy):
    def _run(self, method: str, args: tuple, kwargs: dict) -> TracedDuckDB:
        attributes = db_attributes("duckdb", args[0] if args else kwargs.get("query", ""))
        call = getattr(self.__wrapped__, method)
        traced(f"{attributes['db.operation.name']} duckdb", "db", attributes, lambda: call(*args, **kwargs))
        return self

    def execute(self, *args: Any, **kwargs: Any) -> TracedDuckDB:
        return self._run("execute", args, kwargs)

    def executemany(self, *args: Any, **kwargs: Any) -> TracedDuckDB:
        return self._run("executemany", args, kwargs)

    def cursor(self) -> TracedDuckDB:
        return TracedDuckDB(self.__wrapped__.cursor())

    def __enter__(self) -> TracedDuckDB:
        self.__wrapped__.__enter__()
        return self

    def __exit__(self, *exc_info: Any) -> Any:
        return self.__wrapped__.__exit__(*exc_info)


def _connect(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    return TracedDuckDB(wrapped(*args, **kwargs))


def _real_connection(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    args = tuple(arg.__wrapped__ if isinstance(arg, TracedDuckDB) else arg for arg in args)
    kwargs = {key: v.__wrapped__ if isinstance(v, TracedDuckDB) else v for key, v in kwargs.items()}
    return wrapped(*args, **kwargs)


def _takes_connection(function: Any) -> bool:
    """Whether a function of the duckdb module takes a connection: its signature says so (nanobind's
    functions give theirs as their docstring's first line)."""
    try:
        return "connection" in inspect.signature(function).parameters
    except (TypeError, ValueError):
        return "connection:" in (function.__doc__ or "").split("\n", 1)[0]


class DuckDBInstrumentor(Instrumentor):
    library = "duckdb"

    def _instrument(self) -> None:
        self.wrap("duckdb", "connect", _connect)
        module = sys.modules["duckdb"]
        for name in dir(module):
            function = getattr(module, name, None)
            if (
                name.startswith("_")
                or name == "connect"
                or isinstance(function, type)
                or not callable(function)
            ):
                continue
            if _takes_connection(function):
                self.wrap("duckdb", name, _real_connection)
