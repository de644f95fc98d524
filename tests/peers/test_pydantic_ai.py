"""pydantic-ai's own OpenTelemetry instrumentation (the Instrumentation capability), an agent with the
three tools on the OpenAI chat model pointed at the simulated provider."""

from __future__ import annotations

import asyncio

from harness import MODEL, TOOLS, measure, prompt_for, require

require("pydantic_ai")


def test_pydantic_ai_blame_matches_the_known_delays(otel, providers, tmp_path):
    from pydantic_ai import Agent
    from pydantic_ai.capabilities import Instrumentation
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    instrumentation = Instrumentation(settings=InstrumentationSettings(tracer_provider=otel.provider))

    def run(shape: str, base_url: str) -> None:
        model = OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=base_url, api_key="sim"))
        agent = Agent(model, capabilities=[instrumentation], tools=list(TOOLS.values()))
        if shape != "streamed":
            agent.run_sync(prompt_for(shape))
            return

        async def streamed() -> None:
            async with agent.run_stream(prompt_for(shape)) as result:
                await result.get_output()

        asyncio.run(streamed())

    measured = measure("pydantic-ai", run, otel.export, providers, tmp_path)
    measured.check_every_shape()
