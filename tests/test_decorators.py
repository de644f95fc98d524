"""The decorators and context managers of the SDK: every kind, every function shape."""

from __future__ import annotations

import asyncio
import copy
import functools
import gc
import inspect
import pickle
import time
from collections import Counter

import pytest
from opentelemetry.trace import StatusCode

import agentscope as ags
from agentscope import attributes as A
from agentscope.sdk import _safety


def test_bare_and_named_decorators_make_spans_of_their_kind(captured):
    @ags.task
    def resolve_ticket():
        return search("refund") + plan()

    @ags.tool("search_kb")
    def search(query):
        return [query]

    @ags.step
    def plan():
        return ["plan"]

    assert resolve_ticket() == ["refund", "plan"]
    task = captured.one("resolve_ticket")
    tool = captured.one("execute_tool search_kb")
    step = captured.one("plan")
    assert captured.kind(task) == "task"
    assert task.attributes[A.TASK_NAME] == "resolve_ticket"
    assert task.attributes[A.TASK_ACCEPTED] is True
    assert captured.kind(tool) == "tool"
    assert tool.attributes[A.GEN_AI_OPERATION_NAME] == "execute_tool"
    assert tool.attributes[A.GEN_AI_TOOL_NAME] == "search_kb"
    assert captured.kind(step) == "step"
    assert tool.parent.span_id == task.context.span_id
    assert step.parent.span_id == task.context.span_id


def test_agent_llm_and_db_carry_genai_and_db_attributes(captured):
    @ags.agent("support")
    def run():
        chat("hi")
        fetch(1)

    @ags.llm(model="gpt-oss-120b", provider="groq")
    def chat(prompt):
        call = ags.current_llm()
        assert call.active
        call.usage(input_tokens=120, output_tokens=40, cached_tokens=100)
        call.server_timing(queue_ms=5.0, prefill_ms=20.0, decode_ms=300.0, total_ms=325.0)
        return "answer"

    @ags.db(system="postgresql", operation="SELECT")
    def fetch(customer_id):
        return {"id": customer_id}

    run()
    agent = captured.one("invoke_agent support")
    llm = captured.one("chat gpt-oss-120b")
    db = captured.one("SELECT postgresql")
    assert agent.attributes[A.GEN_AI_OPERATION_NAME] == "invoke_agent"
    assert agent.attributes[A.GEN_AI_AGENT_NAME] == "support"
    assert llm.attributes[A.GEN_AI_PROVIDER_NAME] == "groq"
    assert llm.attributes[A.GEN_AI_REQUEST_MODEL] == "gpt-oss-120b"
    assert llm.attributes[A.GEN_AI_USAGE_INPUT_TOKENS] == 120
    assert llm.attributes[A.GEN_AI_USAGE_OUTPUT_TOKENS] == 40
    assert llm.attributes[A.GEN_AI_USAGE_CACHED_INPUT_TOKENS] == 100
    assert llm.attributes[A.SERVER_QUEUE_MS] == 5.0
    assert llm.attributes[A.SERVER_DECODE_MS] == 300.0
    assert db.attributes[A.DB_SYSTEM_NAME] == "postgresql"
    assert db.attributes[A.DB_OPERATION_NAME] == "SELECT"
    assert A.DB_QUERY_TEXT not in db.attributes


def test_current_llm_outside_a_call_does_nothing(captured):
    call = ags.current_llm()
    assert not call.active
    call.first_token()
    call.usage(input_tokens=1)
    assert captured.spans == []


def test_async_functions_keep_their_nature_and_nest(captured):
    @ags.task
    async def outer():
        return await inner(2)

    @ags.tool
    async def inner(x):
        await asyncio.sleep(0.01)
        return x * 3

    assert inspect.iscoroutinefunction(outer)
    assert asyncio.run(outer()) == 6
    inner_span = captured.one("execute_tool inner")
    assert inner_span.parent.span_id == captured.one("outer").context.span_id
    assert inner_span.end_time - inner_span.start_time >= 10_000_000


def test_methods_staticmethods_and_classmethods(captured):
    class Agent:
        factor = 10

        @ags.tool
        def method(self, x):
            return x + 1

        @ags.tool
        @staticmethod
        def static(x):
            return x * 2

        @ags.tool
        @classmethod
        def klass(cls, x):
            return x * cls.factor

        @staticmethod
        @ags.step
        def static_outer(x):
            return -x

    agent = Agent()
    assert agent.method(1) == 2
    assert Agent.static(3) == 6
    assert agent.static(3) == 6
    assert Agent.klass(2) == 20
    assert Agent.static_outer(4) == -4
    assert captured.names() == [
        "execute_tool method",
        "execute_tool static",
        "execute_tool static",
        "execute_tool klass",
        "static_outer",
    ]


