"""Per-call cost of @ags.tool next to a raw OpenTelemetry SDK span, and a 100k-span store run.

    python benchmarks/sdk_overhead.py [--calls 20000] [--rounds 7] [--store-calls 100000]

Part 1 alternates rounds of: a bare function; the same function inside a raw
OTel SDK span (start_as_current_span, BatchSpanProcessor, an exporter that
drops); and the function decorated with @ags.tool behind the same processor.
It prints the median µs per call and the ratio to the raw span.

Part 2 (in a child process, so its RSS is its own) exports ``--store-calls``
decorated calls to a DuckDB store and prints wall time and peak RSS.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

import agentscope as ags


class DropExporter(SpanExporter):
    def export(self, spans):
        return SpanExportResult.SUCCESS


def work(x: int) -> int:
    return x + 1


def per_call_us(fn, calls: int) -> float:
    start = time.perf_counter()
    for i in range(calls):
        fn(i)
    return (time.perf_counter() - start) / calls * 1e6


def overhead_table(calls: int, rounds: int) -> list[tuple[str, float, float]]:
    provider = TracerProvider()
    trace.set_tracer_provider(provider)
    ags.init(store=None, instrument=False, span_processors=[BatchSpanProcessor(DropExporter())])
    tracer = provider.get_tracer("bench")

    def raw_otel(x: int) -> int:
        with tracer.start_as_current_span("execute_tool work"):
            return work(x)

    decorated = ags.tool(work)
    cases = {"bare function": work, "raw OTel SDK span": raw_otel, "@ags.tool": decorated}
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for fn in cases.values():
        per_call_us(fn, calls // 10)
    for _ in range(rounds):
        for name, fn in cases.items():
            samples[name].append(per_call_us(fn, calls))
    ags.shutdown()
    raw = statistics.median(samples["raw OTel SDK span"])
    return [(name, statistics.median(s), statistics.median(s) / raw) for name, s in samples.items()]


STORE_RUN = """
import resource, sys, time
import duckdb
import agentscope as ags

calls, path = int(sys.argv[1]), sys.argv[2]
ags.init(service_name="bench", store=path, instrument=False)

@ags.tool
def work(x):
    return x + 1

start = time.perf_counter()
for i in range(calls):
    work(i)
called = time.perf_counter() - start
ags.shutdown()
total = time.perf_counter() - start
stored = duckdb.connect(path, read_only=True).execute("select count(*) from spans").fetchall()[0][0]
rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"{called:.2f} {total:.2f} {stored} {rss_mb:.0f}")
"""


def store_run(calls: int) -> tuple[float, float, int, float]:
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(STORE_RUN), str(calls), str(Path(tmp) / "bench.duckdb")],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
    return float(out[0]), float(out[1]), int(out[2]), float(out[3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--store-calls", type=int, default=100_000)
    args = parser.parse_args()

    print(f"Per-call cost, median of {args.rounds} alternating rounds of {args.calls:,} calls")
    print(f"| {'case':<20} | {'µs/call':>8} | {'× raw OTel span':>15} |")
    print(f"|{'-' * 22}|{'-' * 10}|{'-' * 17}|")
    for name, us, ratio in overhead_table(args.calls, args.rounds):
        print(f"| {name:<20} | {us:>8.2f} | {ratio:>15.2f} |")

    called, total, stored, rss = store_run(args.store_calls)
    print(f"\n{args.store_calls:,} @ags.tool calls exported to a DuckDB store (child process)")
    print("| calls done (s) | until stored (s) | spans stored | peak RSS (MB) |")
    print("|---------------:|-----------------:|-------------:|--------------:|")
    print(f"| {called:>14.2f} | {total:>16.2f} | {stored:>12,} | {rss:>13.0f} |")
    print(f"\nbenchmark process peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
