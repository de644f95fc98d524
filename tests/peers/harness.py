"""One small agent, many peers' instrumentation: run it, read the peer's trace, compare with the truth.

The agent makes model calls against ``agentscope.sim`` (known queue, prefill and
decode) and runs three tools: a sleep, a real SQLite query and a CPU burn, each
timed by its own stopwatch.  Four task shapes: sequential (three tool turns and
an answer; a first one warms the process up), streamed (the same, streamed),
one 429 per model call (the SDK
retries inside the call), and parallel tools (all three in one turn).

A peer module gives ``run(shape, base_url)``: one task, traced however that peer
traces.  :func:`measure` runs the shapes, exports what the peer recorded, reads
it back through agentscope's own ingest and analysis, and pairs each task found
with the ground truth of the run that made it.
"""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from heap import session_heap_frozen

from agentscope.analysis import categories as C
from agentscope.analysis.pipeline import task_results
from agentscope.analysis.report import nearest_rank, variants
from agentscope.analysis.tasks import TaskResult
from agentscope.analysis.whatif import Scenario
from agentscope.ingest import ingest
from agentscope.sim import Profile, SimServer
from agentscope.store import Store

MODEL = "gpt-oss-120b"
PROFILE = Profile(queue_ms=5, prefill_ms=250, tokens_per_s=200, output_tokens=80, timings="none")
"""Each model call: 5 ms queue, 250 ms prefill, 400 ms decode at the provider (calls of real length:
the client-side work inside a peer's LLM span, 10–30 ms a call, is then a few per cent of it)."""
CLIENT_MS_PER_CALL = 30.0
"""What the client's own work inside one call's span may add to the provider's time: building the
request and reading the reply, which the provider's record cannot see (10–30 ms a call on two idle
cores; a machine loaded by other processes stretches it)."""
SHAPES = ("warm-up", "sequential", "sequential", "streamed", "retry", "parallel")
"""The first task of a process pays for lazy imports and a new connection inside its first model
span; it is run and read like the others, and checked only for being found."""
SEQUENTIAL_PROMPT = "where is my order"
PARALLEL_PROMPT = "check everything in parallel"
X36 = Scenario("inference x3.6", {"inference": 3.6})


def require(module: str) -> object:
    """Import a peer's package: skipped without the ``peers`` extra, a failure where
    ``AGENTSCOPE_REQUIRE_PEERS=1`` (CI)."""
    if os.environ.get("AGENTSCOPE_REQUIRE_PEERS") == "1":
        __import__(module)
        return sys.modules[module]
    return pytest.importorskip(module)


def interpreter_of(variable: str, extra: str) -> str:
    """The Python of an environment of its own holding ``extra`` (a peer whose pins cannot sit beside the
    ``peers`` extra's), named by the environment variable ``variable`` (.ci/run makes it): skipped where
    it is not set, a failure where ``AGENTSCOPE_REQUIRE_PEERS=1`` (CI)."""
    python = os.environ.get(variable)
    if python:
        return python
    if os.environ.get("AGENTSCOPE_REQUIRE_PEERS") == "1":
        pytest.fail(f"{variable} names no environment with the {extra} extra")
    pytest.skip(f"set {variable} to an environment with the {extra} extra")


TOOL_MS: dict[str, float] = {}
"""Stopwatch readings (ms) of the tools run in the task in progress."""


@contextmanager
def stopwatch(name: str) -> Iterator[None]:
    t0 = time.perf_counter()
    try:
        yield
    finally:
        TOOL_MS[name] = TOOL_MS.get(name, 0.0) + (time.perf_counter() - t0) * 1000


def wait_for_shipping() -> str:
    """Ask the shipping service where the parcel is (a slow remote call)."""
    with stopwatch("wait_for_shipping"):
        time.sleep(0.12)
        return "in transit"


_DB = Path(tempfile.gettempdir()) / f"agentscope-peers-{os.getpid()}.sqlite"


