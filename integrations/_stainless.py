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
import inspect
import operator
import threading
import time
import weakref
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import wrapt
from agentscope.integrations._llm import header_timings, joins_traces, provider_for, response_attributes
from opentelemetry import baggage, propagate, trace
from opentelemetry import context as otel_context
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.context import Context
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from agentscope import attributes as A
from agentscope.sdk._safety import report
from agentscope.sdk.clock import now_ns
from agentscope.sdk.recording import LLMCall, Recording, clean_attributes, start, with_kind

if TYPE_CHECKING:
    from agentscope.sdk.instrumentation import Instrumentor

_CALL: contextvars.ContextVar[_Call | None] = contextvars.ContextVar("agentscope_llm_sdk_call", default=None)
_PROVIDERS: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
"""Client → the provider set by hand (:func:`set_provider`)."""
_BY_URL: dict[int, tuple[Any, str, bool]] = {}
"""``id`` of a client's base URL → (that URL, kept so the id stays its own; its provider; whether its
server joins the caller's trace)."""
_PROXY = getattr(wrapt, "BaseObjectProxy", wrapt.ObjectProxy)
"""What every wrapt wrapper is an instance of (wrapt 2 split it from ObjectProxy)."""


def set_provider(client: Any, provider: str) -> None:
    """Report ``provider`` for calls made with this client, whatever its base URL."""
    _PROVIDERS[client] = provider


def _base_url(client: Any) -> Any:
    """The client's base URL, read from the field the SDK keeps it in (``_base_url``, or openai 3's
    ``_configured_base_url``) where it has one: openai 3's ``base_url`` property runs an import."""
    fields = getattr(client, "__dict__", None) or {}
    url = fields.get("_base_url") or fields.get("_configured_base_url")
    if url is None:
        url = getattr(client, "_base_url", None) or getattr(client, "base_url", "")
    return url


def _destination(client: Any) -> tuple[str, bool]:
    """The provider of a client's calls (set by hand, or read from its base URL), and whether its
    server joins the caller's trace (so ``traceparent`` is sent to it).

    Every call asks, so the answer is cached by the URL object itself: a client
    whose base URL is replaced is read again.
    """
    url = _base_url(client)
    cached = _BY_URL.get(id(url))
    if cached is None or cached[0] is not url:
        if len(_BY_URL) >= 256:
            _BY_URL.clear()
        cached = _BY_URL[id(url)] = (url, provider_for(url), joins_traces(url))
    if _PROVIDERS.data:
        try:
            return _PROVIDERS.get(client, cached[1]), cached[2]
        except TypeError:  # a client that cannot be weakly referenced
            pass
    return cached[1], cached[2]


@dataclass(frozen=True)
class Dialect:
    """How one SDK's responses and stream events are read."""

    library: str
    raw_responses: tuple[type, ...]
    """The SDK's raw-response wrappers (``with_raw_response``), parsed before reading."""
    seen: Callable[[StreamState, Any], None]
    """Reads one stream event: marks the first token, notes bodies that carry usage."""
    peer_scopes: tuple[str, ...] = ()
    """Instrumentation scopes of peer instrumentations of this same SDK, whose current span is the call
    (a framework's span that is current, LlamaIndex's ``OpenAILike.astream_chat`` say, is not)."""
    skip_span: Callable[[Any], bool] | None = None
    """Whether the SDK makes its own llm span for each call of this client (None: it never does);
    agentscope then adds only attempts and backoff."""
    reads_for_peers: Callable[[], None] = lambda: None
    """Called when a call's span is a peer's below agentscope: from then on the SDK's ``_process_response``
    writes what the response carries on that span (:func:`peer_reader`).  An app with no such peer
    never has the method patched, and pays nothing for it (nor does one whose SDK makes its own span,
    which records its usage itself)."""


