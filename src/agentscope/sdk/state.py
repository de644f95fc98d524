"""Process-wide SDK state: the tracer the decorators use and where spans go.

agentscope adds one span processor of its own, a :class:`Router`, to the tracer
provider.  ``init`` and ``shutdown`` swap the processors behind the router, so a
second ``init`` reconfigures agentscope without touching the application's own
processors, and without the provider having to support removing a processor.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider

from agentscope.sdk._safety import report
from agentscope.sdk.open_spans import OpenSpans

TRACER_NAME = "agentscope"


class Router(SpanProcessor):
    """Forwards span events to agentscope's current processors."""

    def __init__(self) -> None:
        self.targets: tuple[SpanProcessor, ...] = ()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        for target in self.targets:
            try:
                target.on_start(span, parent_context=parent_context)
            except Exception as exc:
                report(f"span processor {type(target).__name__}.on_start", exc, internal=False)

    def on_end(self, span: ReadableSpan) -> None:
        for target in self.targets:
            try:
                target.on_end(span)
            except Exception as exc:
                report(f"span processor {type(target).__name__}.on_end", exc, internal=False)

    def replace(self, targets: Sequence[SpanProcessor]) -> tuple[SpanProcessor, ...]:
        """Install ``targets`` and return the processors they replace."""
        old, self.targets = self.targets, tuple(targets)
        return old

    def shutdown(self) -> None:
        for target in self.replace(()):
            target.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return all(target.force_flush(timeout_millis) for target in self.targets)


_FORWARDING = threading.local()
"""Set while :class:`Forward` hands a span of agentscope's provider to another provider's processors."""


class Beside(SpanProcessor):
    """agentscope's processors on a provider another package made global after ``ags.init`` (OpenTelemetry
    refused it: its global is set once).  That package shuts its provider down when it is done with it,
    which must not close agentscope's exporters, so this processor's shutdown only flushes them.  A span
    :class:`Forward` hands over is agentscope's already, and is skipped."""

    def __init__(self, router: Router, open_spans: OpenSpans | None) -> None:
        self.processors = (router,) if open_spans is None else (router, open_spans)

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if getattr(_FORWARDING, "active", False):
            return
        for processor in self.processors:
            processor.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        if getattr(_FORWARDING, "active", False):
            return
        for processor in self.processors:
            processor.on_end(span)

    def shutdown(self) -> None:
        self.force_flush()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.processors[0].force_flush(timeout_millis)


class Forward(SpanProcessor):
    """On the global provider agentscope set, hands every span to the processors of a provider another
    package was refused as the global one, so that its exporters see the whole trace, as they would had
    it been set up first.  That package shuts its provider down itself."""

    def __init__(self, processor: SpanProcessor) -> None:
        self.processor = processor

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        _FORWARDING.active = True
        try:
            self.processor.on_start(span, parent_context=parent_context)
        except Exception as exc:
            report("handing a span to another package's provider", exc, internal=False)
        finally:
            _FORWARDING.active = False

    def on_end(self, span: ReadableSpan) -> None:
        _FORWARDING.active = True
        try:
            self.processor.on_end(span)
        except Exception as exc:
            report("handing a span to another package's provider", exc, internal=False)
        finally:
            _FORWARDING.active = False

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


@dataclass
class SDKState:
    tracer: trace.Tracer = field(default_factory=lambda: trace.get_tracer(TRACER_NAME))
    capture_content: bool = False
    router: Router | None = None
    private_provider: TracerProvider | None = None
    """agentscope's own provider, when the application's could not be joined."""
    global_provider: TracerProvider | None = None
    """The provider agentscope made global, when nobody had set one."""
    flushes_multiprocessing_children: bool = False
    """A multiprocessing child flushes at its end (hooked before the first fork)."""
    open_spans: OpenSpans | None = None
    """Other instrumentations' open spans on the joined provider, which agentscope's spans join."""
    span_attributes: dict[str, str] = field(default_factory=dict)
    """Attributes every agentscope span carries (``agentscope.service.name`` beside another service)."""
    joined_later: list[object] = field(default_factory=list)
    """Providers other packages made global after ``ags.init``, which agentscope joined (:class:`Beside`);
    a list, as some are not hashable (Logfire's)."""


STATE = SDKState()