def test_generator_span_lasts_until_iteration_ends(captured):
    @ags.llm(model="m")
    def stream():
        for token in ["a", "b", "c"]:
            time.sleep(0.005)
            yield token

    gen = stream()
    assert inspect.isgenerator(gen)
    assert captured.spans == []
    assert next(gen) == "a"
    assert captured.spans == []
    assert list(gen) == ["b", "c"]
    span = captured.one("chat m")
    assert span.end_time - span.start_time >= 15_000_000
    assert span.attributes[A.STREAMED] is True
    assert span.attributes[A.STREAM_CHUNKS] == 3
    assert 0.004 < span.attributes[A.GEN_AI_RESPONSE_TTFC] < span.end_time - span.start_time
    assert span.attributes[A.STREAM_WAIT_NS] >= 15_000_000


def test_stream_wait_excludes_the_callers_time_between_chunks(captured):
    @ags.llm(model="m")
    def stream():
        yield from range(3)

    for _ in stream():
        time.sleep(0.02)
    span = captured.one("chat m")
    assert span.end_time - span.start_time >= 40_000_000
    assert span.attributes[A.STREAM_WAIT_NS] < 10_000_000


def test_generator_closed_early_or_collected_ends_its_span_once(captured):
    @ags.step
    def numbers():
        yield from range(100)

    gen = numbers()
    next(gen)
    gen.close()
    assert len(captured.spans) == 1

    gen = numbers()
    next(gen)
    del gen
    gc.collect()
    assert len(captured.spans) == 2
    assert all(s.status.status_code is StatusCode.UNSET for s in captured.spans)


def test_generator_send_throw_and_return_value_pass_through(captured):
    @ags.step
    def echo():
        received = []
        try:
            while True:
                received.append((yield len(received)))
        except KeyError:
            return received

    gen = echo()
    assert next(gen) == 0
    assert gen.send("x") == 1
    with pytest.raises(StopIteration) as stop:
        gen.throw(KeyError("done"))
    assert stop.value.value == ["x"]
    assert captured.one("echo").status.status_code is StatusCode.UNSET


def test_async_generator_span_and_asend(captured):
    @ags.llm(model="m")
    async def stream():
        got = yield "first"
        yield f"got {got}"

    async def consume():
        agen = stream()
        first = await agen.__anext__()
        second = await agen.asend("ping")
        with pytest.raises(StopAsyncIteration):
            await agen.__anext__()
        return first, second

    assert inspect.isasyncgenfunction(stream)
    assert asyncio.run(consume()) == ("first", "got ping")
    span = captured.one("chat m")
    assert span.attributes[A.STREAM_CHUNKS] == 2


def test_async_generator_closed_early(captured):
    @ags.step
    async def ticks():
        for i in range(100):
            await asyncio.sleep(0)
            yield i

    async def consume():
        async for i in ticks():
            if i == 2:
                break

    asyncio.run(consume())
    assert len(captured.spans) == 1


def test_context_managers_span_queue_backoff(captured):
    with ags.span("plan", kind="step", **{"plan.size": 3}) as s:
        s.set_attribute("plan.ok", True)
        with ags.queue("rate_limiter"):
            time.sleep(0.002)
        with ags.backoff(0.5, attempt=2):
            pass
    plan = captured.one("plan")
    queue = captured.one("queue rate_limiter")
    backoff = captured.one("backoff")
    assert plan.attributes["plan.size"] == 3 and plan.attributes["plan.ok"] is True
    assert captured.kind(queue) == "queue" and queue.attributes[A.QUEUE_NAME] == "rate_limiter"
    assert captured.kind(backoff) == "backoff"
    assert backoff.attributes[A.BACKOFF_PLANNED_S] == 0.5 and backoff.attributes[A.ATTEMPT] == 2
    assert queue.parent.span_id == plan.context.span_id


def test_async_with_span(captured):
    async def main():
        async with ags.span("wait", kind="queue"):
            await asyncio.sleep(0.001)

    asyncio.run(main())
    assert captured.kind(captured.one("wait")) == "queue"


def test_accept_marks_the_task_and_errors_reject_it(captured):
    @ags.task
    def rejected():
        ags.accept(False)

    @ags.task
    def failing():
        raise ValueError("boom")

    rejected()
    with pytest.raises(ValueError):
        failing()
    assert captured.one("rejected").attributes[A.TASK_ACCEPTED] is False
    assert captured.one("failing").attributes[A.TASK_ACCEPTED] is False


def test_span_times_are_monotonic_and_nested(captured):
    @ags.task
    def outer():
        inner()

    @ags.step
    def inner():
        time.sleep(0.003)

    outer()
    o, i = captured.one("outer"), captured.one("inner")
    assert o.start_time <= i.start_time < i.end_time <= o.end_time
    assert abs(o.start_time - time.time_ns()) < 60e9


def test_rate_limiter_waits_are_queue_spans(captured):
    limiter = ags.RateLimiter(rate=50, burst=2, name="billing_api")
    started = time.perf_counter()
    for _ in range(6):
        with limiter:
            pass
    assert time.perf_counter() - started >= 4 / 50 * 0.9
    waits = [s for s in captured.spans if s.name == "queue billing_api"]
    assert len(waits) == 4 and all(captured.kind(s) == "queue" for s in waits)

    async def main():
        async with limiter:
            pass

    asyncio.run(main())
    with pytest.raises(ValueError):
        ags.RateLimiter(rate=0)