class _Call:
    """One logical call across its HTTP attempts: what the wrapper sets up before the SDK runs (its span
    current, the call the attempts see), undone when the SDK returns or raises, and what each attempt
    notes on it.  One object, set in one context variable: the call path is paid on every LLM call."""

    __slots__ = (
        "asynchronous",
        "attempt_start",
        "call",
        "context",
        "cpu0",
        "dialect",
        "headers",
        "kwargs",
        "rec",
        "request",
        "t0",
        "token",
        "trace_headers",
    )

    def __init__(
        self,
        rec: Recording | None,
        call: LLMCall | None,
        dialect: Dialect,
        kwargs: dict,
        joins: bool,
        context: Context | None,
    ) -> None:
        self.rec, self.call, self.dialect, self.kwargs = rec, call, dialect, kwargs
        self.context = context
        """The context the call was made in (its baggage is the call's)."""
        self.asynchronous = False
        """Made by an async method: a stream that iterates both ways (LiteLLM's) is read as async."""
        self.attempt_start = 0
        self.headers: Any = None
        self.request: Any = None
        """The attempt's request; its method and host are read only if the attempt fails."""
        self.trace_headers: dict[str, str] | None = None if joins else {}
        """The call's context as propagation headers (``traceparent`` …), made at its first attempt;
        none for a server that does not join the caller's trace."""
        self.token = _CALL.set(self)
        if rec is not None:
            rec.enter(context)
        self.t0, self.cpu0 = time.perf_counter_ns(), time.thread_time_ns()

    def failed(self, error: BaseException) -> None:
        if self.rec is not None:
            self.rec.finish(error, time.thread_time_ns() - self.cpu0)
            self.rec.exit()
        _CALL.reset(self.token)

    def returned(self, result: Any) -> Any:
        """Finish a non-streamed call, or hand a stream to a proxy that finishes it later."""
        _CALL.reset(self.token)
        call, rec, dialect = self.call, self.rec, self.dialect
        if rec is not None:
            rec.exit()
        if call is None:
            return result
        values = None
        try:
            if self.kwargs.get("stream"):
                tracked = StreamState(rec, call, self, time.perf_counter_ns() - self.t0, self.cpu0, dialect)
                return stream_proxy(result, tracked)
            body = result.parse() if isinstance(result, dialect.raw_responses) else result
            values = response_attributes(body, self.headers)
        except Exception as exc:
            report(f"recording a {dialect.library} response", exc)
        if rec is not None:
            rec.finish(None, time.thread_time_ns() - self.cpu0, values)
        elif values:
            call.set_attributes(values)
        return result


def _peer_span(scopes: tuple[str, ...], context: Context | None = None) -> trace.Span | None:
    """The current span (of ``context``, where given) if a peer instrumentation made it for this very call."""
    span = trace.get_current_span(context)
    if not scopes or not span.is_recording():
        return None
    scope = getattr(span, "instrumentation_scope", None)
    name = getattr(scope, "name", "") or ""
    return span if name.startswith(scopes) else None


def _peer_inside(wrapped: Any, instance: Any) -> bool:
    """Whether another instrumentation will make its own span for this call, below ours."""
    if isinstance(wrapped, _PROXY):
        return True
    return isinstance(getattr(type(getattr(instance, "_client", None)), "request", None), _PROXY)


@functools.lru_cache(maxsize=1024)
def _prepared(operation: str, model: Any, provider: str) -> tuple[str, dict[str, Any]]:
    """Span name and start attributes for a call; the same few combinations recur, so they are cached."""
    attributes = clean_attributes(
        {A.GEN_AI_OPERATION_NAME: operation, A.GEN_AI_REQUEST_MODEL: model, A.GEN_AI_PROVIDER_NAME: provider}
    )
    return (f"{operation} {model}" if model else operation), with_kind("llm", attributes)


RAW_RESPONSE_HEADER = "X-Stainless-Raw-Response"
"""The header ``with_raw_response`` and ``with_streaming_response`` add to a call's ``extra_headers``: the
SDK then returns the response, not the stream.  A peer that wraps the call cannot wrap that stream and
ends its span when the call returns, at the headers; agentscope records such a call itself, beside the
peer's record (which the analysis reads as the same call, ended early)."""


def _scope(wrapped: Any, instance: Any, kwargs: dict, operation: str, dialect: Dialect) -> _Call | None:
    """The call's bookkeeping, its span open and current; None (the call runs untouched) if opening its
    span failed.  The current context is read once, for the peer check, the span and the headers."""
    rec, call, context = None, None, None
    try:
        client = getattr(instance, "_client", None)
        provider, joins = _destination(client)
        raw_stream = kwargs.get("stream") and RAW_RESPONSE_HEADER in (kwargs.get("extra_headers") or ())
        if not raw_stream and _peer_inside(wrapped, instance):
            dialect.reads_for_peers()
        elif dialect.skip_span is None or not dialect.skip_span(client):
            context = otel_context.get_current()
            model = kwargs.get("model")
            model = model if model is None or isinstance(model, str) else str(model)
            name, attributes = _prepared(operation, model, provider)
            peer = None if raw_stream else _peer_span(dialect.peer_scopes, context)
            if peer is not None:
                peer.set_attributes(attributes)
                call = LLMCall(peer, getattr(peer, "start_time", now_ns()))
            else:
                rec = start(name, "llm", attributes, context=context)
                call = rec.llm if rec is not None else None
    except Exception as exc:
        report(f"opening a {dialect.library} span", exc)
        return None
    return _Call(rec, call, dialect, kwargs, joins, context)


