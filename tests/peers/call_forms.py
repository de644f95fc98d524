"""Every way an LLM SDK (anthropic's, openai's) sends a call, beside a peer or not, as a user runs it.

Run as a script, one scenario per process (the global tracer provider can be set once)::

    python call_forms.py STORE [--sdk anthropic|openai] [--peer none|openinference|openllmetry]
        [--order ags-first|peer-first]

It starts a simulated provider with known delays, sets up ``ags.init(store=STORE)`` and the peer's
instrumentor of that SDK in the order given, and runs one ``@ags.task`` per form and round
(:func:`_anthropic_forms`, :func:`_openai_forms`; the first round warms the process up): a tool step,
then the call.  It prints one JSON line: per task its form, the requests the provider served (with
their tokens) and the tool's stopwatch reading; the installed SDK's version; what the ``agentscope``
logger said.  The test reads the store beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import time
from collections.abc import Callable

import agentscope as ags
from agentscope.sim import Profile, SimServer

PROFILE = Profile(queue_ms=5, prefill_ms=150, tokens_per_s=200, output_tokens=40, seed=7)
"""Each call: 5 ms queue, 150 ms prefill, 200 ms decode at the provider."""
MODEL = "claude-sim"
OPENAI_MODEL = "gpt-oss-120b"
MESSAGES = [{"role": "user", "content": "where is my refund"}]
TOOL_MS = 40.0


def _anthropic_forms(
    client: object, aclient: object, loop: asyncio.AbstractEventLoop
) -> dict[str, Callable[[], object]]:
    """Each form of an anthropic call, as the SDK's documentation shows it (the async client's on
    ``loop``, the one its connections belong to)."""
    ask = {"model": MODEL, "max_tokens": 200, "messages": MESSAGES}
    messages, beta = client.messages, client.beta.messages  # type: ignore[attr-defined]

    def streamed_create() -> None:
        for _ in messages.create(**ask, stream=True):
            pass

    def stream_helper() -> None:
        with messages.stream(**ask) as stream:
            "".join(stream.text_stream)

    def beta_stream_helper() -> None:
        with beta.stream(**ask) as stream:
            stream.get_final_message()

    async def async_stream_helper() -> None:
        async with aclient.messages.stream(**ask) as stream:  # type: ignore[attr-defined]
            async for _ in stream.text_stream:
                pass

    return {
        "create": lambda: messages.create(**ask),
        "create, stream=True": streamed_create,
        "parse": lambda: messages.parse(**ask),
        "stream()": stream_helper,
        "async stream()": lambda: loop.run_until_complete(async_stream_helper()),
        "beta create": lambda: beta.create(**ask),
        "beta stream()": beta_stream_helper,
        **_raw_forms(messages, {**ask, "stream": True}),
    }


def _openai_forms(
    client: object, aclient: object, loop: asyncio.AbstractEventLoop
) -> dict[str, Callable[[], object]]:
    """The openai SDK's forms of a streamed chat call: plain and through its raw responses."""
    usage = {"include_usage": True}
    ask = {"model": OPENAI_MODEL, "messages": MESSAGES, "stream": True, "stream_options": usage}
    completions = client.chat.completions  # type: ignore[attr-defined]

    def streamed_create() -> None:
        for _ in completions.create(**ask):
            pass

    async def async_streamed_response() -> None:
        async with aclient.chat.completions.with_streaming_response.create(**ask) as response:  # type: ignore[attr-defined]
            async for _ in await response.parse():
                pass

    return {
        "create, stream=True": streamed_create,
        **_raw_forms(completions, ask),
        "async with_streaming_response, stream=True": lambda: loop.run_until_complete(
            async_streamed_response()
        ),
    }


def _raw_forms(api: object, ask: dict) -> dict[str, Callable[[], object]]:
    """A streamed call through the SDK's raw responses, which hand back the response, not the stream."""

    def streamed_response() -> None:
        with api.with_streaming_response.create(**ask) as response:  # type: ignore[attr-defined]
            for _ in response.parse():
                pass

    def streamed_raw_response() -> None:  # the raw response is dropped as soon as it is parsed
        for _ in api.with_raw_response.create(**ask).parse():  # type: ignore[attr-defined]
            pass

    return {
        "with_streaming_response, stream=True": streamed_response,
        "with_raw_response, stream=True": streamed_raw_response,
    }


def _peer(sdk: str, name: str) -> None:
    if (sdk, name) == ("anthropic", "openinference"):
        from openinference.instrumentation.anthropic import AnthropicInstrumentor as Instrumentor
    elif (sdk, name) == ("anthropic", "openllmetry"):
        from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor as Instrumentor
    elif (sdk, name) == ("openai", "openinference"):
        from openinference.instrumentation.openai import OpenAIInstrumentor as Instrumentor
    elif (sdk, name) == ("openai", "openllmetry"):
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor as Instrumentor
    else:
        return
    Instrumentor().instrument()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("--sdk", choices=("anthropic", "openai"), default="anthropic")
    parser.add_argument("--peer", choices=("none", "openinference", "openllmetry"), default="none")
    parser.add_argument("--order", choices=("ags-first", "peer-first"), default="ags-first")
    args = parser.parse_args()

    said: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("agentscope").addHandler(handler)

    steps = [
        lambda: ags.init(service_name="support-agent", store=args.store),
        lambda: _peer(args.sdk, args.peer),
    ]
    for step in steps if args.order == "ags-first" else reversed(steps):
        step()

    server = SimServer(PROFILE).start()
    if args.sdk == "anthropic":
        import anthropic as sdk

        client = sdk.Anthropic(base_url=server.anthropic_base_url, api_key="sim", max_retries=0)
        aclient = sdk.AsyncAnthropic(base_url=server.anthropic_base_url, api_key="sim", max_retries=0)
        forms = _anthropic_forms
    else:
        import openai as sdk

        client = sdk.OpenAI(base_url=server.base_url, api_key="sim", max_retries=0)
        aclient = sdk.AsyncOpenAI(base_url=server.base_url, api_key="sim", max_retries=0)
        forms = _openai_forms
    loop = asyncio.new_event_loop()
    tasks = []
    try:
        for warm_up in (True, False):
            for form, call in forms(client, aclient, loop).items():
                first = len(server.served)

                def task(call: Callable[[], object] = call) -> None:
                    t0 = time.perf_counter()
                    with ags.span("lookup_order", kind="tool"):
                        time.sleep(TOOL_MS / 1000)
                    tasks[-1]["tool_ms"] = (time.perf_counter() - t0) * 1000
                    call()

                tasks.append({"form": form, "warm_up": warm_up})
                ags.task(form)(task)()
                tasks[-1]["served"] = [s._asdict() for s in server.served[first:]]
    finally:
        ags.shutdown()
        server.stop()
    print(json.dumps({"tasks": tasks, "sdk": sdk.__version__, "said": said}))


if __name__ == "__main__":
    main()
