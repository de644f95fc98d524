"""``ags.init`` and ``ags.shutdown``: decide where spans go.

``init`` works with or without an application-configured tracer provider: if
the application already installed one that takes span processors (an
OpenTelemetry SDK ``TracerProvider``, Logfire's proxy of one), agentscope adds
its processors to it; otherwise it installs one (see :func:`_provider`).  Calling
``init`` again replaces agentscope's exporters (flushing the old ones) and
leaves the application's own processors alone.
"""

from __future__ import annotations

import atexit
import functools
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from agentscope import __version__
from agentscope import attributes as A
from agentscope.sdk._safety import report
from agentscope.sdk.collector import CollectorExporter
from agentscope.sdk.instrumentation import instrument as instrument_libraries
from agentscope.sdk.open_spans import OpenSpans
from agentscope.sdk.otlp_json import JsonLinesSpanExporter
from agentscope.sdk.state import STATE, TRACER_NAME, Beside, Forward, Router
from agentscope.store.paths import DEFAULT_STORE, default_store_path


class ReportingBatchSpanProcessor(BatchSpanProcessor):
    """A BatchSpanProcessor that says so through the ``agentscope`` logger when it drops spans.

    The SDK's processor drops spans silently (to its own logger) once its queue is
    full; the queue's fill level is read from the SDK's internals when available.
    """

    def on_end(self, span: ReadableSpan) -> None:
        batch = getattr(self, "_batch_processor", None)
        queue = getattr(batch, "_queue", None)
        limit = getattr(batch, "_max_queue_size", None)
        if queue is not None and limit is not None and len(queue) >= limit:
            report(
                "queueing spans for export",
                BufferError("the export queue is full; spans are dropped"),
                internal=False,
            )
        super().on_end(span)


def _provider(service_name: str | None) -> tuple[Any, dict[str, str]]:
    """The tracer provider agentscope's spans go through, and the attributes they carry because of it.

    The application's provider is joined when it can take a span processor: an SDK
    ``TracerProvider``, Logfire's ``ProxyTracerProvider`` or any provider with
    ``add_span_processor``; one trace then holds both packages' spans, and both
    packages' exporters receive all of them.  With no provider set, agentscope sets
    one.  A provider that cannot be joined (a no-op one, say) is said once through
    the ``agentscope`` logger, and agentscope keeps a private provider for its own
    spans.  When the joined provider's resource names another service, agentscope's
    spans carry ``agentscope.service.name`` (which ``--service`` matches too).
    """
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider) or callable(getattr(current, "add_span_processor", None)):
        return current, _own_service(current, service_name)
    if STATE.private_provider is not None:  # said already, at the first init
        return STATE.private_provider, {}
    resource = Resource.create({A.SERVICE_NAME: service_name or "agentscope"})
    if isinstance(current, trace.ProxyTracerProvider):  # nobody set one yet
        provider = TracerProvider(resource=resource)
        trace.set_tracer_provider(provider)
        STATE.global_provider = provider
        return provider, {}
    report(
        "joining the application's tracer provider",
        TypeError(
            f"the global tracer provider is a {type(current).__module__}.{type(current).__qualname__}, "
            "which takes no span processor: agentscope records its own spans on a provider of its own, "
            "and the other instrumentations' spans do not reach its store; set an OpenTelemetry SDK "
            "TracerProvider (or call ags.init() first) to have both in one trace"
        ),
        internal=False,
    )
    STATE.private_provider = TracerProvider(resource=resource)
    return STATE.private_provider, {}


def _own_service(provider: Any, service_name: str | None) -> dict[str, str]:
    """``agentscope.service.name`` for our spans when the joined provider names another service."""
    if not service_name:
        return {}
    resource = getattr(provider, "resource", None)
    theirs = getattr(resource, "attributes", {}).get(A.SERVICE_NAME) if resource is not None else None
    return {} if theirs == service_name else {A.SERVICE_NAME_OURS: service_name}


