"""The machinery shared by integrations of Stainless-generated LLM SDKs (openai, anthropic).

Both SDKs have the same client core: a resource method per API call, a
``_sleep_for_retry`` between attempts, and one method per HTTP attempt.  This
module wraps those: one llm span per logical call (or none, when a peer
instrumentation already makes it), an ``http`` span with status ERROR for each
failed attempt and a ``backoff`` span for each sleep, and a stream proxy whose
span ends exactly once.  A :class:`Dialect` says how an SDK's responses and
stream events carry usage, timings and the first token.
"""

from __future__ import annotations

import contextvars
import functools
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import wrapt
from agentscope.integrations._llm import get, provider_for, server_timings, usage_counts
from opentelemetry import trace

from agentscope import attributes as A
from agentscope.sdk._safety import report
from agentscope.sdk.clock import now_ns
from agentscope.sdk.recording import LLMCall, Recording, clean_attributes, start, with_kind

_CALL: contextvars.ContextVar[_Call | None] = contextvars.ContextVar("agentscope_llm_sdk_call", default=None)
_PROVIDER_OVERRIDES: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
_PROXY = getattr(wrapt, "BaseObjectProxy", wrapt.ObjectProxy)
"""What every wrapt wrapper is an instance of (wrapt 2 split it from ObjectProxy)."""


def set_provider(client: Any, provider: str) -> None:
    """Report ``provider`` for calls made with this client, whatever its base URL."""
    _PROVIDER_OVERRIDES[client] = provider


@dataclass(frozen=True)
class Dialect:
    """How one SDK's responses and stream events are read."""

    library: str
    raw_responses: tuple[type, ...]
    """The SDK's raw-response wrappers (``with_raw_response``), parsed before reading."""
    seen: Callable[[StreamState, Any], None]
    """Reads one stream event: marks the first token, notes bodies that carry usage."""
    peer_scopes: tuple[str, ...] = ()
    """Instrumentation scopes of peer instrumentations whose span is the call."""
    skip_span: bool = False
    """The SDK makes its own llm span for each call; agentscope adds only attempts and backoff."""


class _Call:
    """Bookkeeping of one logical call across its HTTP attempts."""

    __slots__ = ("attempt_start", "headers", "host", "method", "own_span", "peer_scopes", "status")

    def __init__(self, own_span: bool, peer_scopes: tuple[str, ...] = ()) -> None:
        self.own_span = own_span
        self.peer_scopes = peer_scopes
        self.attempt_start = 0
        self.headers: Any = None
        self.method = "POST"
        self.status: int | None = None
        self.host: str | None = None


def _peer_span(scopes: tuple[str, ...]) -> trace.Span | None:
    """The current span if a peer instrumentation made it for this very call."""
    span = trace.get_current_span()
    scope = getattr(span, "instrumentation_scope", None)
    name = getattr(scope, "name", "") or ""
    if scopes and span.is_recording() and name.startswith(scopes):
        return span
    return None


def _peer_inside(wrapped: Any, instance: Any) -> bool:
    """Whether another instrumentation will make its own span for this call, below ours."""
    if isinstance(wrapped, _PROXY):
        return True
    client_type = type(getattr(instance, "_client", None))
    return any(isinstance(klass.__dict__.get("request"), _PROXY) for klass in client_type.__mro__)


@functools.lru_cache(maxsize=1024)
def _prepared(operation: str, model: Any, provider: str) -> tuple[str, dict[str, Any]]:
    """Span name and start attributes for a call; the same few combinations recur, so they are cached."""
    attributes = clean_attributes(
        {A.GEN_AI_OPERATION_NAME: operation, A.GEN_AI_REQUEST_MODEL: model, A.GEN_AI_PROVIDER_NAME: provider}
    )
    return (f"{operation} {model}" if model else operation), with_kind("llm", attributes)


