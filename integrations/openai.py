"""openai-python: one llm span per logical call, with every retry visible.

Patched (and restored by ``uninstrument``):

- ``chat.completions.create`` and ``responses.create``, sync and async (also
  reached through ``with_raw_response``): the llm span, with model, provider,
  token usage, server timings from any provider dialect, and, for streams, the
  time to the first content or tool-call delta, the chunk count and the time
  spent inside the stream (the stream is wrapped; its span ends exactly once,
  on exhaustion, ``break``/``close()``, an exception or garbage collection);
- ``_send_request`` of the SDK's base client (openai ≥ 3 sends through httpx2,
  earlier versions through httpx; both reach this method): each HTTP attempt.
  It injects ``traceparent`` so a vLLM/SGLang server's own spans join the trace,
  and keeps the response headers (``openai-processing-ms``, TGI's timings);
- ``_sleep_for_retry``: a failed attempt becomes an ``http`` span with status
  ERROR and its attempt number, and the SDK's sleep a ``backoff`` span — the
  retries every other instrumentation hides inside one LLM span.

When OpenInference or OpenLLMetry also instrument openai in the same process,
agentscope does not add a second llm span for a call: if the peer's span is
already open (it wrapped outside agentscope), agentscope records its usage and
timings on that span; if the peer wraps inside (its patch is below
agentscope's, or on the client's ``request``), agentscope skips its own span and
the peer's span is the call — agentscope's attempt and backoff spans then nest
under it, and header timings are set on it.
"""

from __future__ import annotations

import contextvars
import time
import weakref
from collections.abc import Callable
from typing import Any

import wrapt
from agentscope.integrations._llm import get, provider_for, server_timings, usage_counts
from opentelemetry import trace

from agentscope import attributes as A
from agentscope.sdk._safety import report
from agentscope.sdk.clock import now_ns
from agentscope.sdk.instrumentation import Instrumentor
from agentscope.sdk.recording import LLMCall, Recording, clean_attributes, start, with_kind

_CALL: contextvars.ContextVar[_Call | None] = contextvars.ContextVar("agentscope_openai_call", default=None)
_PROVIDER_OVERRIDES: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
_PROXY = getattr(wrapt, "BaseObjectProxy", wrapt.ObjectProxy)
"""What every wrapt wrapper is an instance of (wrapt 2 split it from ObjectProxy)."""
PEER_SCOPES = ("openinference", "opentelemetry.instrumentation.openai")


def set_provider(client: Any, provider: str) -> None:
    """Report ``provider`` for calls made with this client, whatever its base URL."""
    _PROVIDER_OVERRIDES[client] = provider


class _Call:
    """Bookkeeping of one logical call across its HTTP attempts."""

    __slots__ = ("attempt_start", "headers", "host", "method", "own_span", "status")

    def __init__(self, own_span: bool) -> None:
        self.own_span = own_span
        self.attempt_start = 0
        self.headers: Any = None
        self.method = "POST"
        self.status: int | None = None
        self.host: str | None = None


def _peer_span() -> trace.Span | None:
    """The current span if a peer instrumentation made it for this very call."""
    span = trace.get_current_span()
    scope = getattr(span, "instrumentation_scope", None)
    name = getattr(scope, "name", "") or ""
    if span.is_recording() and name.startswith(PEER_SCOPES):
        return span
    return None


def _peer_inside(wrapped: Any, instance: Any) -> bool:
    """Whether another instrumentation will make its own span for this call, below ours."""
    if isinstance(wrapped, _PROXY):
        return True
    client_type = type(getattr(instance, "_client", None))
    return any(isinstance(klass.__dict__.get("request"), _PROXY) for klass in client_type.__mro__)


def _open(
    wrapped: Any, instance: Any, kwargs: dict[str, Any], operation: str
) -> tuple[Recording | None, LLMCall | None]:
    if _peer_inside(wrapped, instance):
        return None, None
    client = getattr(instance, "_client", None)
    model = kwargs.get("model")
    provider = _PROVIDER_OVERRIDES.get(client) or provider_for(getattr(client, "base_url", ""))
    attributes = clean_attributes(
        {A.GEN_AI_OPERATION_NAME: operation, A.GEN_AI_REQUEST_MODEL: model, A.GEN_AI_PROVIDER_NAME: provider}
    )
    peer = _peer_span()
    if peer is not None:
        peer.set_attributes(attributes)
        return None, LLMCall(peer, getattr(peer, "start_time", now_ns()))
    rec = start(f"{operation} {model}" if model else operation, "llm", with_kind("llm", attributes))
    return rec, rec.llm if rec is not None else None