def open_call(
    operation: str, model: str | None, provider: str, joins: bool, dialect: Dialect, kwargs: dict
) -> _Call | None:
    """A call's bookkeeping with a span of its own, current (no peer looked for): for a library that
    routes calls itself (LiteLLM), through its own :func:`call_sync` ``opens``.  None if opening failed."""
    try:
        context = otel_context.get_current()
        name, attributes = _prepared(operation, model, provider)
        rec = start(name, "llm", attributes, context=context)
        return _Call(rec, rec.llm if rec is not None else None, dialect, kwargs, joins, context)
    except Exception as exc:
        report(f"opening a {dialect.library} span", exc)
        return None


Opens = Callable[[Any, Any, dict, str, Dialect], "_Call | None"]
"""How a wrapper opens a call: (wrapped, instance, kwargs, operation, dialect) → its bookkeeping."""


def call_sync(operation: str, dialect: Dialect, opens: Opens = _scope) -> Callable[..., Any]:
    """The wrapper of a synchronous API method: one llm span per call."""

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        scope = opens(wrapped, instance, kwargs, operation, dialect)
        if scope is None:
            return wrapped(*args, **kwargs)
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            scope.failed(exc)
            raise
        return scope.returned(result)

    return wrapper


def call_async(operation: str, dialect: Dialect, opens: Opens = _scope) -> Callable[..., Any]:
    """The wrapper of an asynchronous API method."""

    async def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        scope = opens(wrapped, instance, kwargs, operation, dialect)
        if scope is None:
            return await wrapped(*args, **kwargs)
        scope.asynchronous = True
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as exc:
            scope.failed(exc)
            raise
        return scope.returned(result)

    return wrapper


def stream_manager(call: Callable[..., Any]) -> Callable[..., Any]:
    """The wrapper of a ``stream()`` helper that posts without ``create`` and returns a manager that sends
    the request only when its ``with`` block is entered (anthropic's ``messages.stream()``): that request,
    deferred, becomes the call, wrapped by ``call`` (from :func:`call_sync` or :func:`call_async`).

    A peer that wrapped the helper below agentscope returns its own manager around the SDK's (OpenLLMetry)
    or a proxy of it (OpenInference); the SDK's is found inside, and the call is made as beside any peer:
    on the peer's span if that is current when the request is sent, else a span of its own that the
    analysis reads as the same call.  A manager of a layout not known here is returned as it is."""

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        manager = wrapped(*args, **kwargs)
        try:
            found = _request_of(manager)
            if found is None:
                return manager
            holder, name = found
            request = getattr(holder, name)
            facts = {"model": kwargs.get("model"), "stream": True}
            if callable(request):
                setattr(holder, name, functools.partial(call, lambda **_: request(), instance, (), facts))
            else:  # an async manager awaits a coroutine made when stream() was called
                setattr(holder, name, _Deferred(lambda: call(lambda **_: request, instance, (), facts)))
        except Exception as exc:
            report("deferring a stream helper's request", exc)
        return manager

    return wrapper


def _request_of(manager: Any) -> tuple[Any, str] | None:
    """The SDK stream manager that holds the request (``manager`` or one it wraps), and the request's
    attribute (private, name-mangled: ``_MessageStreamManager__api_request``)."""
    for holder in (manager, *vars(manager).values()):
        fields = getattr(holder, "__dict__", None)
        if isinstance(fields, dict):
            name = next((key for key in fields if key.endswith("__api_request")), None)
            if name is not None:
                return holder, name
    return None


class _Deferred:
    """An awaitable that makes its coroutine only when awaited: a manager never entered leaves nothing
    un-awaited behind but what the SDK itself made."""

    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make

    def __await__(self) -> Any:
        return self.make().__await__()


