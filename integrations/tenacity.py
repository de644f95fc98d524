"""tenacity: each attempt a span with its number, each wait a ``backoff`` span.

A failed attempt followed by another one is blamed on ``retry.failed``, the
waits between them on ``retry.backoff`` (DESIGN §4).  Covers the decorator,
calling a ``Retrying``/``AsyncRetrying`` object, and the iterator style
(``for attempt in Retrying(): with attempt: ...`` and its ``async for``
counterpart), where the span is opened by the attempt's context manager.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from agentscope.integrations._spans import open_span, traced, traced_async

from agentscope import attributes as A
from agentscope.sdk.decorators import backoff
from agentscope.sdk.instrumentation import Instrumentor


def _name(fn: Any) -> str:
    return f"attempt {getattr(fn, '__qualname__', getattr(fn, '__name__', 'call'))}"


def _backoff_sleep(original: Callable[[float], None], attempt: Callable[[], int]) -> Callable[[float], None]:
    """``original`` sleep as a backoff span, numbered by the attempt that failed before it."""

    def sleep(seconds: float) -> None:
        with backoff(planned_s=float(seconds), attempt=attempt()):
            original(seconds)

    return sleep


def _backoff_sleep_async(
    original: Callable[[float], Awaitable[None]], attempt: Callable[[], int]
) -> Callable[[float], Awaitable[None]]:
    async def sleep(seconds: float) -> None:
        async with backoff(planned_s=float(seconds), attempt=attempt()):
            await original(seconds)

    return sleep


@contextmanager
def _sleeping_as_backoff(
    instance: Any, make: Callable[[Any, Callable[[], int]], Any], attempt: Callable[[], int]
) -> Iterator[None]:
    """Swap the retrying object's sleep for one that makes backoff spans; put it back afterwards."""
    original_sleep = instance.sleep
    instance.sleep = make(original_sleep, attempt)
    try:
        yield
    finally:
        instance.sleep = original_sleep


def _counter() -> Callable[[], int]:
    """1, 2, 3, … on each call: the number of the attempt a sleep follows, where no state says it."""
    return functools.partial(next, itertools.count(1))


def _call(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    fn, *rest = args
    attempt = 0
    name = _name(fn)

    @functools.wraps(fn)
    def one_attempt(*a: Any, **k: Any) -> Any:
        nonlocal attempt
        attempt += 1
        return traced(name, "step", {A.ATTEMPT: attempt}, lambda: fn(*a, **k))

    with _sleeping_as_backoff(instance, _backoff_sleep, lambda: attempt):
        return wrapped(one_attempt, *rest, **kwargs)


async def _call_async(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    fn, *rest = args
    attempt = 0
    name = _name(fn)

    @functools.wraps(fn)
    async def one_attempt(*a: Any, **k: Any) -> Any:
        nonlocal attempt
        attempt += 1
        return await traced_async(name, "step", {A.ATTEMPT: attempt}, lambda: fn(*a, **k))

    with _sleeping_as_backoff(instance, _backoff_sleep_async, lambda: attempt):
        return await wrapped(one_attempt, *rest, **kwargs)


_ATTEMPT_SPAN = "_agentscope_span"
"""Where an iterator-style attempt keeps its span, on tenacity's ``AttemptManager``."""
_ORIGINAL_SLEEP = "_agentscope_sleep"
"""Where an ``AsyncRetrying`` being iterated keeps its own sleep while agentscope's is installed."""


def _attempt_enter(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    """An iterator-style attempt begins: open its span (``with attempt:`` or ``async with attempt:``)."""
    number = getattr(getattr(instance, "retry_state", None), "attempt_number", None)
    setattr(instance, _ATTEMPT_SPAN, open_span("attempt", "step", {A.ATTEMPT: number}))
    return wrapped(*args, **kwargs)


def _attempt_exit(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    rec = instance.__dict__.pop(_ATTEMPT_SPAN, None)
    if rec is not None:
        error = args[1] if len(args) > 1 else kwargs.get("exc_value")
        rec.finish(error if isinstance(error, BaseException) else None, 0)
        rec.exit()
    return wrapped(*args, **kwargs)


def _iterate(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    """``for attempt in Retrying()``: the sleeps between attempts become backoff spans."""
    with _sleeping_as_backoff(instance, _backoff_sleep, _counter()):
        yield from wrapped(*args, **kwargs)


def _aiter(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    """``async for attempt in AsyncRetrying()`` starts: install a sleep that makes backoff spans.

    There is no end to wrap, so :func:`_anext` gives the object its own sleep back.
    """
    if _ORIGINAL_SLEEP not in instance.__dict__:
        setattr(instance, _ORIGINAL_SLEEP, instance.sleep)
        instance.sleep = _backoff_sleep_async(instance.sleep, _counter())
    return wrapped(*args, **kwargs)


async def _anext(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    """The next attempt; when the iteration ends, the object gets its own sleep back."""
    try:
        return await wrapped(*args, **kwargs)
    except BaseException:
        original_sleep = instance.__dict__.pop(_ORIGINAL_SLEEP, None)
        if original_sleep is not None:
            instance.sleep = original_sleep
        raise


class TenacityInstrumentor(Instrumentor):
    library = "tenacity"

    def _instrument(self) -> None:
        self.wrap("tenacity", "Retrying.__call__", _call)
        self.wrap("tenacity", "Retrying.__iter__", _iterate)
        self.wrap("tenacity", "AttemptManager.__enter__", _attempt_enter)
        self.wrap("tenacity", "AttemptManager.__aenter__", _attempt_enter)
        self.wrap("tenacity", "AttemptManager.__exit__", _attempt_exit)
        self.wrap("tenacity.asyncio", "AsyncRetrying.__call__", _call_async)
        self.wrap("tenacity.asyncio", "AsyncRetrying.__aiter__", _aiter)
        self.wrap("tenacity.asyncio", "AsyncRetrying.__anext__", _anext)
