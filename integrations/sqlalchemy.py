"""SQLAlchemy engines: one ``db`` span per statement, through the engine's cursor events.

Listens on the ``Engine`` class, so every engine, created before or after, is
covered; ``uninstrument`` removes the listeners.  With a driver that is
instrumented too (psycopg), the driver's span nests inside this one.
"""

from __future__ import annotations

from typing import Any

from agentscope.integrations._spans import db_attributes, open_span

from agentscope.sdk.instrumentation import Instrumentor

_KEY = "_agentscope_span"


def _before(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
    system = getattr(getattr(conn, "dialect", None), "name", "sql") or "sql"
    attributes = db_attributes(system, statement)
    rec = open_span(f"{attributes['db.operation.name']} {system}", "db", attributes)
    if rec is not None and context is not None:
        setattr(context, _KEY, rec)


def _after(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
    rec = getattr(context, _KEY, None)
    if rec is not None:
        rec.finish(None, 0)
        rec.exit()
        setattr(context, _KEY, None)


def _error(exception_context: Any) -> None:
    context = getattr(exception_context, "execution_context", None)
    rec = getattr(context, _KEY, None)
    if rec is not None:
        rec.finish(exception_context.original_exception, 0)
        rec.exit()
        setattr(context, _KEY, None)


class SQLAlchemyInstrumentor(Instrumentor):
    library = "sqlalchemy"

    def _instrument(self) -> None:
        from sqlalchemy import event
        from sqlalchemy.engine import Engine

        event.listen(Engine, "before_cursor_execute", _before)
        event.listen(Engine, "after_cursor_execute", _after)
        event.listen(Engine, "handle_error", _error)

    def _uninstrument(self) -> None:
        from sqlalchemy import event
        from sqlalchemy.engine import Engine

        event.remove(Engine, "before_cursor_execute", _before)
        event.remove(Engine, "after_cursor_execute", _after)
        event.remove(Engine, "handle_error", _error)