def _open(
    wrapped: Any, instance: Any, kwargs: dict[str, Any], operation: str, dialect: Dialect
) -> tuple[Recording | None, LLMCall | None]:
    if dialect.skip_span or _peer_inside(wrapped, instance):
        return None, None
    client = getattr(instance, "_client", None)
    model = kwargs.get("model")
    model = model if model is None or isinstance(model, str) else str(model)
    provider = _PROVIDER_OVERRIDES.get(client) or provider_for(getattr(client, "base_url", ""))
    name, attributes = _prepared(operation, model, provider)
    peer = _peer_span(dialect.peer_scopes)
    if peer is not None:
        peer.set_attributes(attributes)
        return None, LLMCall(peer, getattr(peer, "start_time", now_ns()))
    rec = start(name, "llm", attributes)
    return rec, rec.llm if rec is not None else None


_TIMING_KEYS = {
    "queue_ms": A.SERVER_QUEUE_MS,
    "prefill_ms": A.SERVER_PREFILL_MS,
    "decode_ms": A.SERVER_DECODE_MS,
    "total_ms": A.SERVER_TOTAL_MS,
}
_USAGE_KEYS = {
    "input_tokens": A.GEN_AI_USAGE_INPUT_TOKENS,
    "output_tokens": A.GEN_AI_USAGE_OUTPUT_TOKENS,
    "cached_tokens": A.GEN_AI_USAGE_CACHED_INPUT_TOKENS,
}


def record_result(call: LLMCall, body: Any, headers: Any = None) -> None:
    """Usage, server timings and the response model of ``body``, set on the span in one go."""
    values: dict[str, Any] = {_USAGE_KEYS[k]: v for k, v in usage_counts(body).items()}
    values.update({_TIMING_KEYS[k]: v for k, v in server_timings(body, headers).items()})
    model = get(body, "model")
    if isinstance(model, str):
        values[A.GEN_AI_RESPONSE_MODEL] = model
    call.set_attributes(values)


class _CallScope:
    """What a wrapped API call sets up before the SDK runs, and undoes when it returns or raises."""

    __slots__ = ("call", "cpu0", "dialect", "kwargs", "rec", "state", "t0", "token")

    def __init__(self, rec: Recording | None, call: LLMCall | None, dialect: Dialect, kwargs: dict) -> None:
        self.rec, self.call, self.dialect, self.kwargs = rec, call, dialect, kwargs
        self.state = _Call(own_span=rec is not None, peer_scopes=dialect.peer_scopes)
        self.token = _CALL.set(self.state)
        if rec is not None:
            rec.enter()
        self.t0, self.cpu0 = time.perf_counter_ns(), time.thread_time_ns()

    def failed(self, error: BaseException) -> None:
        if self.rec is not None:
            self.rec.finish(error, time.thread_time_ns() - self.cpu0)
            self.rec.exit()
        _CALL.reset(self.token)

    def returned(self, result: Any) -> Any:
        _CALL.reset(self.token)
        if self.rec is not None:
            self.rec.exit()
        return _after(result, self.rec, self.call, self.state, self.kwargs, self.t0, self.cpu0, self.dialect)


def _scope(wrapped: Any, instance: Any, kwargs: dict, operation: str, dialect: Dialect) -> _CallScope | None:
    """The call's scope; None (the call runs untouched) if opening its span failed."""
    try:
        rec, call = _open(wrapped, instance, kwargs, operation, dialect)
    except Exception as exc:
        report(f"opening a {dialect.library} span", exc)
        return None
    return _CallScope(rec, call, dialect, kwargs)


def call_sync(operation: str, dialect: Dialect) -> Callable[..., Any]:
    """The wrapper of a synchronous API method: one llm span per call."""

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        scope = _scope(wrapped, instance, kwargs, operation, dialect)
        if scope is None:
            return wrapped(*args, **kwargs)
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            scope.failed(exc)
            raise
        return scope.returned(result)

    return wrapper


def call_async(operation: str, dialect: Dialect) -> Callable[..., Any]:
    """The wrapper of an asynchronous API method."""

    async def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        scope = _scope(wrapped, instance, kwargs, operation, dialect)
        if scope is None:
            return await wrapped(*args, **kwargs)
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as exc:
            scope.failed(exc)
            raise
        return scope.returned(result)

    return wrapper


