"""tenacity: each attempt a span with its number, each wait a ``backoff`` span.

A failed attempt followed by another one is blamed on ``retry.failed``, the
waits between them on ``retry.backoff`` (DESIGN §4).  Covers the decorator and
calling a ``Retrying``/``AsyncRetrying`` object; the ``for attempt in
Retrying()`` iterator style is not patched.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from agentscope.integrations._spans import traced, traced_async

from agentscope import attributes as A
from agentscope.sdk.decorators import backoff
from agentscope.sdk.instrumentation import Instrumentor


def _name(fn: Any) -> str:
    return f"attempt {getattr(fn, '__qualname__', getattr(fn, '__name__', 'call'))}"


def _call(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    fn, *rest = args
    attempt = 0
    name = _name(fn)

    @functools.wraps(fn)
    def one_attempt(*a: Any, **k: Any) -> Any:
        nonlocal attempt
        attempt += 1
        return traced(name, "step", {A.ATTEMPT: attempt}, lambda: fn(*a, **k))

    original_sleep = instance.sleep

    def sleep(seconds: float) -> None:
        with backoff(planned_s=float(seconds), attempt=attempt):
            original_sleep(seconds)

    instance.sleep = sleep
    try:
        return wrapped(one_attempt, *rest, **kwargs)
    finally:
        instance.sleep = original_sleep


async def _call_async(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    fn, *rest = args
    attempt = 0
    name = _name(fn)

    @functools.wraps(fn)
    async def one_attempt(*a: Any, **k: Any) -> Any:
        nonlocal attempt
        attempt += 1
        return await traced_async(name, "step", {A.ATTEMPT: attempt}, lambda: fn(*a, **k))

    original_sleep = instance.sleep

    async def sleep(seconds: float) -> None:
        async with backoff(planned_s=float(seconds), attempt=attempt):
            await original_sleep(seconds)

    instance.sleep = sleep
    try:
        return await wrapped(one_attempt, *rest, **kwargs)
    finally:
        instance.sleep = original_sleep


class TenacityInstrumentor(Instrumentor):
    library = "tenacity"

    def _instrument(self) -> None:
        self.wrap("tenacity", "Retrying.__call__", _call)
        self.wrap("tenacity.asyncio", "AsyncRetrying.__call__", _call_async)
