"""An agent traced for Arize Phoenix, as its users trace one: OpenInference's openai instrumentor and the
agent's own AGENT and TOOL spans, exported over OTLP/HTTP to a Phoenix server.

Run as a script (the global tracer provider can be set once)::

    python phoenix_agent.py ENDPOINT PROJECT

It starts a simulated provider with known delays, runs the agent's tasks (``SHAPES``) and prints one JSON
line: per task the requests the provider served and the tools' stopwatch readings.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parent.parent)]  # harness, and what it imports

from harness import PROFILE, TOOL_MS, openai_agent  # noqa: E402

from agentscope.sim import SimServer  # noqa: E402

SHAPES = ("warm-up", "sequential", "streamed")


def main() -> None:
    import openai
    from openinference.instrumentation.openai import OpenAIInstrumentor
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    endpoint, project = sys.argv[1:3]
    resource = Resource.create({"service.name": "support-agent", "openinference.project.name": project})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces")))
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    tracer = provider.get_tracer("support-agent")
    kind = "openinference.span.kind"

    @contextlib.contextmanager
    def tool_span(name: str) -> Iterator[None]:
        with tracer.start_as_current_span(name, attributes={kind: "TOOL", "tool.name": name}):
            yield

    server = SimServer(PROFILE).start()
    client = openai.OpenAI(base_url=server.base_url, api_key="sim")
    tasks = []
    try:
        for shape in SHAPES:
            TOOL_MS.clear()
            first = len(server.served)
            with tracer.start_as_current_span("support_task", attributes={kind: "AGENT"}):
                openai_agent(client, shape, tool_span)
            served = [s._asdict() for s in server.served[first:]]
            tasks.append({"shape": shape, "served": served, "tools": dict(TOOL_MS)})
    finally:
        provider.shutdown()
        server.stop()
    print(json.dumps(tasks))


if __name__ == "__main__":
    main()
