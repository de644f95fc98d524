"""duckdb: statements run through ``execute``/``executemany`` on connections from ``duckdb.connect``.

DuckDB's connection is a C type, so ``connect`` returns a thin proxy (as for
sqlite3).  Relations built with ``con.sql(...)`` run lazily when fetched and are
not timed.  agentscope's own store connects through the unwrapped ``duckdb.connect``
(``inspect.unwrap``), so its writes never become spans.
"""

from __future__ import annotations

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


class DuckDBInstrumentor(Instrumentor):
    library = "duckdb"

    def _instrument(self) -> None:
        self.wrap("duckdb", "connect", _connect)
