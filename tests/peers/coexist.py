"""agentscope beside another instrumentation in one process, as a user runs them (DESIGN §14).

Run as a script, one scenario per process (the global tracer provider can be set once)::

    python coexist.py SCENARIO STORE [--order ags-first|peer-first] [--task]

A scenario ending in ``-only`` leaves agentscope's integrations off: the peer alone records the calls.

It starts a simulated provider with known delays, sets up ``ags.init(store=STORE)`` and the peer's
instrumentation in the order given, runs the agent's tasks (``SHAPES``), and prints one JSON line:
per task the requests the provider served (with their tokens), the tools' stopwatch readings and the
wall time; the names of the spans the peer's own exporter received; what the ``agentscope`` logger
said.  The test reads the store beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import logging
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parent.parent)]  # harness, and what it imports

from harness import MODEL, PROFILE, TOOL_MS, TOOLS, agents_sdk_task, openai_agent, prompt_for  # noqa: E402

from agentscope.sim import SimServer  # noqa: E402

SHAPES = ("warm-up", "sequential", "sequential", "streamed")


class Peer:
    """One peer package: how it is switched on, and what its own exporter received."""

    def __init__(self) -> None:
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        self.exporter = InMemorySpanExporter()
        self.processor = SimpleSpanProcessor(self.exporter)
        self.client: Callable[[str], object] | None = None
        self.callbacks: list | None = None
        """LangChain callback handlers the agent runs with (a peer's tracer)."""
        self.tools: dict[str, Callable[[], str]] | None = None
        """The agent's tools as the peer's own tool decorator wraps them (no agentscope tool span then)."""
        self.workflow: Callable[[Callable[[], object]], Callable[[], object]] | None = None
        """The peer's decorator for a task, used when the task is not run under ``@ags.task``."""

    def provider(self) -> object:
        """The global SDK provider, with the peer's exporter on it (set one if nobody has)."""
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider

        current = trace.get_tracer_provider()
        if not isinstance(current, TracerProvider):
            current = TracerProvider()
            trace.set_tracer_provider(current)
        current.add_span_processor(self.processor)
        return current

    def span_names(self) -> list[str]:
        return [span.name for span in self.exporter.get_finished_spans()]


def _openinference_langchain(peer: Peer) -> None:
    from openinference.instrumentation.langchain import LangChainInstrumentor

    LangChainInstrumentor().instrument(tracer_provider=peer.provider())


def _openllmetry_langchain(peer: Peer) -> None:
    from opentelemetry.instrumentation.langchain import LangchainInstrumentor

    LangchainInstrumentor().instrument(tracer_provider=peer.provider())


def _openinference_openai_agents(peer: Peer) -> None:
    from agents import set_trace_processors
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    set_trace_processors([])  # no export to OpenAI's tracing backend: only the instrumentor's processor
    OpenAIAgentsInstrumentor().instrument(tracer_provider=peer.provider())


def _openinference_openai(peer: Peer) -> None:
    from openinference.instrumentation.openai import OpenAIInstrumentor

    OpenAIInstrumentor().instrument(tracer_provider=peer.provider())


def _openllmetry_openai(peer: Peer) -> None:
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor

    OpenAIInstrumentor().instrument(tracer_provider=peer.provider())


def _openinference_llamaindex(peer: Peer) -> None:
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    LlamaIndexInstrumentor().instrument(tracer_provider=peer.provider())


def _langfuse_client(peer: Peer) -> None:
    """Langfuse's client on the global provider, its spans to the peer's exporter."""
    import uuid

    from langfuse import Langfuse

    Langfuse(
        public_key=f"pk-lf-{uuid.uuid4().hex}",
        secret_key="sk-lf-test",
        base_url="http://127.0.0.1:9",  # never reached: spans go to the peer's exporter
        tracer_provider=peer.provider(),
        span_exporter=peer.exporter,
        flush_at=1,
    )


def _langfuse(peer: Peer) -> None:
    from langfuse.openai import OpenAI  # the drop-in: importing it patches the openai SDK

    _langfuse_client(peer)
    peer.client = lambda base_url: OpenAI(base_url=base_url, api_key="sim")


def _langfuse_observe(peer: Peer) -> None:
    """Langfuse's ``@observe``, as most of its users trace: the task and each tool decorated, the calls
    agentscope's."""
    from langfuse import observe

    _langfuse_client(peer)
    peer.tools = {name: observe(name=name, as_type="tool")(function) for name, function in TOOLS.items()}
    peer.workflow = observe(name="support_workflow", as_type="agent")


def _langfuse_langchain(peer: Peer) -> None:
    from langfuse.langchain import CallbackHandler

    _langfuse_client(peer)
    peer.callbacks = [CallbackHandler()]


def _logfire_openai(peer: Peer) -> None:
    import logfire

    logfire.configure(
        send_to_logfire=False,
        console=False,
        service_name="web-app",
        additional_span_processors=[peer.processor],
        inspect_arguments=False,
    )
    logfire.instrument_openai()


def _traceloop(peer: Peer) -> None:
    """Traceloop's SDK, as OpenLLMetry's users set it up: ``Traceloop.init`` joins or sets the global
    provider and turns on every OpenLLMetry and OpenTelemetry instrumentation it finds installed; the
    agent's tools and task carry its decorators."""
    from traceloop.sdk import Traceloop
    from traceloop.sdk.decorators import tool, workflow

    Traceloop.init(app_name="web-app", exporter=peer.exporter, disable_batch=True, telemetry_enabled=False)
    peer.tools = {name: tool(name=name)(function) for name, function in TOOLS.items()}
    peer.workflow = workflow(name="support_workflow")


def _phoenix_register(peer: Peer) -> None:
    """Phoenix's ``register()``, as its docs set it up: a provider of its own, made global (refused after
    ``ags.init``), and every OpenInference instrumentation installed switched on; the endpoint is never
    reached (its export fails at once), the peer's exporter beside it."""
    from phoenix.otel import register

    provider = register(
        project_name="support", endpoint="http://127.0.0.1:9/v1/traces", auto_instrument=True, verbose=False
    )
    provider.add_span_processor(peer.processor)


def _strands(peer: Peer) -> None:
    """Strands Agents' own OpenTelemetry (``StrandsTelemetry``: a provider of its own, made global)."""
    from strands.telemetry import StrandsTelemetry

    StrandsTelemetry().tracer_provider.add_span_processor(peer.processor)


def _pydantic_ai(peer: Peer) -> None:
    peer.provider()  # its Instrumentation capability records on the global provider


PEERS: dict[str, Callable[[Peer], None]] = {
    "openinference-langchain": _openinference_langchain,
    "openllmetry-langchain": _openllmetry_langchain,
    "openinference-openai": _openinference_openai,
    "openinference-openai-agents": _openinference_openai_agents,
    "openllmetry-openai": _openllmetry_openai,
    "langfuse": _langfuse,
    "langfuse-langchain": _langfuse_langchain,
    "langfuse-observe": _langfuse_observe,
    "pydantic-ai": _pydantic_ai,
    "strands": _strands,
    "traceloop": _traceloop,
    "phoenix-register": _phoenix_register,
    "logfire-openai": _logfire_openai,
    "logfire-openai-only": _logfire_openai,  # agentscope's integrations off
    "openinference-llamaindex": _openinference_llamaindex,
    "openinference-llamaindex-only": _openinference_llamaindex,  # agentscope's integrations off
}


def _react_agent(base_url: str, shape: str, callbacks: list | None = None) -> Callable[[], object]:
    from langchain_core.tools import StructuredTool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent

    model = ChatOpenAI(model=MODEL, base_url=base_url, api_key="sim", streaming=shape == "streamed")
    tools = [StructuredTool.from_function(f, name=name, description=f.__doc__) for name, f in TOOLS.items()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent's move to langchain.agents
        agent = create_react_agent(model, tools)
    config = {"callbacks": callbacks} if callbacks else None
    return lambda: agent.invoke({"messages": [("user", prompt_for(shape))]}, config=config)


def _function_agent(base_url: str, shape: str) -> Callable[[], object]:
    """LlamaIndex's FunctionAgent over an OpenAI-compatible endpoint; it streams when the shape does."""
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.tools import FunctionTool
    from llama_index.llms.openai_like import OpenAILike

    llm = OpenAILike(
        model=MODEL, api_base=base_url, api_key="sim", is_chat_model=True, is_function_calling_model=True
    )
    tools = [FunctionTool.from_defaults(fn=f, name=name, description=f.__doc__) for name, f in TOOLS.items()]
    agent = FunctionAgent(tools=tools, llm=llm, streaming=shape == "streamed")

    async def run() -> object:
        return await agent.run(user_msg=prompt_for(shape))  # the workflow needs a running loop

    return lambda: _event_loop().run_until_complete(run())


def _strands_agent(base_url: str, shape: str) -> Callable[[], object]:
    """Strands Agents' agent over its OpenAI model (it always streams)."""
    from strands import Agent, tool
    from strands.models.openai import OpenAIModel

    model = OpenAIModel(client_args={"base_url": base_url, "api_key": "sim"}, model_id=MODEL)
    tools = [tool(name=name, description=f.__doc__)(f) for name, f in TOOLS.items()]
    agent = Agent(model=model, tools=tools, callback_handler=None)
    return lambda: agent(prompt_for(shape))


def _pydantic_agent(base_url: str, shape: str) -> Callable[[], object]:
    """pydantic-ai's agent over the OpenAI chat model, instrumented by its own capability; it streams when
    the shape does."""
    from pydantic_ai import Agent
    from pydantic_ai.capabilities import Instrumentation
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=base_url, api_key="sim"))
    agent = Agent(model, capabilities=[Instrumentation()], tools=list(TOOLS.values()))
    if shape != "streamed":
        return lambda: agent.run_sync(prompt_for(shape))

    async def streamed() -> object:
        async with agent.run_stream(prompt_for(shape)) as result:
            return await result.get_output()

    return lambda: _event_loop().run_until_complete(streamed())


