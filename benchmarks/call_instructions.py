"""Instructions per openai call: agentscope against a bare OTel span, counted by callgrind.

    python benchmarks/call_instructions.py [--calls 200] [--streams 5 --chunks 200] [--layouts 3]

The timed benchmark (openai_overhead.py) measures CPU time, which on a shared
two-core machine moves by tens of percent between runs.  Here each case runs in
its own process under ``valgrind --tool=callgrind``, which counts the
instructions the process executes: the same code on the same input counts the
same, whatever else the machine is doing.  A case runs ``--calls`` more calls
in one process than in another; the difference over ``--calls`` is the cost of
one call, the interpreter's start and the imports cancelled out.

The real openai SDK builds, sends and parses every request; the HTTP transport
is an in-process one answering with the simulated provider's Groq-shaped
completion (usage with Groq's timings, ``x_groq``), so no socket read splits
differently from one run to the next.  The garbage collector is off while
counting: when a collection falls would otherwise depend on every allocation
before it.  Cases: the uninstrumented SDK; agentscope's instrumentation; and
the floor, a bare OTel span made current around the call with the same
attributes (openai_overhead.py's).  Each with the client pointed at a
self-hosted server on loopback (agentscope sends it ``traceparent``) and at a
public API's host (no ``traceparent``).  And streamed (``--streams``): the
server writes ``--chunks`` content chunks, one event a read, and the caller
reads the whole stream (the floor's span open and current until it ends).
A stream's count moves with the memory layout by more than the stream proxy
costs (the SDK allocates and frees a model per chunk; docs/performance.md), so
read its row over several layouts; stream_proxy.py times the proxy alone.

An earlier checkout is counted by putting its package first on ``PYTHONPATH``
(this directory is put before it, for the benchmark's own modules).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

CASES = ("uninstrumented", "agentscope", "floor")
HOSTS = {
    "self-hosted (loopback)": "http://127.0.0.1:8000/v1",
    "public API (api.groq.com)": "https://api.groq.com/v1",
}
WARMUP = 20
LAYOUT = "CALL_INSTRUCTIONS_LAYOUT"
"""An environment variable of as many characters as the layout's number: each length moves the process's
memory, and with it the addresses that set and dict probing (context variables, weak references) depend
on, by a few thousand instructions a call either way; the median over layouts is the figure."""


def completion() -> bytes:
    """The simulated provider's non-streamed completion, Groq dialect."""
    return json.dumps(
        {
            "id": "chatcmpl-req_1",
            "object": "chat.completion",
            "created": 1,
            "model": "m",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "hi there"}, "finish_reason": "stop"}
            ],
            "usage": {
                "prompt_tokens": 9,
                "completion_tokens": 10,
                "total_tokens": 19,
                "queue_time": 0.001,
                "prompt_time": 0.002,
                "completion_time": 0.003,
                "total_time": 0.005,
            },
            "x_groq": {"id": "req_1"},
        }
    ).encode()