def count_orders() -> str:
    """Count the customer's orders (a real SQLite query)."""
    with stopwatch("count_orders"):
        con = sqlite3.connect(_DB)
        try:
            (n,) = con.execute(
                "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 150000) "
                "SELECT count(*) FROM c WHERE x % 7 = 0"
            ).fetchone()
        finally:
            con.close()
        return str(n)


def score_risk() -> str:
    """Score the refund risk (CPU-bound work in the agent's process)."""
    with stopwatch("score_risk"):
        end = time.thread_time() + 0.06
        while time.thread_time() < end:
            pass
        return "low"


TOOLS: dict[str, Callable[[], str]] = {
    "wait_for_shipping": wait_for_shipping,
    "count_orders": count_orders,
    "score_risk": score_risk,
}
OPENAI_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": function.__doc__,
            "parameters": {"type": "object", "properties": {}},
        },
    }
    for name, function in TOOLS.items()
]
"""The tools as the chat completions API declares them (for peers driving the SDK directly)."""


def assert_model_time(measured_ms: float, served_ms: float, calls: int, figures: str) -> None:
    """Model time as the trace shows it, held to the provider's own record of the same requests:
    within ±10%, and above that by at most :data:`CLIENT_MS_PER_CALL` a call.  A call counted twice,
    or one missing, is off by a whole call (some 650 ms) and fails either way."""
    low = served_ms * 0.90
    high = served_ms * 1.10 + CLIENT_MS_PER_CALL * calls
    assert low <= measured_ms <= high, f"model {measured_ms:.0f} ms, outside {low:.0f}–{high:.0f}: {figures}"


def prompt_for(shape: str) -> str:
    return PARALLEL_PROMPT if shape == "parallel" else SEQUENTIAL_PROMPT


@dataclass
class Truth:
    """What one task really did."""

    shape: str
    wall_ms: float
    served: list = field(default_factory=list)
    """The simulated provider's own record of each request of the task."""
    tools: dict[str, float] = field(default_factory=dict)

    @property
    def model_ms(self) -> float:
        return sum(s.ms for s in self.served)

    @property
    def inference_ms(self) -> float:
        """Prefill and decode of the successful requests, as the provider served them (its time, less
        its queue): what a faster chip shrinks.  Measured rather than the profile's nominal figures,
        which a loaded machine's late wake-ups overrun by a few percent."""
        return sum(s.ms - PROFILE.queue_ms for s in self.served if s.status == 200)


