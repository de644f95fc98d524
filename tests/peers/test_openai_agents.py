"""The OpenAI Agents SDK (chat completions model on the simulated provider), traced by OpenInference's
openai-agents instrumentation: agent → turn → generation and tool spans."""

from __future__ import annotations

import pytest
from harness import agents_sdk_task, measure, require

require("agents")
require("openinference.instrumentation.openai_agents")


@pytest.fixture
def openinference_agents(otel):
    from agents import set_trace_processors
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    set_trace_processors([])  # no export to OpenAI's tracing backend: only the instrumentor's processor
    instrumentor = OpenAIAgentsInstrumentor()
    instrumentor.instrument(tracer_provider=otel.provider)
    yield otel
    instrumentor.uninstrument()


def test_openai_agents_blame_matches_the_known_delays(openinference_agents, providers, tmp_path):
    import asyncio

    def run(shape: str, base_url: str) -> None:
        asyncio.run(agents_sdk_task(base_url, shape))

    measured = measure("openai-agents + OpenInference", run, openinference_agents.export, providers, tmp_path)
    measured.check_every_shape()
