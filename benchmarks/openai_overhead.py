"""Cost of the openai and anthropic integrations: client-side CPU per call and per streamed chunk.

    python benchmarks/openai_overhead.py [--sdk openai|anthropic] [--rounds 60] [--calls 10] [--streams 2]
                                         [--public-host]

The real SDK calls a simulated provider (in its own process) on loopback with
no added latency.  The cases: the uninstrumented SDK; agentscope's
instrumentation; OpenInference's instrumentor of the same SDK, when installed
(a peer doing the same job); and one bare OpenTelemetry span with the same
number of attributes opened around the call by hand, once as a plain span and
once made current (``start_as_current_span``, FACTS §1's raw span): the floor
for any instrumentation that records a span per call, and the reference of the
``× floor`` column.  Each round runs every case in turn, so all of them see the
same machine, and every call is timed on its own, so a garbage collection or an
interrupt landing in one case does not move the medians.  Spans go to a batch
processor that drops them.  CPU is the calling thread's, so neither the server
nor the export thread is counted.  Per streamed chunk: a streamed call's extra
CPU, less a call's fixed extra, over its chunks.

The client calls a loopback server, which agentscope sends ``traceparent`` (a
self-hosted vLLM or SGLang joins the call's trace through it).  With
``--public-host`` it calls the public API's host name instead (api.openai.com or
api.anthropic.com), which agentscope sends no ``traceparent``; a transport routes
those requests to the same simulated provider, in every case alike.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import anthropic
import httpx2
import openai
from agentscope.integrations.anthropic import AnthropicInstrumentor
from agentscope.integrations.openai import OpenAIInstrumentor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

import agentscope as ags
from agentscope.sdk.state import STATE
from agentscope.sim.server import free_port

MESSAGES = [{"role": "user", "content": "hello"}]
CHUNKS = 200
SIM_FLAGS = ("--queue-ms", "0", "--prefill-ms", "0", "--tokens-per-s", "0", "--output-tokens", str(CHUNKS))
START_ATTRIBUTES = {
    "gen_ai.operation.name": "chat",
    "gen_ai.request.model": "m",
    "gen_ai.provider.name": "local",
    "thread.id": 1,
}
END_ATTRIBUTES = {
    "agentscope.cpu_ns": 1,
    "gen_ai.usage.input_tokens": 9,
    "gen_ai.usage.output_tokens": 10,
    "gen_ai.response.model": "m",
    "agentscope.server.queue_ms": 0.0,
    "agentscope.server.prefill_ms": 0.0,
    "agentscope.server.decode_ms": 0.0,
}


FLOOR = "bare OTel span around the call, made current (floor)"
"""The reference of the ratio: FACTS §1's raw OTel span (``start_as_current_span``), which is what any
instrumentation whose attempt and retry spans nest under the call must at least do."""


PUBLIC_HOSTS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}


class ToLoopback(httpx2.HTTPTransport):
    """Sends every request to the simulated provider on loopback, whatever host the client names."""

    def __init__(self, port: int) -> None:
        super().__init__()
        self.port = port

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        request.url = request.url.copy_with(scheme="http", host="127.0.0.1", port=self.port)
        return super().handle_request(request)


class DropExporter(SpanExporter):
    def export(self, spans):
        return SpanExportResult.SUCCESS


@dataclass
class Case:
    name: str
    on: Callable[[], None] = lambda: None
    off: Callable[[], None] = lambda: None
    around: str = ""
    """Open a bare OTel span around each call instead of instrumenting the SDK: ``"span"``, or
    ``"current"`` for one made the current span while the call runs (``start_as_current_span``)."""


def cpu_per_call(fn: Callable[[], None], calls: int, around: str) -> list[float]:
    """The calling thread's CPU of each of ``calls`` calls, µs."""
    tracer = STATE.tracer
    samples = []
    for _ in range(calls):
        start = time.thread_time_ns()
        if around == "span":
            span = tracer.start_span("chat m", attributes=START_ATTRIBUTES)
            fn()
            span.set_attributes(END_ATTRIBUTES)
            span.end()
        elif around == "current":
            with tracer.start_as_current_span("chat m", attributes=START_ATTRIBUTES) as span:
                fn()
                span.set_attributes(END_ATTRIBUTES)
        else:
            fn()
        samples.append((time.thread_time_ns() - start) / 1000)
    return samples