def stream(chunks: int) -> list[bytes]:
    """The simulated provider's streamed completion of ``chunks`` content chunks, one event a read as a
    server writes them (OpenAI's SSE, with the role chunk first and the finish and usage chunks last)."""

    def event(choices: list[dict], usage: dict | None = None) -> bytes:
        chunk = {"id": "chatcmpl-req_1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
        return b"data: " + json.dumps({**chunk, "choices": choices, "usage": usage}).encode() + b"\n\n"

    def delta(delta: dict, finish: str | None = None) -> list[dict]:
        return [{"index": 0, "delta": delta, "finish_reason": finish}]

    usage = json.loads(completion())["usage"]
    return [
        event(delta({"role": "assistant", "content": ""})),
        *(event(delta({"content": f"w{index} "})) for index in range(chunks)),
        event(delta({}, "stop")),
        event([], usage),
        b"data: [DONE]\n\n",
    ]


def run_case(case: str, base_url: str, calls: int, chunks: int) -> None:
    """The measured process: ``WARMUP + calls`` calls of ``case`` (streamed if ``chunks``), then exit."""
    import httpx2
    import openai
    from agentscope.integrations.openai import OpenAIInstrumentor
    from openai_overhead import END_ATTRIBUTES, START_ATTRIBUTES, DropExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    import agentscope as ags
    from agentscope.sdk.state import STATE

    events, body = stream(chunks), completion()
    kind = "text/event-stream" if chunks else "application/json"
    headers = {"content-type": kind, "x-request-id": "req_1"}
    transport = httpx2.MockTransport(
        lambda request: httpx2.Response(200, content=iter(events) if chunks else body, headers=headers)
    )
    exporter = BatchSpanProcessor(DropExporter(), schedule_delay_millis=10**7, max_queue_size=10**6)
    ags.init(store=None, instrument=False, span_processors=[exporter])
    client = openai.OpenAI(base_url=base_url, api_key="k", http_client=httpx2.Client(transport=transport))
    resource, tracer = client.chat.completions, STATE.tracer
    messages = [{"role": "user", "content": "hello"}]
    if case == "agentscope":
        OpenAIInstrumentor().instrument()

    def call() -> None:
        if chunks:
            for _ in resource.create(model="m", messages=messages, max_tokens=chunks, stream=True):
                pass
        else:
            resource.create(model="m", messages=messages, max_tokens=10)

    def one() -> None:
        if case == "floor":
            with tracer.start_as_current_span("chat m", attributes=START_ATTRIBUTES) as span:
                call()
                span.set_attributes(END_ATTRIBUTES)
        else:
            call()

    for _ in range(WARMUP):
        one()
    gc.collect()
    gc.disable()
    for _ in range(calls):
        one()
    os._exit(0)


def instructions(case: str, base_url: str, calls: int, chunks: int, layout: int) -> int:
    """Instructions the whole process executed for ``calls`` measured calls, in memory layout ``layout``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        # The count, written in a fixed width: under valgrind a process's memory layout follows the length
        # of its arguments, and with it the start-up's dict and set probing, by up to 5 million
        # instructions between "0" and "200" — 25,000 a call that would not cancel.
        command = [sys.executable, __file__, "--run", case, "--base-url", base_url]
        command += ["--calls", f"{calls:06d}", "--chunks", f"{chunks:06d}"]
        path = os.pathsep.join(
            filter(None, [os.path.dirname(os.path.abspath(__file__)), os.environ.get("PYTHONPATH")])
        )
        env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": path, LAYOUT: "x" * layout}
        subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *command],
            check=True,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        with open(out, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if match := re.match(r"(?:summary|totals):\s+(\d+)", line):
                    return int(match.group(1))
    raise RuntimeError(f"callgrind wrote no total for {case}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="non-streamed calls counted per case")
    parser.add_argument("--streams", type=int, default=5, help="streamed calls counted per case (0: none)")
    parser.add_argument("--chunks", type=int, default=200, help="content chunks of each streamed call")
    parser.add_argument("--layouts", type=int, default=3, help="memory layouts each case is counted in")
    parser.add_argument("--run", choices=CASES, help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        run_case(args.run, args.base_url, args.calls, args.chunks)
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (Debian: apt-get install valgrind)")
    rows = [(host, base_url, args.calls, 0) for host, base_url in HOSTS.items()]
    if args.streams:
        host, base_url = next(iter(HOSTS.items()))
        rows.append((f"{host}, streamed, {args.chunks} chunks", base_url, args.streams, args.chunks))
    print(
        f"Instructions per call (callgrind; {args.calls} calls and {args.streams} streams counted per case, "
        f"less none; medians of {args.layouts} memory layouts, and the range of × floor)"
    )
    print("| server | uninstrumented | added: floor | added: agentscope | × floor | × floor, each layout |")
    print("|---|---:|---:|---:|---:|---|")
    for host, base_url, calls, chunks in rows:
        added: dict[str, list[float]] = {"uninstrumented": [], "floor": [], "agentscope": []}
        for layout in range(args.layouts):
            per_call = {
                case: (
                    instructions(case, base_url, calls, chunks, layout)
                    - instructions(case, base_url, 0, chunks, layout)
                )
                / calls
                for case in CASES
            }
            base = per_call["uninstrumented"]
            added["uninstrumented"].append(base)
            added["floor"].append(per_call["floor"] - base)
            added["agentscope"].append(per_call["agentscope"] - base)
        ratios = sorted(ours / floor for ours, floor in zip(added["agentscope"], added["floor"], strict=True))
        base, floor, ours = (
            statistics.median(added[case]) for case in ("uninstrumented", "floor", "agentscope")
        )
        print(
            f"| {host} | {base:,.0f} | {floor:,.0f} | {ours:,.0f} | {statistics.median(ratios):.2f} | "
            + ", ".join(f"{ratio:.2f}" for ratio in ratios)
            + " |"
        )


if __name__ == "__main__":
    main()
