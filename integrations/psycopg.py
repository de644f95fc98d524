"""psycopg 3: one ``db`` span per statement a cursor executes (sync and async)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentscope.integrations._spans import db_attributes, traced, traced_async

from agentscope.sdk.instrumentation import Instrumentor


def _execute(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    attributes = db_attributes("postgresql", args[0] if args else kwargs.get("query", ""))
    name = f"{attributes['db.operation.name']} postgresql"
    return traced(name, "db", attributes, lambda: wrapped(*args, **kwargs))


async def _execute_async(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    attributes = db_attributes("postgresql", args[0] if args else kwargs.get("query", ""))
    name = f"{attributes['db.operation.name']} postgresql"
    return await traced_async(name, "db", attributes, lambda: wrapped(*args, **kwargs))


class PsycopgInstrumentor(Instrumentor):
    library = "psycopg"

    def _instrument(self) -> None:
        for method in ("execute", "executemany"):
            self.wrap("psycopg", f"Cursor.{method}", _execute)
            self.wrap("psycopg", f"AsyncCursor.{method}", _execute_async)