def _raw_response_types() -> tuple[type, ...]:
    try:
        from openai._legacy_response import LegacyAPIResponse
        from openai._response import APIResponse, AsyncAPIResponse
    except ImportError:
        return ()
    return (APIResponse, AsyncAPIResponse, LegacyAPIResponse)


_RAW_RESPONSES = _raw_response_types()
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


def _record_result(call: LLMCall, result: Any, state: _Call) -> None:
    """Usage, server timings and the response model, set on the span in one go."""
    body = result.parse() if isinstance(result, _RAW_RESPONSES) else result
    values: dict[str, Any] = {_USAGE_KEYS[k]: v for k, v in usage_counts(body).items()}
    values.update({_TIMING_KEYS[k]: v for k, v in server_timings(body, state.headers).items()})
    model = get(body, "model")
    if isinstance(model, str):
        values[A.GEN_AI_RESPONSE_MODEL] = model
    call.set_attributes(values)


def _call_sync(operation: str) -> Callable[..., Any]:
    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        try:
            rec, call = _open(wrapped, instance, kwargs, operation)
        except Exception as exc:
            report("opening an openai span", exc)
            return wrapped(*args, **kwargs)
        state = _Call(own_span=rec is not None)
        token = _CALL.set(state)
        if rec is not None:
            rec.enter()
        t0, cpu0 = time.perf_counter_ns(), time.thread_time_ns()
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            if rec is not None:
                rec.finish(exc, time.thread_time_ns() - cpu0)
                rec.exit()
            _CALL.reset(token)
            raise
        _CALL.reset(token)
        if rec is not None:
            rec.exit()
        return _after(result, rec, call, state, kwargs, t0, cpu0)

    return wrapper


def _call_async(operation: str) -> Callable[..., Any]:
    async def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        try:
            rec, call = _open(wrapped, instance, kwargs, operation)
        except Exception as exc:
            report("opening an openai span", exc)
            return await wrapped(*args, **kwargs)
        state = _Call(own_span=rec is not None)
        token = _CALL.set(state)
        if rec is not None:
            rec.enter()
        t0, cpu0 = time.perf_counter_ns(), time.thread_time_ns()
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as exc:
            if rec is not None:
                rec.finish(exc, time.thread_time_ns() - cpu0)
                rec.exit()
            _CALL.reset(token)
            raise
        _CALL.reset(token)
        if rec is not None:
            rec.exit()
        return _after(result, rec, call, state, kwargs, t0, cpu0)

    return wrapper


def _after(
    result: Any, rec: Recording | None, call: LLMCall | None, state: _Call, kwargs: dict, t0: int, cpu0: int
) -> Any:
    """Finish a non-streamed call, or hand a stream to a proxy that finishes it later."""
    if call is None:
        return result
    try:
        if kwargs.get("stream") and rec is not None:
            proxy_type = _AsyncStream if hasattr(result, "__aiter__") else _Stream
            return proxy_type(result, rec, state, time.perf_counter_ns() - t0, time.thread_time_ns() - cpu0)
        _record_result(call, result, state)
    except Exception as exc:
        report("recording an openai response", exc)
    if rec is not None:
        rec.finish(None, time.thread_time_ns() - cpu0)
    return result