class StreamState:
    """What a stream proxy tracks until its span ends (shared with its GC finalizer).

    ``rec`` is None when the call is recorded by a peer's span (``call`` then
    writes to it): the stream's first token, usage and chunk count go on that
    span while it is still open, and ending it is left to its owner.

    The span's CPU is the calling thread's CPU from the call until the stream
    ends, as for any other span, read once at the end rather than around every
    chunk (a thread-CPU read is a system call).  A stream finished on another
    thread, or an async stream, whose event loop runs other tasks between
    chunks, reports the CPU of the call that opened it.

    The dialect reads every event until the first token; after it the proxy
    only keeps the last three, which the dialect reads when the stream ends.
    Usage and server timings come before the first token or in the last events
    (Anthropic's ``message_start`` and ``message_delta``, OpenAI's finish and
    usage chunks, the Responses API's ``response.completed``), and a stream's
    long middle then costs a chunk count and a wait time each.
    """

    __slots__ = (
        "bodies",
        "call",
        "call_cpu_ns",
        "chunks",
        "cpu0",
        "dialect",
        "done",
        "first_seen",
        "iterator",
        "rec",
        "seen",
        "state",
        "stepper",
        "tail",
        "thread",
        "wait",
    )

    def __init__(
        self, rec: Recording | None, call: LLMCall, state: _Call, wait_ns: int, cpu0: int, dialect: Dialect
    ) -> None:
        self.rec, self.call, self.state, self.dialect = rec, call, state, dialect
        self.seen = dialect.seen
        """The dialect's reader of one event: of each until the first token, then of the last ones."""
        self.wait, self.cpu0 = wait_ns / 1e9, cpu0
        """Seconds inside the SDK so far, as ``perf_counter()`` floats: their sums cost less per chunk
        than ints of nanoseconds (each allocated anew), and a reading is exact to a few nanoseconds
        even after months of uptime."""
        self.call_cpu_ns = time.thread_time_ns() - cpu0
        self.thread = threading.get_ident()
        self.chunks = 0
        self.first_seen = False
        self.bodies: list[Any] = []
        self.tail: deque[Any] = deque(maxlen=3)
        """The last events after the first token, read by the dialect when the stream ends."""
        self.done = False
        self.iterator: Any = None
        """The wrapped stream's iterator, kept here because a slot is quicker to read than a proxy's field."""
        self.stepper: Any = None
        """The generator behind ``next(stream)`` or ``anext(stream)`` calls (a loop gets one of its own)."""

    def first_token(self) -> None:
        """The first content or tool-call delta arrived (a role-only chunk does not count)."""
        self.first_seen = True
        self.call.first_token()

    def note(self, body: Any) -> None:
        """Keep an event that carries usage or timings, read when the stream ends."""
        self.bodies.append(body)

    def end(self, error: BaseException | None = None, whole_stream_cpu: bool = False) -> None:
        """End the call (once).  A stream never iterated (a raw response whose body was read some other
        way, or not at all) ends as a call not streamed: its span, the body's read included, is the call."""
        if self.done:
            return
        self.done = True
        cpu = self.call_cpu_ns
        if whole_stream_cpu and threading.get_ident() == self.thread:
            cpu = time.thread_time_ns() - self.cpu0
        extra: dict[str, Any] = {}
        if self.iterator is not None:
            extra = {A.STREAMED: True, A.STREAM_CHUNKS: self.chunks, A.STREAM_WAIT_NS: round(self.wait * 1e9)}
        try:
            for event in self.tail:
                self.seen(self, event)
            for body in self.bodies:
                extra.update(response_attributes(body, self.state.headers))
        except Exception as exc:
            report(f"recording a {self.dialect.library} stream", exc)
        if self.rec is not None:
            self.rec.finish(error, cpu, extra)
        else:
            self.call.set_attributes(extra)


class _Stream(wrapt.ObjectProxy):
    """An SDK ``Stream`` that times its own iteration and ends the call's span once."""

    def __init__(self, stream: Any, tracked: StreamState) -> None:
        super().__init__(stream)
        self._self_state = tracked
        weakref.finalize(self, self._self_state.end)

    def __iter__(self) -> Iterator[Any]:
        # A generator: resuming it costs less per chunk than a __next__ call on the proxy.
        return _timed_chunks(self._self_state, self.__wrapped__, keep_alive=self)

    def __next__(self) -> Any:
        tracked = self._self_state
        if tracked.stepper is None:
            tracked.stepper = _timed_chunks(tracked, self.__wrapped__)
        return next(tracked.stepper)

    def close(self) -> None:
        try:
            self.__wrapped__.close()
        finally:
            self._self_state.end(whole_stream_cpu=True)

    def __enter__(self) -> _Stream:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