def _otlp_exporter(endpoint: str) -> SpanExporter:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    if not endpoint.rstrip("/").endswith("/v1/traces"):
        endpoint = endpoint.rstrip("/") + "/v1/traces"
    return CollectorExporter(OTLPSpanExporter(endpoint=endpoint), endpoint)


def init(
    service_name: str | None = None,
    store: str | os.PathLike[str] | None = DEFAULT_STORE,
    otlp_endpoint: str | None = None,
    jsonl_path: str | os.PathLike[str] | None = None,
    capture_content: bool = False,
    instrument: bool = True,
    *,
    span_processors: Sequence[SpanProcessor] = (),
) -> None:
    """Start sending agentscope spans to a DuckDB store, an OTLP endpoint and/or a JSONL file.

    ``store=None`` keeps no local store; the default store path can be changed
    with ``$AGENTSCOPE_STORE``.  ``capture_content`` records function arguments,
    results and query text, and keeps in the store the prompts and completions
    other instrumentations in the process record (off by default: the store drops
    them; credentials are never recorded).
    ``instrument`` switches on every installed integration.  ``span_processors``
    adds processors of your own behind agentscope's router.
    """
    try:
        provider, STATE.span_attributes = _provider(service_name)
        if STATE.router is None:
            STATE.router = Router()
            provider.add_span_processor(STATE.router)
            STATE.open_spans = OpenSpans(TRACER_NAME)
            provider.add_span_processor(STATE.open_spans)
            atexit.register(_shutdown_at_exit)
            _join_providers_set_later()
            if hasattr(os, "register_at_fork"):
                os.register_at_fork(before=_before_fork)
            if _in_multiprocessing_child():  # a spawned one, which sets up as the app does
                _flush_when_terminated()
        processors: list[SpanProcessor] = []
        if store is not None:
            # Here, not at the top: the store's writer reports through this package (a cycle).
            from agentscope.store.writer import StoreSpanProcessor

            path = Path(default_store_path() if str(store) == DEFAULT_STORE else store).expanduser()
            processors.append(StoreSpanProcessor(path, keep_content=bool(capture_content)))
        if otlp_endpoint:
            processors.append(ReportingBatchSpanProcessor(_otlp_exporter(otlp_endpoint)))
        if jsonl_path is not None:
            processors.append(
                ReportingBatchSpanProcessor(JsonLinesSpanExporter(Path(jsonl_path).expanduser()))
            )
        processors.extend(span_processors)
        for old in STATE.router.replace(processors):
            old.shutdown()
        STATE.tracer = provider.get_tracer(TRACER_NAME, __version__)
        STATE.capture_content = bool(capture_content)
    except Exception as exc:
        report("agentscope.init", exc)
        return
    if instrument:
        instrument_libraries()


def _join_providers_set_later() -> None:
    """Join the tracer provider a package makes global after ``ags.init``, as ``init`` joins one made before.

    OpenTelemetry's global provider is set once: a package set up later (Phoenix's ``register()``,
    Logfire's ``configure()``) keeps a provider of its own, and its instrumentations record there.  Where
    agentscope leaves a call to such a peer's span (it is current, or its patch sits below agentscope's),
    the call would reach no store.  ``trace.set_tracer_provider`` is replaced by one that adds agentscope's
    processors to the provider it was refused.  Where the global provider is the one agentscope set, its
    spans are handed to the refused provider's processors too (:class:`Forward`), so the package's own
    exporters see the whole trace (Strands Agents records on the global provider: without this its
    exporters saw nothing).  A plain wrapper, not wrapt's: importing wrapt costs ``ags.init`` 30 ms.
    """
    refusing = trace.set_tracer_provider

    @functools.wraps(refusing)
    def set_tracer_provider(tracer_provider: trace.TracerProvider) -> None:
        refusing(tracer_provider)
        try:
            _join_if_refused(tracer_provider)
        except Exception as exc:
            report("joining a tracer provider set after agentscope's", exc)

    trace.set_tracer_provider = set_tracer_provider