class _StreamState:
    """What a stream proxy tracks until its span ends (shared with its GC finalizer)."""

    def __init__(self, rec: Recording, state: _Call, wait_ns: int, cpu_ns: int) -> None:
        self.rec, self.state = rec, state
        self.wait_ns, self.cpu_ns = wait_ns, cpu_ns
        self.chunks = 0
        self.first_seen = False
        self.usage_body: Any = None
        self.done = False

    def seen(self, chunk: Any) -> None:
        """Per chunk: only cheap reads of fields the chunk has; first token and usage are kept."""
        self.chunks += 1
        choices = getattr(chunk, "choices", None)
        if choices is None:  # a Responses API event
            event = getattr(chunk, "type", "") or ""
            if not self.first_seen and event.endswith(".delta"):
                self._first_token()
            if event == "response.completed":
                self.usage_body = getattr(chunk, "response", None)
            return
        if not self.first_seen:
            for choice in choices:
                delta = choice.delta
                if delta is not None and (delta.content or delta.tool_calls or delta.function_call):
                    self._first_token()
                    break
        if chunk.usage is not None or (
            choices and choices[0].finish_reason and get(chunk, "x_groq", "usage")
        ):
            self.usage_body = chunk

    def _first_token(self) -> None:
        """The first content or tool-call delta (a role-only chunk does not count)."""
        self.first_seen = True
        if self.rec.llm is not None:
            self.rec.llm.first_token()

    def end(self, error: BaseException | None = None) -> None:
        if self.done:
            return
        self.done = True
        try:
            if self.usage_body is not None and self.rec.llm is not None:
                _record_result(self.rec.llm, self.usage_body, self.state)
            extra = {A.STREAMED: True, A.STREAM_CHUNKS: self.chunks, A.STREAM_WAIT_NS: self.wait_ns}
        except Exception as exc:
            report("recording an openai stream", exc)
            extra = None
        self.rec.finish(error, self.cpu_ns, extra)


class _Stream(wrapt.ObjectProxy):
    """openai ``Stream`` that times its own iteration and ends the call's span once."""

    def __init__(self, stream: Any, rec: Recording, state: _Call, wait_ns: int, cpu_ns: int) -> None:
        super().__init__(stream)
        self._self_state = _StreamState(rec, state, wait_ns, cpu_ns)
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
    """openai ``AsyncStream`` counterpart of :class:`_Stream`."""

    def __init__(self, stream: Any, rec: Recording, state: _Call, wait_ns: int, cpu_ns: int) -> None:
        super().__init__(stream)
        self._self_state = _StreamState(rec, state, wait_ns, cpu_ns)
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


def _attempt_begins(request: Any) -> _Call | None:
    state = _CALL.get()
    if state is None:
        return None
    state.attempt_start = now_ns()
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


def _attempt_ends(state: _Call | None, response: Any) -> None:
    if state is None or response is None:
        return
    state.headers = getattr(response, "headers", None)
    state.status = getattr(response, "status_code", None)
    if state.own_span:
        return
    peer = _peer_span()
    if peer is not None and state.headers is not None:
        timings = server_timings(None, state.headers)
        LLMCall(peer, 0).server_timing(**timings)


def _send_sync(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    state = _attempt_begins(args[0] if args else kwargs.get("request"))
    response = wrapped(*args, **kwargs)
    _attempt_ends(state, response)
    return response


async def _send_async(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    state = _attempt_begins(args[0] if args else kwargs.get("request"))
    response = await wrapped(*args, **kwargs)
    _attempt_ends(state, response)
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


def _sleep_sync(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    backoff, _ = _failed_attempt(kwargs)
    if backoff is None:
        return wrapped(*args, **kwargs)
    backoff.enter()
    try:
        return wrapped(*args, **kwargs)
    finally:
        backoff.finish(None, 0)
        backoff.exit()


async def _sleep_async(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    backoff, _ = _failed_attempt(kwargs)
    if backoff is None:
        return await wrapped(*args, **kwargs)
    backoff.enter()
    try:
        return await wrapped(*args, **kwargs)
    finally:
        backoff.finish(None, 0)
        backoff.exit()


class OpenAIInstrumentor(Instrumentor):
    """Instrument openai-python (chat completions, responses; sync and async; retries)."""

    library = "openai"

    def _instrument(self) -> None:
        chat = "openai.resources.chat.completions"
        self.wrap(chat, "Completions.create", _call_sync(A.OPERATION_CHAT))
        self.wrap(chat, "AsyncCompletions.create", _call_async(A.OPERATION_CHAT))
        self.wrap("openai.resources.responses", "Responses.create", _call_sync(A.OPERATION_CHAT))
        self.wrap("openai.resources.responses", "AsyncResponses.create", _call_async(A.OPERATION_CHAT))
        self.wrap("openai._base_client", "SyncAPIClient._send_request", _send_sync)
        self.wrap("openai._base_client", "AsyncAPIClient._send_request", _send_async)
        self.wrap("openai._base_client", "SyncAPIClient._sleep_for_retry", _sleep_sync)
        self.wrap("openai._base_client", "AsyncAPIClient._sleep_for_retry", _sleep_async)