def _timed_chunks(
    tracked: StreamState, stream: Any, keep_alive: Any = None, clock: Callable[[], float] = time.perf_counter
) -> Iterator[Any]:
    """The chunks of ``stream``, each timed and read; the span ends when the chunks do.

    ``keep_alive`` is the proxy a ``for`` loop iterates: a proxy only the loop
    refers to must not be collected (which ends the span) while the loop runs.
    """
    iterator = tracked.iterator
    if iterator is None:
        iterator = tracked.iterator = iter(stream)
    seen, keep = tracked.seen, tracked.tail.append
    while True:
        t0 = clock()
        try:
            chunk = next(iterator)
        except StopIteration:
            tracked.wait += clock() - t0
            tracked.end(whole_stream_cpu=True)
            return
        except BaseException as exc:
            tracked.wait += clock() - t0
            tracked.end(exc, whole_stream_cpu=True)
            raise
        tracked.wait += clock() - t0
        tracked.chunks += 1
        if tracked.first_seen:
            keep(chunk)
        else:
            seen(tracked, chunk)
        yield chunk


class _AsyncStream(wrapt.ObjectProxy):
    """The ``AsyncStream`` counterpart of :class:`_Stream`."""

    def __init__(self, stream: Any, tracked: StreamState) -> None:
        super().__init__(stream)
        self._self_state = tracked
        weakref.finalize(self, self._self_state.end)

    def __aiter__(self) -> AsyncIterator[Any]:
        # An async generator: resuming it costs less per chunk than an __anext__ call on the proxy.
        return _timed_events(self._self_state, self.__wrapped__, keep_alive=self)

    async def __anext__(self) -> Any:
        tracked = self._self_state
        if tracked.stepper is None:
            tracked.stepper = _timed_events(tracked, self.__wrapped__)
        return await tracked.stepper.__anext__()

    async def close(self) -> None:
        try:
            await self.__wrapped__.close()
        finally:
            self._self_state.end()

    async def __aenter__(self) -> _AsyncStream:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()


async def _timed_events(
    tracked: StreamState, stream: Any, keep_alive: Any = None, clock: Callable[[], float] = time.perf_counter
) -> AsyncIterator[Any]:
    """The async counterpart of :func:`_timed_chunks`, whose loop it repeats line for line: a helper
    both called would be a call a chunk, the cost these loops are kept in line to avoid."""
    iterator = tracked.iterator
    if iterator is None:
        iterator = tracked.iterator = stream.__aiter__()
    seen, keep = tracked.seen, tracked.tail.append
    while True:
        t0 = clock()
        try:
            chunk = await iterator.__anext__()
        except StopAsyncIteration:
            tracked.wait += clock() - t0
            tracked.end()
            return
        except BaseException as exc:
            tracked.wait += clock() - t0
            tracked.end(exc)
            raise
        tracked.wait += clock() - t0
        tracked.chunks += 1
        if tracked.first_seen:
            keep(chunk)
        else:
            seen(tracked, chunk)
        yield chunk


def stream_proxy(result: Any, tracked: StreamState) -> Any:
    """What a streamed call hands back, timed: the SDK's stream, or the raw response it is parsed from
    (``with_raw_response``, ``with_streaming_response``)."""
    if isinstance(result, tracked.dialect.raw_responses):
        return (_AsyncRawStream if inspect.iscoroutinefunction(result.parse) else _RawStream)(result, tracked)
    both_ways = hasattr(result, "__iter__")  # LiteLLM's stream: read as its call was made
    asynchronous = hasattr(result, "__aiter__") and (tracked.state.asynchronous or not both_ways)
    return (_AsyncStream if asynchronous else _Stream)(result, tracked)