@functools.cache
def _event_loop() -> asyncio.AbstractEventLoop:
    """One loop for every task of the process, so the clients LlamaIndex keeps are closed on a live one."""
    return asyncio.new_event_loop()


def _run_task(scenario: str, peer: Peer, base_url: str, shape: str, as_task: bool) -> None:
    import agentscope as ags

    if scenario.endswith("-langchain"):
        run = _react_agent(base_url, shape, peer.callbacks)
    elif scenario.startswith("openinference-llamaindex"):
        run = _function_agent(base_url, shape)
    elif scenario == "openinference-openai-agents":
        run = functools.partial(_event_loop().run_until_complete, agents_sdk_task(base_url, shape))
    elif scenario == "pydantic-ai":
        run = _pydantic_agent(base_url, shape)
    elif scenario == "strands":
        run = _strands_agent(base_url, shape)
    else:
        import openai

        client = peer.client(base_url) if peer.client else openai.OpenAI(base_url=base_url, api_key="sim")

        @contextlib.contextmanager
        def tool_span(name: str) -> Iterator[None]:
            if peer.tools:  # the peer's decorator makes the tool's span
                yield
                return
            with ags.span(f"execute_tool {name}", kind="tool", **{"gen_ai.tool.name": name}):
                yield

        def run() -> None:
            openai_agent(client, shape, tool_span, peer.tools or TOOLS)

    if as_task:
        ags.task("support_task")(run)()
    elif peer.workflow:
        peer.workflow(run)()
    else:
        run()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=sorted(PEERS))
    parser.add_argument("store")
    parser.add_argument("--order", choices=("ags-first", "peer-first"), default="ags-first")
    parser.add_argument("--task", action="store_true", help="run each task under @ags.task")
    args = parser.parse_args()

    said: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("agentscope").addHandler(handler)

    import agentscope as ags

    peer = Peer()
    steps = [
        lambda: ags.init(
            service_name="support-agent", store=args.store, instrument=not args.scenario.endswith("-only")
        ),
        lambda: PEERS[args.scenario](peer),
    ]
    for step in steps if args.order == "ags-first" else reversed(steps):
        step()

    server = SimServer(PROFILE).start()
    tasks = []
    try:
        for shape in SHAPES:
            TOOL_MS.clear()
            first = len(server.served)
            t0 = time.perf_counter()
            _run_task(args.scenario, peer, server.base_url, shape, args.task)
            wall_ms = (time.perf_counter() - t0) * 1000
            served = [s._asdict() for s in server.served[first:]]
            tasks.append({"shape": shape, "wall_ms": wall_ms, "served": served, "tools": dict(TOOL_MS)})
    finally:
        ags.shutdown()
        server.stop()
    print(json.dumps({"tasks": tasks, "peer_spans": peer.span_names(), "said": said}))


if __name__ == "__main__":
    main()
