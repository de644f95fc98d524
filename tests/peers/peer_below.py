"""agentscope beside a peer's openai instrumentor patched below its own, in a process of its own (a peer's
``uninstrument`` may leave the SDK patched, and the global tracer provider can be set once)::

    python peer_below.py openinference|openllmetry

The peer instruments first, then agentscope's integration; a call, a stream and an async stream go to
the simulated provider, which reports Groq's timings and usage in ``x_groq``.  Prints one JSON line: the
instrumentation scope and attributes of each llm span, the chunks each stream had, and whether the SDK's
``_process_response`` was patched.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys

import openai
from agentscope.integrations.openai import OpenAIInstrumentor
from opentelemetry import trace
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import agentscope as ags
from agentscope.sim import Profile, serve

PEERS = {
    "openinference": "openinference.instrumentation.openai",
    "openllmetry": "opentelemetry.instrumentation.openai",
}
MESSAGES = [{"role": "user", "content": "hi"}]


def main(package: str) -> None:
    exporter = InMemorySpanExporter()
    ags.init(store=None, instrument=False, span_processors=[SimpleSpanProcessor(exporter)])
    importlib.import_module(PEERS[package]).OpenAIInstrumentor().instrument(
        tracer_provider=trace.get_tracer_provider()
    )
    OpenAIInstrumentor().instrument()
    with serve(Profile(queue_ms=10, prefill_ms=30, tokens_per_s=400, output_tokens=8)) as base_url:
        client = openai.OpenAI(base_url=base_url, api_key="k")
        client.chat.completions.create(model="m", messages=MESSAGES)
        chunks = sum(1 for _ in client.chat.completions.create(model="m", messages=MESSAGES, stream=True))

        async def streamed() -> None:
            aclient = openai.AsyncOpenAI(base_url=base_url, api_key="k")
            async for _ in await aclient.chat.completions.create(model="m", messages=MESSAGES, stream=True):
                pass

        asyncio.run(streamed())
    ags.shutdown()
    from openai._base_client import SyncAPIClient

    patched = hasattr(SyncAPIClient.__dict__["_process_response"], "__wrapped__")
    spans = [
        {"scope": span.instrumentation_scope.name, "attributes": dict(span.attributes)}
        for span in exporter.get_finished_spans()
    ]
    print(json.dumps({"spans": spans, "chunks": chunks, "patched": patched}))


if __name__ == "__main__":
    main(sys.argv[1])
