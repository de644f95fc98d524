"""The OpenAI Agents SDK (chat completions model on the simulated provider), traced by OpenInference's
openai-agents instrumentation: agent → turn → generation and tool spans."""

from __future__ import annotations

import pytest
from harness import MODEL, TOOLS, measure, prompt_for, require

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

    from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, Runner, function_tool
    from openai import AsyncOpenAI

    tools = [function_tool(f) for f in TOOLS.values()]

    def run(shape: str, base_url: str) -> None:
        async def task() -> None:
            client = AsyncOpenAI(base_url=base_url, api_key="sim")
            model = OpenAIChatCompletionsModel(model=MODEL, openai_client=client)
            settings = ModelSettings(parallel_tool_calls=True)
            agent = Agent(name="support", model=model, tools=tools, model_settings=settings)
            try:
                if shape == "streamed":
                    result = Runner.run_streamed(agent, prompt_for(shape))
                    async for _ in result.stream_events():
                        pass
                else:
                    await Runner.run(agent, prompt_for(shape))
            finally:
                await client.close()

        asyncio.run(task())

    measured = measure("openai-agents + OpenInference", run, openinference_agents.export, providers, tmp_path)
    measured.check_every_shape()