class _RawStream(wrapt.ObjectProxy):
    """The raw response of a streamed call, whose ``parse()`` gives the stream, timed.

    The call's span ends with that stream, or, if the body is read otherwise (``iter_lines()``, no
    first token then), when the response is closed (leaving ``with_streaming_response``'s block) or
    collected unparsed.  The response keeps its stream: a peer that parses it to look and drops what
    it got leaves the caller the same stream, not one already ended; and a response dropped once
    parsed (``for chunk in raw.parse()``) leaves the stream to end the call."""

    def __init__(self, response: Any, tracked: StreamState) -> None:
        super().__init__(response)
        self._self_state = tracked
        self._self_streams: list[Any] = []
        weakref.finalize(self, _end_unless_parsed, tracked, self._self_streams)

    def parse(self, *args: Any, **kwargs: Any) -> Any:
        return self._self_timed(self.__wrapped__.parse(*args, **kwargs))

    def _self_timed(self, parsed: Any) -> Any:
        for known in self._self_streams:
            if known.__wrapped__ is parsed:  # the SDK parses once
                return known
        if hasattr(parsed, "__aiter__"):
            timed: Any = _AsyncStream(parsed, self._self_state)
        elif hasattr(parsed, "__next__"):
            timed = _Stream(parsed, self._self_state)
        else:  # parsed to something else (``parse(to=httpx.Response)``): the body is the caller's to read
            return parsed
        self._self_streams.append(timed)
        return timed

    def close(self) -> None:
        try:
            self.__wrapped__.close()
        finally:
            self._self_state.end(whole_stream_cpu=True)


def _end_unless_parsed(tracked: StreamState, streams: list[Any]) -> None:
    if not streams:
        tracked.end()


class _AsyncRawStream(_RawStream):
    """The async client's raw response (``parse()`` and ``close()`` are coroutines)."""

    async def parse(self, *args: Any, **kwargs: Any) -> Any:
        return self._self_timed(await self.__wrapped__.parse(*args, **kwargs))

    async def close(self) -> None:
        try:
            await self.__wrapped__.close()
        finally:
            self._self_state.end()