@dataclass
class Measured:
    """A peer's tasks as agentscope read them, beside the truth."""

    peer: str
    truths: list[Truth]
    results: list[TaskResult]
    repaired: int

    def pairs(self, shape: str) -> list[tuple[Truth, TaskResult]]:
        return [(t, r) for t, r in zip(self.truths, self.results, strict=True) if t.shape == shape]

    @staticmethod
    def model_ms(result: TaskResult) -> float:
        """Inference, network and provider queue: the model call as the trace shows it."""
        index = C.KEY_INDEX
        keys = (C.PREFILL, C.DECODE, C.UNSPLIT, "network", C.QUEUE_PROVIDER)
        return sum(result.components[index[key]] for key in keys) / 1e6

    @staticmethod
    def tools_ms(result: TaskResult) -> float:
        return (result.components[C.KEY_INDEX["tool"]] + result.components[C.KEY_INDEX["db"]]) / 1e6

    def whatif_change(self, shape: str) -> tuple[float, float]:
        """(agentscope's ×3.6 p95 change, the change the known delays give) over tasks of ``shape``."""
        pairs = self.pairs(shape)
        before = sorted(r.duration_ns / 1e6 for _, r in pairs)
        after = sorted(r.whatif_ns[0] / 1e6 for _, r in pairs)
        known = sorted(r.duration_ns / 1e6 - t.inference_ms * (1 - 1 / 3.6) for t, r in pairs)
        p95 = nearest_rank(before, 95)
        return nearest_rank(after, 95) / p95 - 1, nearest_rank(known, 95) / p95 - 1

    def figures(self, truth: Truth, result: TaskResult) -> str:
        """One task's model and tools time, read against the truth (ms, and the difference)."""
        tools = sum(truth.tools.values())
        return (
            f"{self.model_ms(result):.0f} / {truth.model_ms:.0f} "
            f"({self.model_ms(result) / truth.model_ms - 1:+.1%}) | "
            f"{self.tools_ms(result):.0f} / {tools:.0f} ({self.tools_ms(result) / tools - 1:+.1%})"
        )

    def row(self) -> str:
        (truth, result), *_ = self.pairs("sequential")
        ours, known = self.whatif_change("sequential")
        return (
            f"| {self.peer} | {self.figures(truth, result)} | {ours:+.1%} / {known:+.1%} | {self.repaired} |"
        )

    def check_every_shape(self) -> None:
        """Print the peer's row of docs/accuracy.md and hold every shape to its bars."""
        print(self.row())
        self.check_sequential()
        self.check_streamed()
        self.check_hidden_retries()
        self.check_parallel_tools()

    def check_sequential(self) -> None:
        """The accuracy bars on every sequential task: model time (:func:`assert_model_time`), tools
        ±10%, what-if ±5 points."""
        for n, (truth, result) in enumerate(self.pairs("sequential")):
            figures = f"sequential task {n}: {self.figures(truth, result)}; first task's row: {self.row()}"
            assert_model_time(self.model_ms(result), truth.model_ms, len(truth.served), figures)
            assert self.tools_ms(result) == pytest.approx(sum(truth.tools.values()), rel=0.10), figures
            # A task is no longer than the run that made it; LangChain's tracers stamp a run's end in a
            # callback, which lags a little on a loaded machine, hence the slack.
            assert result.duration_ns / 1e6 <= truth.wall_ms * 1.02 + 20, (
                result.duration_ns / 1e6,
                truth.wall_ms,
            )
        ours, known = self.whatif_change("sequential")
        assert abs(ours - known) <= 0.05, self.row()

    def check_streamed(self) -> None:
        """A streamed call's model time to the same bar (the first token splits it, where recorded)."""
        for n, (truth, result) in enumerate(self.pairs("streamed")):
            figures = f"streamed task {n}: {self.figures(truth, result)}; parts: {result.components}"
            assert_model_time(self.model_ms(result), truth.model_ms, len(truth.served), figures)

    def check_hidden_retries(self) -> None:
        """The 429 task, where the peer records no attempt: the SDK retries inside the span the peer
        wraps, so the failed attempt and the backoff are in the call's time and nothing is invented as
        retry; the tools are still right."""
        for truth, result in self.pairs("retry"):
            assert result.components[C.KEY_INDEX[C.FAILED]] == 0
            assert self.model_ms(result) >= truth.model_ms
            assert self.tools_ms(result) == pytest.approx(sum(truth.tools.values()), rel=0.10)

    def check_parallel_tools(self) -> None:
        """The three tools ran at once: the path holds one of them, not their sum.

        Which one: the last to end.  Started together, that is the longest; on a slow machine the
        framework starts their threads tens of ms apart, and the path holds a shorter tool that ended
        last and, before it, the wait for its thread.
        """
        for truth, result in self.pairs("parallel"):
            assert self.tools_ms(result) < 0.85 * sum(truth.tools.values())
            assert self.tools_ms(result) >= 0.9 * min(truth.tools.values()), (result.components, truth.tools)


class Providers:
    """A well-behaved simulated provider and one that answers every call's first attempt with 429."""

    def __init__(self) -> None:
        self.normal = SimServer(PROFILE).start()
        self.limited = SimServer(
            Profile(**{**PROFILE.__dict__, "rate_limit_first": True, "retry_after_ms": 60})
        )
        self.limited.start()

    def for_shape(self, shape: str) -> SimServer:
        return self.limited if shape == "retry" else self.normal

    def stop(self) -> None:
        self.normal.stop()
        self.limited.stop()


