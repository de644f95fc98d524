"""Thin span helpers the integrations share: run a call inside an http or db span."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from agentscope import attributes as A
from agentscope.sdk._safety import report
from agentscope.sdk.recording import Recording, clean_attributes, start, with_kind
from agentscope.sdk.state import STATE


def open_span(name: str, kind: str, attributes: Mapping[str, Any]) -> Recording | None:
    rec = start(name, kind, with_kind(kind, clean_attributes(attributes)))
    if rec is not None:
        rec.enter()
    return rec


BodyHook = Callable[[Any, "Callable[[BaseException | None], None]"], None]
"""``ends_later(result, end)``: hands a streamed result's body the span's ``end``, to call once it is read
to its end or closed (with the error that broke it off, if one did)."""


def traced(
    name: str,
    kind: str,
    attributes: Mapping[str, Any],
    call: Callable[[], Any],
    on_result: Callable[[Any], Mapping[str, Any]] | None = None,
    ends_later: BodyHook | None = None,
) -> Any:
    """``call()`` inside a span; ``on_result`` adds attributes from the result (and may flag an error).
    With ``ends_later`` the span is no longer current once the call returns, but ends only when the
    result's body does (an HTTP response whose body is streamed after its headers)."""
    rec = open_span(name, kind, attributes)
    if rec is None:
        return call()
    cpu0 = time.thread_time_ns()
    try:
        result = call()
    except BaseException as exc:
        rec.finish(exc, time.thread_time_ns() - cpu0)
        rec.exit()
        raise
    _finish_ok(rec, result, on_result, time.thread_time_ns() - cpu0, ends_later)
    return result


async def traced_async(
    name: str,
    kind: str,
    attributes: Mapping[str, Any],
    call: Callable[[], Awaitable[Any]],
    on_result: Callable[[Any], Mapping[str, Any]] | None = None,
    ends_later: BodyHook | None = None,
) -> Any:
    rec = open_span(name, kind, attributes)
    if rec is None:
        return await call()
    try:
        result = await call()
    except BaseException as exc:
        rec.finish(exc, 0)
        rec.exit()
        raise
    _finish_ok(rec, result, on_result, 0, ends_later)
    return result


class _EndOnce:
    """A span's end, run by whichever comes first: the body's end, its close, or its collection."""

    __slots__ = ("cpu_ns", "done", "extra", "rec", "status")

    def __init__(self, rec: Recording, cpu_ns: int, extra: dict[str, Any], status: str | None) -> None:
        self.rec, self.cpu_ns, self.extra, self.status = rec, cpu_ns, extra, status
        self.done = False

    def __call__(self, error: BaseException | None = None) -> None:
        if self.done:
            return
        self.done = True
        self.rec.finish(error, self.cpu_ns, self.extra, status_message=None if error else self.status)


def _finish_ok(
    rec: Recording,
    result: Any,
    on_result: Callable[[Any], Mapping[str, Any]] | None,
    cpu_ns: int,
    ends_later: BodyHook | None = None,
) -> None:
    extra: dict[str, Any] = {}
    status = None
    if on_result is not None:
        try:
            extra = clean_attributes(on_result(result))
        except Exception:
            extra = {}
        code = extra.get(A.HTTP_RESPONSE_STATUS_CODE)
        if isinstance(code, int) and code >= 400:
            status = f"HTTP {code}"
    if ends_later is None:
        rec.finish(None, cpu_ns, extra, status_message=status)
        rec.exit()
        return
    rec.exit()
    end = _EndOnce(rec, cpu_ns, extra, status)
    try:
        ends_later(result, end)
    except Exception as exc:
        report("following a streamed body", exc)
        end()


def sql_operation(statement: Any) -> str:
    """The first keyword of a SQL statement (SELECT, INSERT, …), for ``db.operation.name``."""
    text = statement.decode(errors="replace") if isinstance(statement, bytes) else str(statement)
    words = text.strip().split(None, 1)
    return words[0].upper() if words else "QUERY"


def db_attributes(system: str, statement: Any) -> dict[str, Any]:
    attributes: dict[str, Any] = {A.DB_SYSTEM_NAME: system, A.DB_OPERATION_NAME: sql_operation(statement)}
    if STATE.capture_content:
        attributes[A.DB_QUERY_TEXT] = str(statement)[:4096]
    return attributes