@ags.tool("pickled_tool")
def pickled_tool(x: int) -> int:
    return x + 1


class Desk:
    """A class whose decorated methods are pickled and copied as plain ones are."""

    def __init__(self, base: int) -> None:
        self.base = base

    @ags.tool
    def add(self, x: int) -> int:
        return self.base + x

    @ags.tool
    @staticmethod
    def double(x: int) -> int:
        return 2 * x

    @ags.tool
    @classmethod
    def named(cls, x: int) -> str:
        return f"{cls.__name__}:{x}"


@pytest.mark.parametrize(
    ("get", "args", "expected"),
    [
        (lambda: pickled_tool, (1,), 2),
        (lambda: Desk(10).add, (1,), 11),
        (lambda: Desk.add, (Desk(20), 1), 21),
        (lambda: Desk.double, (4,), 8),
        (lambda: Desk(0).double, (5,), 10),
        (lambda: Desk.named, (1,), "Desk:1"),
        (lambda: Desk(0).named, (2,), "Desk:2"),
    ],
    ids=[
        "function",
        "method",
        "unbound",
        "static",
        "static-on-instance",
        "classmethod",
        "classmethod-on-instance",
    ],
)
def test_decorated_functions_pickle_and_copy_as_plain_ones_do(get, args, expected, captured):
    """multiprocessing pickles the function a child runs (Pool.map, ProcessPoolExecutor.submit), and
    configurations holding callables get deep-copied: both failed on wrapt's proxy."""
    decorated = get()
    for clone in (pickle.loads(pickle.dumps(decorated)), copy.copy(decorated), copy.deepcopy(decorated)):
        assert clone(*args) == expected
    assert pickle.loads(pickle.dumps(pickled_tool)) is pickled_tool
    assert copy.deepcopy(pickled_tool) is pickled_tool
    method = Desk(1).add
    assert copy.deepcopy(method).__self__ is not method.__self__  # as a plain method's deep copy
    assert [captured.kind(span) for span in captured.spans] == ["tool"] * 3  # each clone still traced


class Scorer:
    """A callable object, as frameworks hand tools around."""

    def __call__(self, x: int) -> int:
        return 3 * x


class AsyncScorer:
    """A callable object whose call is a coroutine."""

    async def __call__(self, x: int) -> int:
        await asyncio.sleep(0.02)
        return 4 * x


async def _add(x: int, y: int) -> int:
    await asyncio.sleep(0.02)
    return x + y


def test_partials_and_callable_objects_are_decorated_and_named_by_what_they_call(captured):
    """A ``functools.partial`` or a callable object has no ``__name__``: decorating one raised
    AttributeError in the user's program; an object whose call is a coroutine got a span that ended
    before the coroutine ran."""
    assert ags.tool(functools.partial(pow, 2))(5) == 32
    assert ags.tool(Scorer())(2) == 6
    assert ags.tool("scaled")(functools.partial(functools.partial(pow, 2), 3))() == 8
    assert asyncio.run(ags.tool(functools.partial(_add, 1))(2)) == 3
    assert asyncio.run(ags.tool(AsyncScorer())(2)) == 8
    assert captured.names() == [
        "execute_tool pow",
        "execute_tool Scorer",
        "execute_tool scaled",
        "execute_tool _add",
        "execute_tool AsyncScorer",
    ]
    for awaited in (captured.one("execute_tool _add"), captured.one("execute_tool AsyncScorer")):
        assert awaited.end_time - awaited.start_time >= 15_000_000  # the span covers the await


def test_usage_and_server_timings_that_are_not_counts_or_durations_are_left_out_and_said(
    captured, caplog, monkeypatch
):
    """A negative prefill made the analysis blame the whole call on the network; a count of "many" was
    stored as text. Each is left out, the rest kept, and the logger says so once."""

    @ags.llm(model="gpt-oss-120b")
    def chat() -> None:
        call = ags.current_llm()
        call.usage(input_tokens=-5, output_tokens="many", cached_tokens=3.0)
        call.server_timing(queue_ms=float("nan"), prefill_ms=-3, decode_ms=12.5, total_ms=True)

    monkeypatch.setattr(_safety, "_counts", Counter())  # each place's first failure is the one logged
    with caplog.at_level("WARNING", logger="agentscope"):
        chat()
    attributes = captured.one("chat gpt-oss-120b").attributes
    assert attributes[A.GEN_AI_USAGE_CACHED_INPUT_TOKENS] == 3
    assert A.GEN_AI_USAGE_INPUT_TOKENS not in attributes and A.GEN_AI_USAGE_OUTPUT_TOKENS not in attributes
    assert attributes[A.SERVER_DECODE_MS] == 12.5
    assert not {A.SERVER_QUEUE_MS, A.SERVER_PREFILL_MS, A.SERVER_TOTAL_MS} & set(attributes)
    said = " ".join(record.getMessage() for record in caplog.records)
    assert "input_tokens must be a whole number ≥ 0, not -5; left out" in said
    assert "queue_ms must be a finite number ≥ 0, not nan; left out" in said