def _after(
    result: Any,
    rec: Recording | None,
    call: LLMCall | None,
    state: _Call,
    kwargs: dict,
    t0: int,
    cpu0: int,
    dialect: Dialect,
) -> Any:
    """Finish a non-streamed call, or hand a stream to a proxy that finishes it later."""
    if call is None:
        return result
    try:
        if kwargs.get("stream") and rec is not None:
            proxy_type = _AsyncStream if hasattr(result, "__aiter__") else _Stream
            tracked = StreamState(
                rec, state, time.perf_counter_ns() - t0, time.thread_time_ns() - cpu0, dialect
            )
            return proxy_type(result, tracked)
        body = result.parse() if isinstance(result, dialect.raw_responses) else result
        record_result(call, body, state.headers)
    except Exception as exc:
        report(f"recording a {dialect.library} response", exc)
    if rec is not None:
        rec.finish(None, time.thread_time_ns() - cpu0)
    return result


class StreamState:
    """What a stream proxy tracks until its span ends (shared with its GC finalizer)."""

    def __init__(self, rec: Recording, state: _Call, wait_ns: int, cpu_ns: int, dialect: Dialect) -> None:
        self.rec, self.state, self.dialect = rec, state, dialect
        self.wait_ns, self.cpu_ns = wait_ns, cpu_ns
        self.chunks = 0
        self.first_seen = False
        self.bodies: list[Any] = []
        self.done = False

    def seen(self, chunk: Any) -> None:
        self.chunks += 1
        self.dialect.seen(self, chunk)

    def first_token(self) -> None:
        """The first content or tool-call delta arrived (a role-only chunk does not count)."""
        self.first_seen = True
        if self.rec.llm is not None:
            self.rec.llm.first_token()

    def note(self, body: Any) -> None:
        """Keep an event that carries usage or timings, read when the stream ends."""
        self.bodies.append(body)

    def end(self, error: BaseException | None = None) -> None:
        if self.done:
            return
        self.done = True
        try:
            if self.rec.llm is not None:
                for body in self.bodies:
                    record_result(self.rec.llm, body, self.state.headers)
            extra = {A.STREAMED: True, A.STREAM_CHUNKS: self.chunks, A.STREAM_WAIT_NS: self.wait_ns}
        except Exception as exc:
            report(f"recording a {self.dialect.library} stream", exc)
            extra = None
        self.rec.finish(error, self.cpu_ns, extra)


class _Stream(wrapt.ObjectProxy):
    """An SDK ``Stream`` that times its own iteration and ends the call's span once."""

    def __init__(self, stream: Any, tracked: StreamState) -> None:
        super().__init__(stream)
        self._self_state = tracked
        self._self_iterator = None
        weakref.finalize(self, self._self_state.end)

    def __iter__(self) -> _Stream:
        return self

    def __next__(self) -> Any:
        tracked = self._self_state
        if self._self_iterator is None:
            self._self_iterator = iter(self.__wrapped__)
        t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
        try:
            chunk = next(self._self_iterator)
        except StopIteration:
            tracked.wait_ns += time.perf_counter_ns() - t0
            tracked.cpu_ns += time.thread_time_ns() - c0
            tracked.end()
            raise
        except BaseException as exc:
            tracked.wait_ns += time.perf_counter_ns() - t0
            tracked.cpu_ns += time.thread_time_ns() - c0
            tracked.end(exc)
            raise
        tracked.wait_ns += time.perf_counter_ns() - t0
        tracked.cpu_ns += time.thread_time_ns() - c0
        tracked.seen(chunk)
        return chunk

    def close(self) -> None:
        try:
            self.__wrapped__.close()
        finally:
            self._self_state.end()

    def __enter__(self) -> _Stream:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