def cases(sdk: str) -> list[Case]:
    ours = AnthropicInstrumentor() if sdk == "anthropic" else OpenAIInstrumentor()
    found = [
        Case("uninstrumented"),
        Case("agentscope", ours.instrument, ours.uninstrument),
        Case("bare OTel span around the call", around="span"),
        Case(FLOOR, around="current"),
    ]
    try:
        if sdk == "anthropic":
            from openinference.instrumentation.anthropic import AnthropicInstrumentor as Peer
        else:
            from openinference.instrumentation.openai import OpenAIInstrumentor as Peer
    except ImportError:
        return found
    peer = Peer()
    found.insert(2, Case(f"OpenInference {sdk} instrumentor", peer.instrument, peer.uninstrument))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--calls", type=int, default=10, help="non-streamed calls per case and round")
    parser.add_argument("--streams", type=int, default=2, help="streamed calls per case and round")
    parser.add_argument("--sdk", choices=("openai", "anthropic"), default="openai")
    parser.add_argument(
        "--public-host", action="store_true", help="call the public API's host name (no traceparent is sent)"
    )
    args = parser.parse_args()
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "agentscope.sim", "--port", str(port), *SIM_FLAGS],
        stdout=subprocess.PIPE,
        text=True,
    )
    server.stdout.readline()
    ags.init(store=None, instrument=False, span_processors=[BatchSpanProcessor(DropExporter())])
    local = {"openai": f"http://127.0.0.1:{port}/v1", "anthropic": f"http://127.0.0.1:{port}"}[args.sdk]
    where = {"base_url": local}
    if args.public_host:
        where = {"base_url": PUBLIC_HOSTS[args.sdk], "http_client": httpx2.Client(transport=ToLoopback(port))}
    if args.sdk == "anthropic":
        client = anthropic.Anthropic(api_key="k", **where)
        resource = client.messages
    else:
        client = openai.OpenAI(api_key="k", **where)
        resource = client.chat.completions

    def call() -> None:  # the method is looked up at each call, as an app does: a patch applies at once
        resource.create(model="m", messages=MESSAGES, max_tokens=10)

    def stream() -> None:
        for _ in resource.create(model="m", messages=MESSAGES, max_tokens=CHUNKS, stream=True):
            pass

    runs = cases(args.sdk)
    calls: dict[str, list[float]] = {case.name: [] for case in runs}
    streams: dict[str, list[float]] = {case.name: [] for case in runs}
    try:
        for _ in range(10):
            call()
        for _ in range(args.rounds):
            for case in runs:
                case.on()
                try:
                    calls[case.name] += cpu_per_call(call, args.calls, case.around)
                    streams[case.name] += cpu_per_call(stream, args.streams, case.around)
                finally:
                    case.off()
    finally:
        ags.shutdown()
        server.terminate()
        server.wait()
    base_call = statistics.median(calls["uninstrumented"])
    base_stream = statistics.median(streams["uninstrumented"])
    chunks = CHUNKS + 2
    print(
        f"Client-side CPU (calling thread), median per call over {args.rounds} rounds "
        f"({args.rounds * args.calls} calls and {args.rounds * args.streams} streams per case), "
        f"to {where['base_url']}"
    )
    floor = statistics.median(calls[FLOOR]) - base_call
    header = f"| case | call (µs) | added (µs) | added | × floor | streamed, {chunks} chunks (µs) |"
    print(f"{header} added a chunk (µs) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for case in runs:
        c, s = statistics.median(calls[case.name]), statistics.median(streams[case.name])
        added = c - base_call
        per_chunk = (s - base_stream - added) / chunks
        if case.name == "uninstrumented":
            print(f"| {case.name} | {c:.0f} | | | | {s:,.0f} | |")
        else:
            share, ratio = added / base_call, added / floor
            row = f"| {case.name} | {c:.0f} | {added:.0f} | {share:+.1%} | {ratio:.2f} | {s:,.0f} |"
            print(f"{row} {per_chunk:.2f} |")


if __name__ == "__main__":
    main()
