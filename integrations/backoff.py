"""The ``backoff`` library: each attempt a span, each wait a ``backoff`` span.

``backoff`` builds its retry loop when a function is decorated, so only
functions decorated after ``ags.instrument()`` are covered (decorate inside a
factory, or instrument before importing the module that decorates).  The wait
is recorded from ``backoff``'s ``on_backoff`` handler until the next attempt
starts.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
from collections.abc import Callable
from typing import Any

from agentscope.integrations._spans import traced, traced_async

from agentscope import attributes as A
from agentscope.sdk.instrumentation import Instrumentor
from agentscope.sdk.recording import Recording, start, with_kind

_PENDING: contextvars.ContextVar[Recording | None] = contextvars.ContextVar(
    "agentscope_backoff", default=None
)


def _on_backoff(details: dict[str, Any]) -> None:
    attributes = {
        A.BACKOFF_PLANNED_S: float(details.get("wait") or 0.0),
        A.ATTEMPT: int(details.get("tries", 0)),
    }
    _PENDING.set(start("backoff", "backoff", with_kind("backoff", attributes)))


def _end_pending() -> None:
    pending = _PENDING.get()
    if pending is not None:
        pending.finish(None, 0)
        _PENDING.set(None)


def _handlers(kwargs: dict, name: str, handler: Callable[[dict], None]) -> None:
    kwargs[name] = [*(kwargs.get(name) or []), handler]


def _retry(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    target, *rest = args
    name = f"attempt {getattr(target, '__qualname__', 'call')}"

    if _is_async(target):

        @functools.wraps(target)
        async def attempt(*a: Any, **k: Any) -> Any:
            _end_pending()
            return await traced_async(name, "step", {}, lambda: target(*a, **k))

    else:

        @functools.wraps(target)
        def attempt(*a: Any, **k: Any) -> Any:
            _end_pending()
            return traced(name, "step", {}, lambda: target(*a, **k))

    _handlers(kwargs, "on_backoff", _on_backoff)
    return wrapped(attempt, *rest, **kwargs)


def _is_async(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn)


class BackoffInstrumentor(Instrumentor):
    library = "backoff"

    def _instrument(self) -> None:
        for module in ("backoff._sync", "backoff._async"):
            self.wrap(module, "retry_exception", _retry)
            self.wrap(module, "retry_predicate", _retry)