def helper_close_sync(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    """``close()`` of an SDK stream helper, which closes the HTTP response behind the stream proxy's back."""
    try:
        return wrapped(*args, **kwargs)
    finally:
        _end_proxied(getattr(instance, "_raw_stream", None))


async def helper_close_async(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    try:
        return await wrapped(*args, **kwargs)
    finally:
        _end_proxied(getattr(instance, "_raw_stream", None))


def _end_proxied(stream: Any) -> None:
    if isinstance(stream, (_Stream, _AsyncStream)):
        stream._self_state.end(whole_stream_cpu=isinstance(stream, _Stream))


_DEFAULT_PROPAGATORS: list[Any] = [None, False]
"""The global propagator last seen, and whether it is OpenTelemetry's default (W3C trace context, then
W3C baggage)."""


def _default_propagators(textmap: Any) -> bool:
    if textmap is not _DEFAULT_PROPAGATORS[0]:
        kinds = [type(p) for p in getattr(textmap, "_propagators", ())]
        _DEFAULT_PROPAGATORS[:] = [
            textmap,
            type(textmap) is CompositePropagator
            and kinds == [TraceContextTextMapPropagator, W3CBaggagePropagator],
        ]
    return _DEFAULT_PROPAGATORS[1]


def trace_headers(span: trace.Span | None = None, parent: Context | None = None) -> dict[str, str]:
    """The current context as propagation headers, through the configured propagators.

    OpenTelemetry's default pair, with no baggage set, is formatted here directly: the same
    ``traceparent`` (and ``tracestate``) at a fifth of the cost of a trip through the propagators.
    ``span`` is the current span and ``parent`` the context it was made current in (whose baggage is
    the current one's), where the caller holds them.
    """
    textmap = propagate.get_global_textmap()
    if not _default_propagators(textmap) or baggage.get_all(parent):
        headers: dict[str, str] = {}
        textmap.inject(headers)
        return headers
    context = (span or trace.get_current_span()).get_span_context()
    # A SpanContext is a tuple: unpacked at once, not through six property calls.
    trace_id, span_id, _, trace_flags, trace_state, is_valid = context
    if not is_valid:
        return {}
    flags = "01" if trace_flags == 1 else f"{trace_flags:02x}"
    trace_hex, span_hex = trace_id.to_bytes(16, "big").hex(), span_id.to_bytes(8, "big").hex()
    headers = {"traceparent": f"00-{trace_hex}-{span_hex}-{flags}"}  # half the cost of formatting the ints
    if trace_state:
        headers["tracestate"] = trace_state.to_header()
    return headers


_LOWER_NAME = operator.itemgetter(1)


def set_header(headers: Any, key: str, value: str) -> None:
    """``headers[key] = value`` on an httpx request's headers.  Where the header is absent, as it
    almost always is, it is appended to httpx's list of (name, lowercase name, value), as httpx itself
    would; httpx's own assignment encodes and compares every header in Python, a microsecond of every
    LLM call.  Headers of another shape go through their own assignment."""
    raw = getattr(headers, "_list", None)
    name = key.encode()
    lower = name.lower()
    if type(raw) is not list or not raw or len(raw[0]) != 3 or lower in map(_LOWER_NAME, raw):
        headers[key] = value
    else:
        raw.append((name, lower, value.encode()))


def attempt_begins(request: Any) -> _Call | None:
    state = _CALL.get()
    if state is None:
        return None
    state.attempt_start = now_ns()
    if request is None:  # the SDK builds the request inside the attempt
        return state
    state.request = request
    try:
        headers = state.trace_headers
        if headers is None:
            rec = state.rec
            headers = state.trace_headers = (
                trace_headers(rec.span, state.context) if rec is not None else trace_headers()
            )
        for key, value in headers.items():
            set_header(request.headers, key, value)
    except Exception as exc:
        report("propagating trace context to the provider", exc)
    return state


def attempt_ends(state: _Call | None, response: Any) -> None:
    if state is None or response is None:
        return
    state.headers = getattr(response, "headers", None)
    if state.rec is not None:
        return
    peer = _peer_span(state.dialect.peer_scopes)
    if peer is not None and state.headers is not None:
        LLMCall(peer, 0).set_attributes(header_timings(state.headers))


def peer_reader(instrumentor: Instrumentor, module: str) -> Callable[[], None]:
    """Patch (once, by ``instrumentor``, so ``uninstrument`` undoes it) the ``_process_response`` of the
    SDK's base clients in ``module``: the first call whose span is a peer's asks for it, before the SDK
    reaches that method, so that call is read too."""
    lock = threading.Lock()
    patched = False

    def patch() -> None:
        nonlocal patched
        if patched:
            return
        with lock:
            if not patched:
                patched = True
                instrumentor.wrap(module, "SyncAPIClient._process_response", process_sync)
                instrumentor.wrap(module, "AsyncAPIClient._process_response", process_async)

    return patch


def process_sync(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    """``_process_response``, which turns a call's HTTP response into what the SDK returns: where a peer's
    span is the call (the peer patched below agentscope), what that body carries is written there."""
    return _onto_peer(wrapped(*args, **kwargs), kwargs.get("stream"))


async def process_async(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    return _onto_peer(await wrapped(*args, **kwargs), kwargs.get("stream"))


def _onto_peer(result: Any, stream: Any) -> Any:
    """Usage and server timings from a response's body (Groq's, Cerebras's, vLLM's fields, which no peer
    reads), or for a stream its first token, chunks and last events, set on the peer's span that is the
    call while it is open.  The stream proxy sits inside the peer's, so it ends before the peer's span.
    A call whose span is agentscope's own (or a response outside any call) is left as it is."""
    state = _CALL.get()
    if state is None or state.rec is not None or state.call is not None:
        return result
    try:
        peer = _peer_span(state.dialect.peer_scopes)
        if peer is None:
            return result
        call = LLMCall(peer, getattr(peer, "start_time", None) or now_ns())
        if stream:
            waited = time.perf_counter_ns() - state.t0
            return stream_proxy(result, StreamState(None, call, state, waited, state.cpu0, state.dialect))
        raw = isinstance(result, state.dialect.raw_responses)
        call.set_attributes(response_attributes(result.parse() if raw else result, state.headers))
    except Exception as exc:
        report(f"reading a {state.dialect.library} response for a peer's span", exc)
    return result


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
    method = getattr(state.request, "method", None) or "POST"
    attributes = clean_attributes(
        {
            A.HTTP_REQUEST_METHOD: method,
            A.SERVER_ADDRESS: getattr(getattr(state.request, "url", None), "host", None),
            A.HTTP_RESPONSE_STATUS_CODE: status,
            A.HTTP_RESEND_COUNT: attempt - 1,
            A.ATTEMPT: attempt,
        }
    )
    failed = start(f"{method} attempt {attempt}", "http", with_kind("http", attributes), state.attempt_start)
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
