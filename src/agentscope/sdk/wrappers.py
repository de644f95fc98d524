"""Run a function, coroutine or generator inside a span, measuring its own CPU.

Each runner has the ``wrapt`` wrapper signature after its ``Spec``
(``wrapped, instance, args, kwargs``), so a decorator is just
``wrapt.FunctionWrapper(fn, partial(runner, spec))``.

Synchronous code is measured with the thread's CPU clock around the call.  A
coroutine is measured step by step (each ``send``/``throw``), so coroutines that
interleave on one event loop are not charged for each other's work.  Generators
are measured per step too, and their span stays open until iteration ends or the
generator is closed; the time spent inside the iterator is recorded apart from
the time the caller spends between items.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Callable, Generator, Mapping
from typing import Any

from agentscope import attributes as A
from agentscope.sdk.recording import NULL_RECORDING, Recording, content, start, with_kind
from agentscope.sdk.state import STATE

_thread_time_ns = time.thread_time_ns
_perf_ns = time.perf_counter_ns


class Spec:
    """What a decorated function's spans look like; built once at decoration time."""

    __slots__ = ("attributes", "kind", "name")

    def __init__(self, name: str, kind: str, attributes: Mapping[str, Any]) -> None:
        self.name = name
        self.kind = kind
        self.attributes = with_kind(kind, attributes)

    def start(self, args: tuple, kwargs: dict) -> Recording | None:
        attributes = self.attributes
        if STATE.capture_content:
            attributes = {**attributes, A.INPUT: content((args, kwargs))}
        return start(self.name, self.kind, attributes)


def _output(result: Any) -> dict[str, Any]:
    return {A.OUTPUT: content(result)}


def call(spec: Spec, fn: Callable, instance: Any, args: tuple, kwargs: dict) -> Any:
    rec = spec.start(args, kwargs)
    if rec is None:
        return fn(*args, **kwargs)
    rec.enter()
    cpu0 = _thread_time_ns()
    try:
        result = fn(*args, **kwargs)
    except BaseException as exc:
        rec.finish(exc, _thread_time_ns() - cpu0)
        rec.exit()
        raise
    rec.finish(None, _thread_time_ns() - cpu0, STATE.capture_content and _output(result))
    rec.exit()
    return result


class CpuMeter:
    """Awaitable that drives a coroutine and sums the CPU of its own steps."""

    __slots__ = ("_coro", "cpu_ns")

    def __init__(self, coro: Any) -> None:
        self._coro = coro
        self.cpu_ns = 0

    def __await__(self) -> Generator[Any, Any, Any]:
        coro = self._coro
        value: Any = None
        error: BaseException | None = None
        while True:
            t0 = _thread_time_ns()
            try:
                yielded = coro.send(value) if error is None else coro.throw(error)
            except StopIteration as stop:
                self.cpu_ns += _thread_time_ns() - t0
                return stop.value
            except BaseException:
                self.cpu_ns += _thread_time_ns() - t0
                raise
            self.cpu_ns += _thread_time_ns() - t0
            try:
                value = yield yielded
                error = None
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:
                value, error = None, exc


async def call_async(spec: Spec, fn: Callable, instance: Any, args: tuple, kwargs: dict) -> Any:
    coro = fn(*args, **kwargs)
    rec = spec.start(args, kwargs)
    if rec is None:
        return await coro
    rec.enter()
    meter = CpuMeter(coro)
    try:
        result = await meter
    except BaseException as exc:
        rec.finish(exc, meter.cpu_ns)
        rec.exit()
        raise
    rec.finish(None, meter.cpu_ns, STATE.capture_content and _output(result))
    rec.exit()
    return result


class _StreamStats:
    """Per-step accounting of a generator span: CPU, wait inside the iterator, items."""

    __slots__ = ("cpu_ns", "items", "wait_ns")

    def __init__(self) -> None:
        self.cpu_ns = 0
        self.wait_ns = 0
        self.items = 0

    def extra(self, rec: Recording) -> dict[str, Any] | None:
        if rec.kind != "llm":
            return None
        return {A.STREAMED: True, A.STREAM_CHUNKS: self.items, A.STREAM_WAIT_NS: self.wait_ns}

    def item(self, rec: Recording) -> None:
        self.items += 1
        if self.items == 1 and rec.llm is not None:
            rec.llm.first_token()


def call_generator(
    spec: Spec, fn: Callable, instance: Any, args: tuple, kwargs: dict
) -> Generator[Any, Any, Any]:
    rec = spec.start(args, kwargs) or NULL_RECORDING
    stats = _StreamStats()
    failure: BaseException | None = None
    try:
        gen = fn(*args, **kwargs)
        value: Any = None
        error: BaseException | None = None
        while True:
            rec.enter()
            t0, c0 = _perf_ns(), _thread_time_ns()
            try:
                item = gen.send(value) if error is None else gen.throw(error)
            except StopIteration as stop:
                return stop.value
            finally:
                stats.cpu_ns += _thread_time_ns() - c0
                stats.wait_ns += _perf_ns() - t0
                rec.exit()
            stats.item(rec)
            try:
                value = yield item
                error = None
            except GeneratorExit:
                gen.close()
                raise
            except BaseException as exc:
                value, error = None, exc
    except GeneratorExit:
        raise
    except BaseException as exc:
        failure = exc
        raise
    finally:
        rec.finish(failure, stats.cpu_ns, stats.extra(rec))


async def call_async_generator(
    spec: Spec, fn: Callable, instance: Any, args: tuple, kwargs: dict
) -> AsyncGenerator[Any, Any]:
    rec = spec.start(args, kwargs) or NULL_RECORDING
    stats = _StreamStats()
    failure: BaseException | None = None
    agen = fn(*args, **kwargs)
    try:
        value: Any = None
        error: BaseException | None = None
        while True:
            rec.enter()
            t0 = _perf_ns()
            meter = CpuMeter(agen.asend(value) if error is None else agen.athrow(error))
            try:
                item = await meter
            except StopAsyncIteration:
                return
            finally:
                stats.cpu_ns += meter.cpu_ns
                stats.wait_ns += _perf_ns() - t0
                rec.exit()
            stats.item(rec)
            try:
                value = yield item
                error = None
            except GeneratorExit:
                await agen.aclose()
                raise
            except BaseException as exc:
                value, error = None, exc
    except GeneratorExit:
        raise
    except BaseException as exc:
        failure = exc
        raise
    finally:
        rec.finish(failure, stats.cpu_ns, stats.extra(rec))