def _join_if_refused(provider: Any) -> None:
    refused = provider is not trace.get_tracer_provider()
    joinable = callable(getattr(provider, "add_span_processor", None))
    joined = any(provider is other for other in STATE.joined_later)
    if refused and joinable and STATE.router is not None and not joined:
        STATE.joined_later.append(provider)
        provider.add_span_processor(Beside(STATE.router, STATE.open_spans))
        theirs = getattr(provider, "_active_span_processor", None)  # an SDK provider's processors, as added
        if STATE.global_provider is not None and isinstance(theirs, SpanProcessor):
            STATE.global_provider.add_span_processor(Forward(theirs))


def _before_fork() -> None:
    """Have a multiprocessing child flush when it ends: it leaves by ``os._exit``, past ``atexit``, and
    runs only multiprocessing's finalizers, registered through its after-fork hooks (a child clears the
    finalizers it inherits). Other forks (gunicorn, Celery) end through ``sys.exit`` and ``atexit``."""
    try:
        hooks = sys.modules.get("multiprocessing.util")
        if hooks is not None and STATE.router is not None and not STATE.flushes_multiprocessing_children:
            STATE.flushes_multiprocessing_children = True
            hooks.register_after_fork(STATE.router, _flush_when_child_ends)
    except Exception as exc:
        report("preparing a fork", exc)


def _flush_when_child_ends(router: Router) -> None:
    from multiprocessing import util

    util.Finalize(router, _flush_at_exit, exitpriority=10)
    _flush_when_terminated()


TERMINATE_FLUSH_S = 10.0
"""How long a multiprocessing child told to stop may take to write its spans first."""
_LEAVING = threading.Event()
"""Set when the process has begun its last flush, on its way out."""


def _flush_at_exit() -> None:
    _LEAVING.set()
    flush()


def _shutdown_at_exit() -> None:
    _LEAVING.set()
    shutdown()


def _in_multiprocessing_child() -> bool:
    """Whether this is a multiprocessing child; a spawned one imports the app (and sets up) before its
    parent is known, with its name already given."""
    processes = sys.modules.get("multiprocessing")
    return processes is not None and (
        processes.parent_process() is not None or processes.current_process().name != "MainProcess"
    )


def _flush_when_terminated() -> None:
    """Have this multiprocessing child write its spans when it is told to stop.

    ``Pool.terminate()``, which leaving a ``with Pool(...)`` block calls, sends every worker SIGTERM,
    whose default action kills it at once: a pool whose tasks all ended within the writer's last half
    second kept none of their spans.  Set only where SIGTERM has its default action (an app's own
    handler is left alone) and in the main thread (the one Python runs handlers in)."""
    try:
        if threading.current_thread() is threading.main_thread() and (
            signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        ):
            signal.signal(signal.SIGTERM, _flush_then_stop)
    except Exception as exc:
        report("preparing a child process's end", exc)


def _flush_then_stop(signum: int, frame: Any) -> None:
    """Write the spans, then stop as the signal would have.  The flush runs on a thread of its own, with
    a deadline: the signal may have come while this thread held a lock the flush needs.  A child already
    on its way out (a pool's worker told to finish, then terminated while its last flush imports the
    store) is left to finish that flush and end."""
    signal.signal(signum, signal.SIG_DFL)
    if _LEAVING.is_set():
        return
    writer = threading.Thread(target=flush, args=(int(TERMINATE_FLUSH_S * 1000),), daemon=True)
    writer.start()
    writer.join(TERMINATE_FLUSH_S)
    os.kill(os.getpid(), signum)


def flush(timeout_millis: int = 30_000) -> bool:
    """Hand every finished span to its exporter now; False if that did not finish in time."""
    try:
        return STATE.router is None or STATE.router.force_flush(timeout_millis)
    except Exception as exc:
        report("agentscope.flush", exc)
        return False


def shutdown() -> None:
    """Flush and close agentscope's exporters; spans are no longer exported until ``init``."""
    try:
        if STATE.router is not None:
            STATE.router.shutdown()
    except Exception as exc:
        report("agentscope.shutdown", exc)