class _AsyncStream(wrapt.ObjectProxy):
    """The ``AsyncStream`` counterpart of :class:`_Stream`."""

    def __init__(self, stream: Any, tracked: StreamState) -> None:
        super().__init__(stream)
        self._self_state = tracked
        self._self_iterator = None
        weakref.finalize(self, self._self_state.end)

    def __aiter__(self) -> _AsyncStream:
        return self

    async def __anext__(self) -> Any:
        tracked = self._self_state
        if self._self_iterator is None:
            self._self_iterator = self.__wrapped__.__aiter__()
        t0 = time.perf_counter_ns()
        try:
            chunk = await self._self_iterator.__anext__()
        except StopAsyncIteration:
            tracked.wait_ns += time.perf_counter_ns() - t0
            tracked.end()
            raise
        except BaseException as exc:
            tracked.wait_ns += time.perf_counter_ns() - t0
            tracked.end(exc)
            raise
        tracked.wait_ns += time.perf_counter_ns() - t0
        tracked.seen(chunk)
        return chunk

    async def close(self) -> None:
        try:
            await self.__wrapped__.close()
        finally:
            self._self_state.end()

    async def __aenter__(self) -> _AsyncStream:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()


def attempt_begins(request: Any) -> _Call | None:
    state = _CALL.get()
    if state is None:
        return None
    state.attempt_start = now_ns()
    if request is None:  # the SDK builds the request inside the attempt
        return state
    state.method = getattr(request, "method", "POST")
    state.host = getattr(getattr(request, "url", None), "host", None)
    try:
        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            flags = "01" if context.trace_flags.sampled else "00"
            request.headers["traceparent"] = f"00-{context.trace_id:032x}-{context.span_id:016x}-{flags}"
    except Exception as exc:
        report("propagating trace context to the provider", exc)
    return state


def attempt_ends(state: _Call | None, response: Any) -> None:
    if state is None or response is None:
        return
    state.headers = getattr(response, "headers", None)
    state.status = getattr(response, "status_code", None)
    if state.own_span:
        return
    peer = _peer_span(state.peer_scopes)
    if peer is not None and state.headers is not None:
        timings = server_timings(None, state.headers)
        LLMCall(peer, 0).server_timing(**timings)


def send_sync(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    state = attempt_begins(args[0] if args else kwargs.get("request"))
    response = wrapped(*args, **kwargs)
    attempt_ends(state, response)
    return response


async def send_async(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    state = attempt_begins(args[0] if args else kwargs.get("request"))
    response = await wrapped(*args, **kwargs)
    attempt_ends(state, response)
    return response


def _failed_attempt(kwargs: dict) -> tuple[Recording | None, int]:
    """Record the attempt that just failed as an http span; returns the backoff span and attempt number."""
    state = _CALL.get()
    attempt = int(kwargs.get("retries_taken", 0)) + 1
    if state is None or not state.attempt_start:
        return None, attempt
    response = kwargs.get("response")
    status = getattr(response, "status_code", None)
    attributes = clean_attributes(
        {
            A.HTTP_REQUEST_METHOD: state.method,
            A.SERVER_ADDRESS: state.host,
            A.HTTP_RESPONSE_STATUS_CODE: status,
            A.HTTP_RESEND_COUNT: attempt - 1,
            A.ATTEMPT: attempt,
        }
    )
    failed = start(
        f"{state.method} attempt {attempt}", "http", with_kind("http", attributes), state.attempt_start
    )
    if failed is not None:
        failed.finish(
            None, 0, status_message=f"attempt {attempt} failed" + (f" with HTTP {status}" if status else "")
        )
    backoff = start("backoff", "backoff", with_kind("backoff", {A.ATTEMPT: attempt}))
    return backoff, attempt


def sleep_sync(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    backoff, _ = _failed_attempt(kwargs)
    if backoff is None:
        return wrapped(*args, **kwargs)
    backoff.enter()
    try:
        return wrapped(*args, **kwargs)
    finally:
        backoff.finish(None, 0)
        backoff.exit()


async def sleep_async(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    backoff, _ = _failed_attempt(kwargs)
    if backoff is None:
        return await wrapped(*args, **kwargs)
    backoff.enter()
    try:
        return await wrapped(*args, **kwargs)
    finally:
        backoff.finish(None, 0)
        backoff.exit()