def measure(
    peer: str,
    run: Callable[[str, str], None],
    export: Callable[[Path], Path],
    providers: Providers,
    tmp_path: Path,
    shapes: tuple[str, ...] = SHAPES,
) -> Measured:
    """Run each task shape once through ``run``, ``export`` the peer's trace to a file, read it back."""
    truths = []
    with session_heap_frozen():
        for shape in shapes:
            server = providers.for_shape(shape)
            TOOL_MS.clear()
            first = len(server.served)
            t0 = time.perf_counter()
            run(shape, server.base_url)
            wall = (time.perf_counter() - t0) * 1000
            truths.append(Truth(shape, wall, list(server.served[first:]), dict(TOOL_MS)))
    path = export(tmp_path)
    with Store(None) as store:
        summary = ingest(store, [path])
        assert summary.ok, summary.problems
        results = task_results(store, variants([X36]))
    results.sort(key=lambda r: r.start_ns)
    assert len(results) == len(truths), f"{peer}: {len(results)} tasks found for {len(truths)} run"
    return Measured(peer, truths, results, sum(r.repaired for r in results))


def otlp_json_line(spans: Sequence[object]) -> str:
    """Finished OTel SDK spans as one line of OTLP JSON (no newline), as a Collector's file exporter writes
    it: the protobuf request in protobuf's JSON mapping, ids as hex where that mapping writes base64.

    Its imports are its own: ``coexist.py`` runs this module in other environments, which need not hold
    the OTLP exporter."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    request = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    for resource_spans in request["resourceSpans"]:
        for scope_spans in resource_spans["scopeSpans"]:
            for span in scope_spans["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(request)


def openai_agent(
    client: object,
    shape: str,
    tool_span: Callable[[str], object],
    tools: Mapping[str, Callable[[], str]] = TOOLS,
) -> None:
    """The agent loop written against the openai SDK directly: call the model, run the tools it asks for
    (in threads, each in a copy of the caller's context, for the parallel shape), until it answers.

    ``tool_span(name)`` is a context manager: the span the peer's convention gives a tool. ``tools`` are
    the functions run, as a peer that decorates them (Traceloop's ``@tool``) hands them back.
    """
    import contextvars
    from concurrent.futures import ThreadPoolExecutor

    def run_tool(name: str) -> str:
        with tool_span(name):
            return tools[name]()

    messages: list[dict] = [{"role": "user", "content": prompt_for(shape)}]
    for _ in range(len(TOOLS) + 2):
        calls = _ask(client, messages, stream=shape == "streamed")
        if not calls:
            return
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        names = [call["function"]["name"] for call in calls]
        if shape == "parallel":
            with ThreadPoolExecutor(len(names)) as pool:
                futures = [pool.submit(contextvars.copy_context().run, run_tool, name) for name in names]
                results = [future.result() for future in futures]
        else:
            results = [run_tool(name) for name in names]
        for call, result in zip(calls, results, strict=True):
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})


async def agents_sdk_task(base_url: str, shape: str) -> None:
    """One task of the OpenAI Agents SDK's agent over its chat completions model (tools run in parallel
    when the model asks for several); it streams when the shape does."""
    from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, Runner, function_tool
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=base_url, api_key="sim")
    model = OpenAIChatCompletionsModel(model=MODEL, openai_client=client)
    tools = [function_tool(f) for f in TOOLS.values()]
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


def _ask(client: object, messages: list[dict], stream: bool) -> list[dict]:
    """One model call; the tool calls it made, as chat-completions message dicts."""
    create = client.chat.completions.create  # type: ignore[attr-defined]
    if not stream:
        message = create(model=MODEL, messages=messages, tools=OPENAI_TOOLS).choices[0].message
        return [call.model_dump() for call in message.tool_calls or []]
    calls: dict[int, dict] = {}
    for chunk in create(model=MODEL, messages=messages, tools=OPENAI_TOOLS, stream=True):
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or []:
                call = calls.setdefault(
                    delta.index,
                    {"id": delta.id, "type": "function", "function": {"name": "", "arguments": ""}},
                )
                call["function"]["name"] += delta.function.name or ""
                call["function"]["arguments"] += delta.function.arguments or ""
    return [calls[i] for i in sorted(calls)]
