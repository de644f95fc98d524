"""Every way the anthropic SDK sends a Messages request, beside a peer or not, as a user runs it.

Run as a script, one scenario per process (the global tracer provider can be set once)::

    python anthropic_forms.py STORE [--peer none|openinference|openllmetry] [--order ags-first|peer-first]

It starts a simulated provider with known delays, sets up ``ags.init(store=STORE)`` and the peer's
anthropic instrumentor in the order given, and runs one ``@ags.task`` per form and round (:func:`_forms`;
the first round warms the process up): a tool step, then the call.  It prints one JSON line: per task
its form, the requests the provider served (with their tokens) and the tool's stopwatch reading; the
installed anthropic version; what the ``agentscope`` logger said.  The test reads the store beside it.
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
MESSAGES = [{"role": "user", "content": "where is my refund"}]
TOOL_MS = 40.0


def _forms(
    client: object, aclient: object, loop: asyncio.AbstractEventLoop
) -> dict[str, Callable[[], object]]:
    """Each form of a call, as the SDK's documentation shows it (the async client's on ``loop``, the one
    its connections belong to)."""
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
    }


def _peer(name: str) -> None:
    if name == "openinference":
        from openinference.instrumentation.anthropic import AnthropicInstrumentor

        AnthropicInstrumentor().instrument()
    elif name == "openllmetry":
        from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor

        AnthropicInstrumentor().instrument()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("--peer", choices=("none", "openinference", "openllmetry"), default="none")
    parser.add_argument("--order", choices=("ags-first", "peer-first"), default="ags-first")
    args = parser.parse_args()

    said: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("agentscope").addHandler(handler)

    steps = [lambda: ags.init(service_name="support-agent", store=args.store), lambda: _peer(args.peer)]
    for step in steps if args.order == "ags-first" else reversed(steps):
        step()

    import anthropic

    server = SimServer(PROFILE).start()
    client = anthropic.Anthropic(base_url=server.anthropic_base_url, api_key="sim", max_retries=0)
    aclient = anthropic.AsyncAnthropic(base_url=server.anthropic_base_url, api_key="sim", max_retries=0)
    loop = asyncio.new_event_loop()
    tasks = []
    try:
        for warm_up in (True, False):
            for form, call in _forms(client, aclient, loop).items():
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
    print(json.dumps({"tasks": tasks, "anthropic": anthropic.__version__, "said": said}))


if __name__ == "__main__":
    main()
