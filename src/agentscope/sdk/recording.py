"""One open span and everything agentscope tracks while it is open.

A :class:`Recording` wraps an OpenTelemetry span with the bookkeeping the
analyzer needs: the thread that ran it, the CPU it used, whether its task was
accepted, and the LLM call handle.  Every method is guarded: a failure inside
is reported through :mod:`agentscope.sdk._safety` and never reaches user code.
"""

from __future__ import annotations

import contextvars
import math
import reprlib
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Status, StatusCode

from agentscope import attributes as A
from agentscope.classify import classify
from agentscope.sdk._safety import report
from agentscope.sdk.clock import now_ns
from agentscope.sdk.state import STATE

_thread_time_ns = time.thread_time_ns
_thread_ident = threading.get_ident

_CURRENT_TASK: contextvars.ContextVar[TaskState | None] = contextvars.ContextVar(
    "agentscope_task", default=None
)
_CURRENT_LLM: contextvars.ContextVar[LLMCall | None] = contextvars.ContextVar("agentscope_llm", default=None)

_content_repr = reprlib.Repr()
_content_repr.maxstring = 2048
_content_repr.maxother = 2048

ATTRIBUTE_TYPES = (str, bool, int, float)


def coerce_attribute(value: Any) -> Any:
    """An OTel-valid attribute value: primitives and homogeneous lists pass, the rest is str().

    Never raises: a value whose ``str`` fails is recorded as its type name.
    """
    if isinstance(value, ATTRIBUTE_TYPES):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return list(value)
    if isinstance(value, (list, tuple)) and all(isinstance(v, (int, float)) for v in value):
        return list(value)
    try:
        return str(value)
    except Exception:
        return f"<unprintable {type(value).__qualname__}>"


def clean_attributes(values: Mapping[str, Any]) -> dict[str, Any]:
    """User-supplied attributes made valid, with None values and credential-like keys dropped."""
    return {
        str(key): coerce_attribute(value)
        for key, value in values.items()
        if value is not None and not A.is_sensitive(str(key))
    }


def content(value: Any) -> str:
    """A bounded repr of user content, recorded only when content capture is on."""
    return _content_repr.repr(value)


