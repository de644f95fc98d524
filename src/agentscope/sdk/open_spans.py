"""Other instrumentations' open spans, so that agentscope's spans can join them (DESIGN §14).

OpenInference's LangChain tracer and Langfuse's openai drop-in start their spans
without making them current: a LangChain tool run is open while the tool's code
runs, but ``trace.get_current_span()`` inside the tool is still the span around
the whole agent (or nothing).  A span agentscope starts there would be a sibling
of the run it ran in, or the root of a trace of its own.

:class:`OpenSpans` is a span processor on the application's provider: it sees
every span start and end, and keeps the open ones other tracers started, with the
thread that started them.  When agentscope starts a span, :meth:`OpenSpans.innermost`
names the span to put it under instead of the current one: the latest-started
open foreign span that this thread started below the current span (following
the foreign spans' own parent links up to it).  Without a current span, the
foreign span must lead up to a root.

Limit: threads tell concurrent runs apart; coroutines on one event loop do not.
Two foreign runs open at once under the same span on one thread (parallel
asyncio tools) give agentscope's spans to the later-started one.
"""

from __future__ import annotations

import threading
from typing import Any, NamedTuple

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

MAX_OPEN = 10_000
"""Open foreign spans kept at most: a span that never ends is forgotten once this many are open."""


class _Open(NamedTuple):
    parent_id: int | None
    thread: int
    span: Span


class OpenSpans(SpanProcessor):
    """The open spans of tracers other than ``own_tracer``, by span id and by starting thread."""

    def __init__(self, own_tracer: str) -> None:
        self.own_tracer = own_tracer
        self._open: dict[int, _Open] = {}
        self._by_thread: dict[int, dict[int, Span]] = {}

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        scope = span.instrumentation_scope
        if scope is not None and scope.name == self.own_tracer:
            return
        if len(self._open) >= MAX_OPEN:
            self._forget(next(iter(self._open)))
        span_id = span.get_span_context().span_id
        parent = span.parent
        thread = threading.get_ident()
        self._open[span_id] = _Open(parent.span_id if parent is not None else None, thread, span)
        self._by_thread.setdefault(thread, {})[span_id] = span

    def on_end(self, span: ReadableSpan) -> None:
        context = span.get_span_context()
        if context is not None and context.span_id in self._open:
            self._forget(context.span_id)

    def _forget(self, span_id: int) -> None:
        entry = self._open.pop(span_id, None)
        if entry is None:
            return
        on_thread = self._by_thread.get(entry.thread)
        if on_thread is not None:
            on_thread.pop(span_id, None)
            if not on_thread:
                self._by_thread.pop(entry.thread, None)

    def innermost(self, current: Any) -> Span | None:
        """The open foreign span a span starting now on this thread belongs under, if not ``current``."""
        if not self._open:
            return None
        on_thread = self._by_thread.get(threading.get_ident())
        if not on_thread:
            return None
        anchor_context = current.get_span_context()
        anchor = anchor_context.span_id if anchor_context.is_valid else None
        best: Span | None = None
        for span_id, span in tuple(on_thread.items()):
            if span_id == anchor or not self._below(span_id, anchor):
                continue
            if best is None or (span.start_time or 0) > (best.start_time or 0):
                best = span
        return best

    def _below(self, span_id: int, anchor: int | None) -> bool:
        """Whether the foreign span's parent links lead to ``anchor`` (None: to a root)."""
        seen = 0
        entry = self._open.get(span_id)
        while entry is not None and seen < MAX_OPEN:
            parent = entry.parent_id
            if parent == anchor:
                return True
            if parent is None:
                return False
            entry = self._open.get(parent)
            seen += 1
        return False

    def parent_context(self) -> Context | None:
        """A context holding :meth:`innermost` of the current span, or None to start under the current."""
        if not self._open:  # the common case, decided before the current span is looked up
            return None
        found = self.innermost(trace.get_current_span())
        return trace.set_span_in_context(found) if found is not None else None

    def shutdown(self) -> None:
        self._open.clear()
        self._by_thread.clear()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
