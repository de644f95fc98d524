"""Cost of the openai integration: client-side CPU per call and per streamed chunk, with and without it.

    python benchmarks/openai_overhead.py [--calls 300] [--rounds 5]

The real openai SDK calls a simulated provider (in its own process) on
loopback with no added latency.  Rounds alternate uninstrumented and instrumented (spans exported to a
processor that drops them); each case reports the calling thread's CPU per
call (thread time, so the server's work is not counted) and, for streams of
200 chunks, the extra CPU per chunk.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

import openai
from agentscope.integrations.openai import OpenAIInstrumentor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

import agentscope as ags
from agentscope.sim.server import free_port

MESSAGES = [{"role": "user", "content": "hello"}]
CHUNKS = 200


class DropExporter(SpanExporter):
    def export(self, spans):
        return SpanExportResult.SUCCESS


def cpu_per_call(fn, calls: int) -> float:
    start = time.thread_time_ns()
    for _ in range(calls):
        fn()
    return (time.thread_time_ns() - start) / calls / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentscope.sim",
            "--port",
            str(port),
            "--queue-ms",
            "0",
            "--prefill-ms",
            "0",
            "--tokens-per-s",
            "0",
            "--output-tokens",
            str(CHUNKS),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    server.stdout.readline()
    base_url = f"http://127.0.0.1:{port}/v1"
    ags.init(store=None, instrument=False, span_processors=[BatchSpanProcessor(DropExporter())])
    instrumentor = OpenAIInstrumentor()
    client = openai.OpenAI(base_url=base_url, api_key="k")

    def call() -> None:
        client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=10)

    def stream() -> None:
        for _ in client.chat.completions.create(model="m", messages=MESSAGES, stream=True):
            pass

    samples: dict[str, list[float]] = {k: [] for k in ("call", "call+", "stream", "stream+")}
    try:
        for _ in range(args.rounds):
            samples["call"].append(cpu_per_call(call, args.calls))
            samples["stream"].append(cpu_per_call(stream, args.calls // 10))
            instrumentor.instrument()
            samples["call+"].append(cpu_per_call(call, args.calls))
            samples["stream+"].append(cpu_per_call(stream, args.calls // 10))
            instrumentor.uninstrument()
    finally:
        ags.shutdown()
        server.terminate()
        server.wait()
    m = {k: statistics.median(v) for k, v in samples.items()}
    chunks = CHUNKS + 2
    print(f"Client-side CPU (calling thread), median of {args.rounds} alternating rounds")
    print("| case | uninstrumented (µs) | instrumented (µs) | added (µs) | added |")
    print("|---|---:|---:|---:|---:|")
    print(
        f"| non-streamed call | {m['call']:.0f} | {m['call+']:.0f} | {m['call+'] - m['call']:.0f} | "
        f"{(m['call+'] - m['call']) / m['call']:+.1%} |"
    )
    print(
        f"| streamed call, {chunks} chunks | {m['stream']:.0f} | {m['stream+']:.0f} | "
        f"{m['stream+'] - m['stream']:.0f} | {(m['stream+'] - m['stream']) / m['stream']:+.1%} |"
    )
    per_chunk = (m["stream+"] - m["stream"] - (m["call+"] - m["call"])) / chunks
    print(
        f"\nadded per streamed chunk (streamed call's extra, less a call's fixed extra): {per_chunk:.2f} µs"
    )


if __name__ == "__main__":
    main()