def _whole_count(value: Any) -> int | None:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _duration_ms(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
        return None
    return value


class TaskState:
    """Whether the task currently running will be reported as accepted."""

    __slots__ = ("accepted",)

    def __init__(self) -> None:
        self.accepted: bool | None = None


class LLMCall:
    """The LLM call in progress: mark its first token, record usage and server timings.

    Returned by :func:`agentscope.current_llm`.  Outside an LLM call every method
    does nothing, so library code can call it unconditionally.
    """

    __slots__ = ("_span", "_start_ns", "first_token_ns")

    def __init__(self, span: trace.Span | None, start_ns: int = 0) -> None:
        self._span = span
        self._start_ns = start_ns
        self.first_token_ns: int | None = None

    @property
    def active(self) -> bool:
        """True inside a real LLM call, False for the do-nothing handle."""
        return self._span is not None

    def first_token(self) -> None:
        """Mark that the first content or tool-call token arrived now (only the first mark counts).

        A span that has ended (a peer's, ended before the stream it wraps) is left as it is."""
        if self._span is None or self.first_token_ns is not None or not self._span.is_recording():
            return
        try:
            self.first_token_ns = now_ns()
            self._span.set_attribute(A.GEN_AI_RESPONSE_TTFC, (self.first_token_ns - self._start_ns) / 1e9)
        except Exception as exc:
            report("LLMCall.first_token", exc)

    def usage(
        self,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        cached_tokens: int | None = None,
    ) -> None:
        """Record token usage as reported by the provider; a count that is not a whole number ≥ 0 is left
        out and said once through the ``agentscope`` logger."""
        given = {
            "input_tokens": (A.GEN_AI_USAGE_INPUT_TOKENS, input_tokens),
            "output_tokens": (A.GEN_AI_USAGE_OUTPUT_TOKENS, output_tokens),
            "cached_tokens": (A.GEN_AI_USAGE_CACHED_INPUT_TOKENS, cached_tokens),
        }
        self._set_valid("LLMCall.usage", given, _whole_count, "a whole number ≥ 0")

    def server_timing(
        self,
        queue_ms: float | None = None,
        prefill_ms: float | None = None,
        decode_ms: float | None = None,
        total_ms: float | None = None,
    ) -> None:
        """Record the provider's own timings of this call, in milliseconds; give what it returned. A timing
        that is not a finite number ≥ 0 is left out (a negative prefill would blame the call on the
        network) and said once through the ``agentscope`` logger."""
        given = {
            "queue_ms": (A.SERVER_QUEUE_MS, queue_ms),
            "prefill_ms": (A.SERVER_PREFILL_MS, prefill_ms),
            "decode_ms": (A.SERVER_DECODE_MS, decode_ms),
            "total_ms": (A.SERVER_TOTAL_MS, total_ms),
        }
        self._set_valid("LLMCall.server_timing", given, _duration_ms, "a finite number ≥ 0")

    def set_attributes(self, values: Mapping[str, Any]) -> None:
        """Record further attributes on the call's span (e.g. ``gen_ai.response.model``)."""
        self._set(values)

    def _set_valid(
        self, where: str, given: Mapping[str, tuple[str, Any]], check: Callable[[Any], Any], wanted: str
    ) -> None:
        """Set the given values (by parameter: attribute key and value) that pass ``check``; the others are
        reported by parameter name."""
        if self._span is None:
            return
        kept = {}
        for parameter, (key, value) in given.items():
            if value is None:
                continue
            checked = check(value)
            if checked is None:
                problem = f"{parameter} must be {wanted}, not {coerce_attribute(value)!r}; left out"
                report(where, ValueError(problem), internal=False)
            else:
                kept[key] = checked
        self._set(kept)

    def _set(self, values: Mapping[str, Any]) -> None:
        if self._span is None or not self._span.is_recording():
            return
        try:
            self._span.set_attributes(clean_attributes(values))
        except Exception as exc:
            report("LLMCall attributes", exc)


NO_CALL = LLMCall(None)


class Recording:
    """An open agentscope span; created by :func:`start`, closed by :meth:`finish`."""

    __slots__ = ("_llm_token", "_task_token", "_token", "kind", "llm", "span", "task")

    def __init__(self, span: trace.Span, kind: str, start_ns: int) -> None:
        self.span = span
        self.kind = kind
        self.task: TaskState | None = TaskState() if kind == "task" else None
        self.llm: LLMCall | None = LLMCall(span, start_ns) if kind == "llm" else None

    def enter(self, context: Context | None = None) -> None:
        """Make this span current in the running context (until :meth:`exit`); ``context`` is that
        context where the caller has read it already."""
        try:
            self._token = otel_context.attach(trace.set_span_in_context(self.span, context))
            if self.task is not None:
                self._task_token = _CURRENT_TASK.set(self.task)
            if self.llm is not None:
                self._llm_token = _CURRENT_LLM.set(self.llm)
        except Exception as exc:
            report("entering a span", exc)

    def exit(self) -> None:
        """Undo :meth:`enter`; the two always come in pairs, never nested for one span."""
        try:
            if self.llm is not None:
                _CURRENT_LLM.reset(self._llm_token)
            if self.task is not None:
                _CURRENT_TASK.reset(self._task_token)
            otel_context.detach(self._token)
        except Exception as exc:
            report("leaving a span", exc)

    def finish(
        self,
        error: BaseException | None,
        cpu_ns: int,
        extra: Mapping[str, Any] | None = None,
        status_message: str | None = None,
    ) -> None:
        """Record the outcome and CPU time and end the span.

        The end time is taken first: recording an exception formats its traceback,
        which is the SDK's time, not the span's.
        """
        end_ns = now_ns()
        try:
            span = self.span
            if extra:
                span.set_attributes({A.CPU_NS: cpu_ns, **extra})
            else:
                span.set_attribute(A.CPU_NS, cpu_ns)
            if error is not None:
                span.record_exception(error)
                span.set_attribute(A.ERROR_TYPE, type(error).__qualname__)
                span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
            elif status_message is not None:
                span.set_status(Status(StatusCode.ERROR, status_message))
            if self.task is not None:
                accepted = self.task.accepted
                span.set_attribute(A.TASK_ACCEPTED, error is None if accepted is None else accepted)
            span.end(end_time=end_ns)
        except Exception as exc:
            report("ending a span", exc)


class _NullRecording(Recording):
    """Stands in for a span when tracing is off, so generator wrappers need one code path."""

    def __init__(self) -> None:
        self.kind = ""
        self.task = None
        self.llm = None

    def enter(self) -> None:
        pass

    def exit(self) -> None:
        pass

    def finish(
        self,
        error: BaseException | None,
        cpu_ns: int,
        extra: Mapping[str, Any] | None = None,
        status_message: str | None = None,
    ) -> None:
        pass


NULL_RECORDING = _NullRecording()


def with_kind(kind: str, attributes: Mapping[str, Any]) -> dict[str, Any]:
    """``attributes`` plus ``agentscope.kind`` where the conventions alone would not say ``kind``.

    A tool span already says ``gen_ai.operation.name=execute_tool``; repeating the
    kind would cost every call another attribute for nothing.
    """
    out = dict(attributes)
    if classify(out) != kind:
        out[A.KIND] = kind
    return out


_SUPPRESS = otel_context._SUPPRESS_INSTRUMENTATION_KEY
_SUPPRESS_PLAIN = "suppress_instrumentation"
_SUPPRESS_HTTP = otel_context._SUPPRESS_HTTP_INSTRUMENTATION_KEY
"""OpenTelemetry's "record nothing here": the SDK's span processors set the first around every export;
``opentelemetry.instrumentation.utils.suppress_instrumentation()`` sets it and its older, plain-string
key; HTTP clients' spans also stop under the third, which instrumentations of higher-level clients set."""


def _suppressed(kind: str, current: Context) -> bool:
    """Whether instrumentation is switched off in ``current``, a context holding one of the keys."""
    if current.get(_SUPPRESS) or current.get(_SUPPRESS_PLAIN):
        return True
    return kind == "http" and bool(current.get(_SUPPRESS_HTTP))


def start(
    name: str,
    kind: str,
    attributes: Mapping[str, Any],
    start_ns: int | None = None,
    context: Context | None = None,
) -> Recording | None:
    """Start a span of agentscope ``kind``; None when tracing is off, instrumentation is suppressed
    in this context, or starting failed.

    ``attributes`` must already identify the kind (see :func:`with_kind`); ``start_ns``
    backdates the span (an integration that learns of an attempt after it began).  ``context`` is the
    current context where the caller has read it already: each lookup of it is a few calls deep, and
    an integration on every LLM call reads it once for its peer check, its span and its headers.

    Suppressed (:func:`_suppressed`): inside an exporter's export an HTTP span would be exported in turn,
    whose export makes another, without end.  Tested in line first, whether a key is there at all: this
    runs on every span, and an LLM call's overhead is counted against a bare span's.
    """
    try:
        current = context if context is not None else otel_context.get_current()
        keyed = _SUPPRESS in current or _SUPPRESS_PLAIN in current or _SUPPRESS_HTTP in current
        if keyed and _suppressed(kind, current):
            return None
        attrs = {**attributes, **STATE.span_attributes, A.THREAD_ID: _thread_ident()}
        joined = STATE.open_spans.parent_context() if STATE.open_spans is not None else None
        start_time = start_ns or now_ns()
        parent = current if joined is None else joined  # read once: the tracer need not look it up again
        span = STATE.tracer.start_span(name, context=parent, attributes=attrs, start_time=start_time)
        if not span.is_recording():
            return None
        return Recording(span, kind, start_time)
    except Exception as exc:
        report("starting a span", exc)
        return None


def current_llm() -> LLMCall:
    """The LLM call in progress in this context, or a handle that does nothing."""
    return _CURRENT_LLM.get() or NO_CALL


def accept(accepted: bool = True) -> None:
    """Mark the current task accepted or rejected (default: accepted unless it raised)."""
    task = _CURRENT_TASK.get()
    if task is not None:
        task.accepted = bool(accepted)
