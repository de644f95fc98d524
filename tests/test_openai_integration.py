"""The openai integration, driving the real openai SDK against the simulated provider."""

from __future__ import annotations

import asyncio
import gc
from collections import Counter

import openai
import pydantic
import pytest
from agentscope.integrations.openai import OpenAIInstrumentor

import agentscope as ags
from agentscope import attributes as A
from agentscope.analysis.pipeline import blame_store
from agentscope.sim import Profile, SimServer
from agentscope.store import Store

MESSAGES = [{"role": "user", "content": "where is my refund"}]


@pytest.fixture
def instrumented(captured):
    instrumentor = OpenAIInstrumentor()
    assert instrumentor.instrument()
    yield captured
    instrumentor.uninstrument()


@pytest.fixture
def sim():
    server = SimServer(Profile(queue_ms=10, prefill_ms=30, tokens_per_s=400, output_tokens=8)).start()
    yield server
    server.stop()


def llm_spans(captured):
    return [s for s in captured.spans if captured.kind(s) == "llm"]


def test_non_streamed_call_has_usage_and_groq_timings(instrumented, sim):
    client = openai.OpenAI(base_url=sim.base_url, api_key="sk-secret")
    client.chat.completions.create(model="gpt-oss-120b", messages=MESSAGES)
    (span,) = llm_spans(instrumented)
    a = span.attributes
    assert span.name == "chat gpt-oss-120b"
    assert a[A.GEN_AI_REQUEST_MODEL] == "gpt-oss-120b" and a[A.GEN_AI_RESPONSE_MODEL] == "gpt-oss-120b"
    assert a[A.GEN_AI_PROVIDER_NAME] == "local"
    assert a[A.GEN_AI_USAGE_OUTPUT_TOKENS] == 8 and a[A.GEN_AI_USAGE_INPUT_TOKENS] > 0
    assert a[A.SERVER_QUEUE_MS] == pytest.approx(10) and a[A.SERVER_PREFILL_MS] == pytest.approx(30)
    assert a[A.SERVER_DECODE_MS] == pytest.approx(8 / 400 * 1000)
    assert (span.end_time - span.start_time) / 1e6 >= 10 + 30 + 20
    assert "sk-secret" not in repr(dict(a))
    _, trace_id, parent_id, _ = sim.seen_headers[-1]["traceparent"].split("-")
    assert (trace_id, parent_id) == (
        format(span.context.trace_id, "032x"),
        format(span.context.span_id, "016x"),
    )


def test_a_public_api_is_sent_no_trace_context(instrumented, sim):
    """A public API records no spans a caller could join: it gets no ``traceparent`` (nor the trace ids
    in it), while a self-hosted server on any other host does."""
    import httpx2

    class ToSim(httpx2.HTTPTransport):
        def handle_request(self, request: httpx2.Request) -> httpx2.Response:
            request.url = request.url.copy_with(scheme="http", host="127.0.0.1", port=sim.port)
            return super().handle_request(request)

    for base_url in ("https://api.openai.com/v1", "https://vllm.internal.example/v1"):
        client = openai.OpenAI(base_url=base_url, api_key="k", http_client=httpx2.Client(transport=ToSim()))
        client.chat.completions.create(model="m", messages=MESSAGES)
    public, own = llm_spans(instrumented)
    assert public.attributes[A.GEN_AI_PROVIDER_NAME] == "openai" and public.attributes[A.SERVER_QUEUE_MS] > 0
    assert own.attributes[A.GEN_AI_PROVIDER_NAME] == "vllm.internal.example"
    sent_public, sent_own = sim.seen_headers[-2:]
    assert "traceparent" not in sent_public and "tracestate" not in sent_public
    assert sent_own["traceparent"].split("-")[2] == format(own.context.span_id, "016x")


@pytest.mark.parametrize(
    ("base_url", "provider"),
    [
        ("https://contoso.openai.azure.com/openai/v1", "azure.ai.openai"),
        ("https://contoso.services.ai.azure.com/openai/v1", "azure.ai.inference"),
        ("https://bedrock-runtime.us-west-2.amazonaws.com/openai/v1", "aws.bedrock"),
        ("https://us-central1-aiplatform.googleapis.com/v1/projects/p/endpoints/openapi", "gcp.vertex_ai"),
        ("https://api.mistral.ai/v1", "mistral_ai"),
        ("https://api.x.ai/v1", "x_ai"),
    ],
)
def test_cloud_apis_served_per_account_or_region_are_public(instrumented, sim, base_url, provider):
    """An API on a host per account or region (Azure, Bedrock, Vertex) or of another public provider is
    named by its GenAI provider and sent no ``traceparent``, like api.openai.com."""
    import httpx2

    class ToSim(httpx2.HTTPTransport):
        def handle_request(self, request: httpx2.Request) -> httpx2.Response:
            request.url = request.url.copy_with(
                scheme="http", host="127.0.0.1", port=sim.port, path="/v1/chat/completions"
            )
            return super().handle_request(request)

    client = openai.OpenAI(base_url=base_url, api_key="k", http_client=httpx2.Client(transport=ToSim()))
    client.chat.completions.create(model="m", messages=MESSAGES)
    (span,) = llm_spans(instrumented)
    assert span.attributes[A.GEN_AI_PROVIDER_NAME] == provider
    assert "traceparent" not in sim.seen_headers[-1]


def test_the_provider_follows_a_base_url_replaced_on_the_client(instrumented, sim):
    from agentscope.integrations.openai import set_provider

    client = openai.OpenAI(base_url=sim.base_url, api_key="k")
    client.chat.completions.create(model="m", messages=MESSAGES)
    client.base_url = sim.base_url.replace("127.0.0.1", "localhost")
    client.chat.completions.create(model="m", messages=MESSAGES)
    set_provider(client, "our-gateway")
    client.chat.completions.create(model="m", messages=MESSAGES)
    other = openai.OpenAI(base_url=sim.base_url, api_key="k")
    other.chat.completions.create(model="m", messages=MESSAGES)
    providers = [s.attributes[A.GEN_AI_PROVIDER_NAME] for s in llm_spans(instrumented)]
    assert providers == ["local", "local", "our-gateway", "local"]


@pytest.mark.parametrize(
    "headers, expected",
    [
        ({"OpenAI-Processing-Ms": "17"}, {A.SERVER_TOTAL_MS: 17.0}),
        (
            {"openai-processing-ms": "17", "X-Queue-Time": "4", "x-inference-time": "9"},
            {A.SERVER_QUEUE_MS: 4.0, A.SERVER_TOTAL_MS: 9.0},
        ),
        ({"server": "uvicorn"}, {}),
    ],
)
def test_timing_headers_are_read_whatever_their_case(headers, expected):
    """An SDK's headers are read as one dict of their raw list, so the names' case must not matter;
    TGI's headers win over ``openai-processing-ms``, as in a search of each name."""
    import httpx
    from agentscope.integrations._llm import response_attributes

    got = response_attributes({"model": "m"}, httpx.Response(200, headers=headers).headers)
    assert {k: v for k, v in got.items() if k != A.GEN_AI_RESPONSE_MODEL} == expected
    lower = {key.lower(): value for key, value in headers.items()}
    assert {k: v for k, v in response_attributes({}, lower).items()} == expected


def test_openai_processing_ms_header_is_total_server_time(instrumented):
    server = SimServer(Profile(queue_ms=0, prefill_ms=20, tokens_per_s=1000, timings="openai")).start()
    try:
        client = openai.OpenAI(base_url=server.base_url, api_key="k")
        raw = client.chat.completions.with_raw_response.create(model="m", messages=MESSAGES)
        assert raw.parse().usage.completion_tokens == 40
    finally:
        server.stop()
    (span,) = llm_spans(instrumented)
    assert span.attributes[A.SERVER_TOTAL_MS] >= 20
    assert A.SERVER_PREFILL_MS not in span.attributes
    assert span.attributes[A.GEN_AI_USAGE_OUTPUT_TOKENS] == 40


SERVER_MS = (A.SERVER_QUEUE_MS, A.SERVER_PREFILL_MS, A.SERVER_DECODE_MS, A.SERVER_TOTAL_MS)
DIALECTS = {  # what each provider dialect reports for queue 10 ms, prefill 30 ms, 8 tokens at 400/s
    "groq": (10, 30, 20, None),
    "cerebras": (10, 30, 20, None),
    "vllm": (10, 30, 20, None),
    "llamacpp": (None, 30, 20, None),
    "ollama": (10, 30, 20, None),
    "tgi": (10, None, None, 50),
    "none": (None, None, None, None),
}


@pytest.mark.parametrize("stream", [False, True], ids=["call", "stream"])
@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_server_timings_in_every_provider_dialect(instrumented, dialect, stream):
    profile = Profile(queue_ms=10, prefill_ms=30, tokens_per_s=400, output_tokens=8, timings=dialect)
    server = SimServer(profile).start()
    try:
        client = openai.OpenAI(base_url=server.base_url, api_key="k")
        if stream:
            for _ in client.chat.completions.create(model="m", messages=MESSAGES, stream=True):
                pass
        else:
            client.chat.completions.create(model="m", messages=MESSAGES)
    finally:
        server.stop()
    (span,) = llm_spans(instrumented)
    if stream:  # the stream was only referred to by the loop: its span must not end before the loop does
        assert span.attributes[A.STREAM_CHUNKS] == 8 + 2
    no_headers = stream and dialect == "tgi"  # TGI sends no timing headers on streams
    expected = (None,) * 4 if no_headers else DIALECTS[dialect]
    for key, value in zip(SERVER_MS, expected):
        if value is None:
            assert key not in span.attributes, (dialect, key)
        else:
            assert span.attributes[key] == pytest.approx(value, abs=1), (dialect, key)


def test_stream_time_to_first_content_chunk_and_usage(instrumented, sim):
    client = openai.OpenAI(base_url=sim.base_url, api_key="k")
    stream = client.chat.completions.create(
        model="gpt-oss-120b", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    assert llm_spans(instrumented) == []
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text.startswith("the agent")
    (span,) = llm_spans(instrumented)
    a = span.attributes
    assert a[A.STREAMED] is True and a[A.STREAM_CHUNKS] == 8 + 3
    assert 0.035 <= a[A.GEN_AI_RESPONSE_TTFC] < (span.end_time - span.start_time) / 1e9
    assert a[A.GEN_AI_USAGE_OUTPUT_TOKENS] == 8 and a[A.SERVER_PREFILL_MS] == pytest.approx(30)
    assert a[A.STREAM_WAIT_NS] <= span.end_time - span.start_time


def test_next_then_a_loop_read_one_stream_and_end_its_span_once(instrumented, sim):
    client = openai.OpenAI(base_url=sim.base_url, api_key="k")
    stream = client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    first, second = next(stream), next(stream)
    rest = list(stream)
    assert first.choices[0].delta.role == "assistant" and second.choices[0].delta.content
    assert len(rest) == 8
    with pytest.raises(StopIteration):
        next(stream)
    (span,) = llm_spans(instrumented)
    assert span.attributes[A.STREAM_CHUNKS] == 8 + 2
    assert span.attributes[A.GEN_AI_RESPONSE_TTFC] > 0


@pytest.mark.parametrize("how", ["close", "with", "gc"])
def test_stream_closed_early_ends_its_span_once(instrumented, sim, how):
    client = openai.OpenAI(base_url=sim.base_url, api_key="k")
    stream = client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    if how == "with":
        with stream:
            for _ in stream:
                break
    else:
        for _ in stream:
            break
        if how == "close":
            stream.close()
            stream.close()
        else:
            del stream
            gc.collect()
    (span,) = llm_spans(instrumented)
    assert span.attributes[A.STREAM_CHUNKS] == 1


@pytest.mark.parametrize("early", [False, True], ids=["read", "left early"])
def test_the_stream_helper_makes_one_span_ended_when_its_block_exits(instrumented, sim, early):
    client = openai.OpenAI(base_url=sim.base_url, api_key="k")
    with client.chat.completions.stream(model="m", messages=MESSAGES) as stream:
        for event in stream:
            if early and event.type == "content.delta":
                break
    left = ags.sdk.clock.now_ns()
    (span,) = llm_spans(instrumented)
    assert span.end_time <= left
    assert span.attributes[A.STREAMED] is True
    if early:
        assert span.attributes[A.STREAM_CHUNKS] <= 2
    else:
        assert span.attributes[A.STREAM_CHUNKS] == 8 + 2
        assert span.attributes[A.SERVER_DECODE_MS] == pytest.approx(20)


@pytest.mark.parametrize("early", [False, True], ids=["read", "left early"])
def test_the_async_stream_helper_makes_one_span(instrumented, sim, early):
    async def run() -> int:
        client = openai.AsyncOpenAI(base_url=sim.base_url, api_key="k")
        async with client.chat.completions.stream(model="m", messages=MESSAGES) as stream:
            async for event in stream:
                if early and event.type == "content.delta":
                    break
        return ags.sdk.clock.now_ns()

    left = asyncio.run(run())
    (span,) = llm_spans(instrumented)
    assert span.end_time <= left
    assert span.attributes[A.STREAM_CHUNKS] <= 2 if early else span.attributes[A.STREAM_CHUNKS] == 8 + 2


@pytest.mark.parametrize("how", ["call", "stream", "helper", "async"])
def test_responses_api_call_stream_and_helper(instrumented, how):
    profile = Profile(queue_ms=10, prefill_ms=30, tokens_per_s=400, output_tokens=8, timings="vllm")
    server = SimServer(profile).start()
    try:
        client = openai.OpenAI(base_url=server.base_url, api_key="k")
        if how == "call":
            assert client.responses.create(model="gpt-5", input="hi").output_text.startswith("the agent")
        elif how == "stream":
            deltas = [e for e in client.responses.create(model="gpt-5", input="hi", stream=True)]
            assert sum(e.type == "response.output_text.delta" for e in deltas) == 8
        elif how == "helper":
            with client.responses.stream(model="gpt-5", input="hi") as stream:
                assert stream.get_final_response().output_text.startswith("the agent")
        else:
            aclient = openai.AsyncOpenAI(base_url=server.base_url, api_key="k")
            asyncio.run(aclient.responses.create(model="gpt-5", input="hi"))
    finally:
        server.stop()
    (span,) = llm_spans(instrumented)
    a = span.attributes
    assert a[A.GEN_AI_REQUEST_MODEL] == "gpt-5" and a[A.GEN_AI_USAGE_OUTPUT_TOKENS] == 8
    assert a[A.GEN_AI_USAGE_CACHED_INPUT_TOKENS] == 0
    assert (a[A.SERVER_QUEUE_MS], a[A.SERVER_PREFILL_MS]) == (pytest.approx(10), pytest.approx(30))
    if how in ("stream", "helper"):
        assert 0.035 <= a[A.GEN_AI_RESPONSE_TTFC] < (span.end_time - span.start_time) / 1e9


class Answer(pydantic.BaseModel):
    text: str
    words: int


@pytest.fixture
def vllm():
    """The simulated provider reporting vLLM's timings in every API's body."""
    server = SimServer(Profile(queue_ms=10, prefill_ms=30, tokens_per_s=400, output_tokens=8, timings="vllm"))
    yield server.start()
    server.stop()


def test_structured_outputs_text_completions_and_embeddings_are_calls(instrumented, vllm):
    """``parse`` (structured outputs) posts without ``create``; the beta Responses API, the legacy
    Completions API and embeddings are calls of their own: each is one llm span with its operation, usage
    and timings."""
    client = openai.OpenAI(base_url=vllm.base_url, api_key="k")
    parsed = client.chat.completions.parse(model="p", messages=MESSAGES, response_format=Answer)
    assert parsed.choices[0].message.parsed.words == 8
    raw = client.chat.completions.with_raw_response.parse(
        model="raw", messages=MESSAGES, response_format=Answer
    )
    assert raw.parse().choices[0].message.parsed.words == 8
    assert client.responses.parse(model="r", input="hi", text_format=Answer).output_parsed.words == 8
    assert client.beta.responses.create(model="beta", input="hi").status == "completed"
    assert client.completions.create(model="legacy", prompt="say hi").choices[0].text.startswith("the agent")
    usage = {"include_usage": True}
    chunks = list(
        client.completions.create(model="legacy-stream", prompt="hi", stream=True, stream_options=usage)
    )
    assert "".join(c.choices[0].text for c in chunks if c.choices).startswith("the agent")
    assert len(client.embeddings.create(model="emb", input=["a b c", "d e"]).data) == 2

    async def main() -> None:
        aclient = openai.AsyncOpenAI(base_url=vllm.base_url, api_key="k")
        await aclient.chat.completions.parse(model="async-p", messages=MESSAGES, response_format=Answer)
        await aclient.embeddings.create(model="async-emb", input="a")

    asyncio.run(main())
    spans = {s.attributes[A.GEN_AI_REQUEST_MODEL]: s for s in llm_spans(instrumented)}
    assert list(spans) == ["p", "raw", "r", "beta", "legacy", "legacy-stream", "emb", "async-p", "async-emb"]
    operations = {model: span.attributes[A.GEN_AI_OPERATION_NAME] for model, span in spans.items()}
    assert operations == {
        **dict.fromkeys(("p", "raw", "r", "beta", "async-p"), "chat"),
        **dict.fromkeys(("legacy", "legacy-stream"), "text_completion"),
        **dict.fromkeys(("emb", "async-emb"), "embeddings"),
    }
    for model, span in spans.items():
        a = span.attributes
        assert a[A.GEN_AI_USAGE_INPUT_TOKENS] > 0 and a[A.SERVER_QUEUE_MS] == pytest.approx(10), model
        assert a.get(A.GEN_AI_USAGE_OUTPUT_TOKENS) == (None if "emb" in model else 8), model
    streamed = spans["legacy-stream"].attributes
    assert streamed[A.STREAM_CHUNKS] == len(chunks) and streamed[A.GEN_AI_RESPONSE_TTFC] >= 0.035


def test_langchain_structured_output_is_a_call(instrumented, sim):
    """LangChain's ``with_structured_output`` calls ``chat.completions.with_raw_response.parse``."""
    langchain_openai = pytest.importorskip("langchain_openai")
    model = langchain_openai.ChatOpenAI(model="structured", base_url=sim.base_url, api_key="k")
    assert model.with_structured_output(Answer).invoke("hi").words == 8
    (span,) = llm_spans(instrumented)
    assert span.attributes[A.GEN_AI_REQUEST_MODEL] == "structured"
    assert span.attributes[A.GEN_AI_USAGE_OUTPUT_TOKENS] == 8


def test_exception_from_the_sdk_is_unchanged_and_recorded(instrumented):
    server = SimServer(Profile(error_rate=1.0)).start()
    try:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(model="m", messages=MESSAGES)
    finally:
        server.stop()
    (span,) = llm_spans(instrumented)
    assert span.status.status_code.name == "ERROR"
    assert span.attributes[A.ERROR_TYPE] == "InternalServerError"


def tasks_into_store(store, profile: Profile, tasks: int, **client_options) -> tuple[list[tuple], dict]:
    """Run ``tasks`` one-call tasks against a simulated provider into ``store``; its spans and blame."""
    server = SimServer(profile).start()
    instrumentor = OpenAIInstrumentor()
    ags.init(store=store, instrument=False)
    instrumentor.instrument()
    try:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", **client_options)

        @ags.task
        def ask():
            client.chat.completions.create(model="gpt-oss-120b", messages=MESSAGES)

        for _ in range(tasks):
            ask()
    finally:
        instrumentor.uninstrument()
        ags.shutdown()
        server.stop()
    with Store(store, read_only=True) as opened:
        spans = opened.con.execute("SELECT span_id, parent_id, kind, span_kind, name FROM spans").fetchall()
        return spans, blame_store(opened)


def test_429_then_success_shows_failed_attempts_and_backoff_in_blame(tmp_path):
    profile = Profile(queue_ms=5, prefill_ms=20, rate_limit_rate=0.4, retry_after_ms=40, seed=7)
    spans, report = tasks_into_store(tmp_path / "retries.duckdb", profile, 10, max_retries=10)
    kinds = Counter(kind for _, _, kind, _, _ in spans)
    assert kinds["llm"] == 10 and kinds["http"] >= 3 and kinds["backoff"] == kinds["http"]
    mean = {row["category"]: row for row in report["mean"]}
    assert mean["retry"]["components"]["failed"] > 0
    assert mean["retry"]["components"]["backoff"] >= 40 * kinds["backoff"] / 10 * 0.9
    assert mean["inference"]["components"]["prefill"] == pytest.approx(20, rel=0.05)
    assert mean["queue"]["components"]["provider"] == pytest.approx(5, rel=0.05)


def test_exactly_one_429_per_call_is_a_failed_attempt_and_backoff(tmp_path):
    """The most common retry: one 429, the SDK sleeps for retry-after-ms, the second attempt succeeds.

    Only the failed attempt has a span of its own; its time is retry.failed, the sleep
    retry.backoff, and the call's provider timings stay exactly the successful attempt's.
    """
    profile = Profile(
        queue_ms=5, prefill_ms=40, tokens_per_s=400, output_tokens=8, rate_limit_first=True, retry_after_ms=30
    )
    spans, report = tasks_into_store(tmp_path / "one429.duckdb", profile, 5)
    kinds = Counter(kind for _, _, kind, _, _ in spans)
    assert kinds["llm"] == 5 and kinds["http"] == 5 and kinds["backoff"] == 5
    mean = {row["category"]: row for row in report["mean"]}
    failed = mean["retry"]["components"]["failed"]
    assert 0 < failed < 30  # a loopback 429: milliseconds, not the call
    assert mean["retry"]["components"]["backoff"] == pytest.approx(30, rel=0.25)
    assert mean["inference"]["components"]["prefill"] == pytest.approx(40, rel=0.05)
    assert mean["inference"]["components"]["decode"] == pytest.approx(20, rel=0.05)
    assert mean["queue"]["components"]["provider"] == pytest.approx(5, rel=0.05)


def test_a_provider_tracing_its_requests_joins_the_call_and_gives_its_timings(tmp_path):
    profile = Profile(
        queue_ms=10, prefill_ms=30, tokens_per_s=400, output_tokens=8, timings="none", traced=True
    )
    spans, report = tasks_into_store(tmp_path / "joined.duckdb", profile, 3)
    calls = {span_id for span_id, _, kind, span_kind, _ in spans if kind == "llm" and span_kind != "SERVER"}
    served = [(parent, kind) for _, parent, kind, span_kind, name in spans if name == "llm_request"]
    assert len(calls) == 3 and len(served) == 3
    assert all(parent in calls and kind == "llm" for parent, kind in served)  # joined under each call
    mean = {row["category"]: row for row in report["mean"]}
    assert mean["queue"]["components"]["provider"] == pytest.approx(10, rel=0.05)
    assert mean["inference"]["components"]["prefill"] == pytest.approx(30, rel=0.05)
    assert mean["inference"]["components"]["decode"] == pytest.approx(20, rel=0.05)
    assert mean["inference"]["components"].get("unsplit", 0) == 0
    assert report["serial_llm_calls"]["p95"] == 1


def test_async_client_stream_and_call(instrumented, sim):
    async def main():
        client = openai.AsyncOpenAI(base_url=sim.base_url, api_key="k")
        await client.chat.completions.create(model="m", messages=MESSAGES)
        stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        return [chunk async for chunk in stream]

    chunks = asyncio.run(main())
    assert len(chunks) == 8 + 2
    spans = llm_spans(instrumented)
    assert len(spans) == 2
    assert spans[1].attributes[A.STREAMED] is True and spans[1].attributes[A.GEN_AI_RESPONSE_TTFC] > 0.03


@pytest.mark.parametrize("how", ["close", "with", "dropped"])
def test_async_stream_left_early_ends_its_span_once(instrumented, sim, how):
    async def main():
        client = openai.AsyncOpenAI(base_url=sim.base_url, api_key="k")
        stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        if how == "with":
            async with stream:
                async for _ in stream:
                    break
        else:
            async for _ in stream:
                break
            if how == "close":
                await stream.close()
                await stream.close()
            else:
                del stream
                gc.collect()

    asyncio.run(main())
    (span,) = llm_spans(instrumented)
    assert span.attributes[A.STREAM_CHUNKS] == 1


def test_anext_then_an_async_loop_read_one_stream_and_end_its_span_once(instrumented, sim):
    async def main():
        client = openai.AsyncOpenAI(base_url=sim.base_url, api_key="k")
        stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        first, second = await anext(stream), await stream.__anext__()
        rest = [chunk async for chunk in stream]
        with pytest.raises(StopAsyncIteration):
            await anext(stream)
        return first, second, rest

    first, second, rest = asyncio.run(main())
    assert first.choices[0].delta.role == "assistant" and second.choices[0].delta.content
    assert len(rest) == 8
    (span,) = llm_spans(instrumented)
    assert span.attributes[A.STREAM_CHUNKS] == 8 + 2
    assert span.attributes[A.GEN_AI_RESPONSE_TTFC] > 0


RAW_FORMS = ("raw parse", "streaming parse", "streaming lines", "async raw parse", "async streaming parse")


def _read_raw_form(client: openai.OpenAI, aclient: openai.AsyncOpenAI, form: str) -> int:
    """A streamed call made through a raw-response form, read as that form is read; the chunks or
    lines read."""
    kwargs = {"model": "m", "messages": MESSAGES, "stream": True, "stream_options": {"include_usage": True}}
    if form == "raw parse":  # the raw response is dropped as soon as it is parsed
        return len(list(client.chat.completions.with_raw_response.create(**kwargs).parse()))
    if form == "streaming parse":
        with client.chat.completions.with_streaming_response.create(**kwargs) as response:
            return len(list(response.parse()))
    if form == "streaming lines":
        with client.chat.completions.with_streaming_response.create(**kwargs) as response:
            return sum(1 for line in response.iter_lines() if line.startswith("data: {"))

    async def read() -> int:
        if form == "async raw parse":
            raw = await aclient.chat.completions.with_raw_response.create(**kwargs)
            return len([chunk async for chunk in raw.parse()])
        async with aclient.chat.completions.with_streaming_response.create(**kwargs) as response:
            return len([chunk async for chunk in await response.parse()])

    return asyncio.run(read())


@pytest.mark.parametrize("form", RAW_FORMS)
def test_a_stream_read_through_its_raw_response_is_one_call_until_its_last_chunk(instrumented, form):
    """``with_raw_response`` and ``with_streaming_response`` hand back the response, not the stream: the
    call lasts until the stream parsed from it ends (first token and usage read from it), or, read as
    raw lines, until the response is closed."""
    server = SimServer(Profile(queue_ms=10, prefill_ms=30, tokens_per_s=100, output_tokens=8)).start()
    try:
        client = openai.OpenAI(base_url=server.base_url, api_key="k")
        aclient = openai.AsyncOpenAI(base_url=server.base_url, api_key="k")
        assert _read_raw_form(client, aclient, form) == 8 + 3
    finally:
        server.stop()
    (span,) = llm_spans(instrumented)
    a = span.attributes
    assert (span.end_time - span.start_time) / 1e6 >= 10 + 30 + 80  # the decode's 80 ms included
    if form == "streaming lines":  # no chunk seen: a call whose span is the call, as if not streamed
        assert A.STREAMED not in a and A.GEN_AI_RESPONSE_TTFC not in a
    else:
        assert a[A.STREAMED] is True and a[A.STREAM_CHUNKS] == 8 + 3
        assert 0.035 <= a[A.GEN_AI_RESPONSE_TTFC] < (span.end_time - span.start_time) / 1e9
        assert a[A.GEN_AI_USAGE_OUTPUT_TOKENS] == 8


def test_uninstrument_restores_the_sdk(captured, sim):
    from openai._base_client import SyncAPIClient
    from openai.resources.chat.completions import Completions

    original = Completions.create
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument()
    assert Completions.create is not original
    openai.OpenAI(base_url=sim.base_url, api_key="k").chat.completions.create(model="m", messages=MESSAGES)
    assert len(captured.spans) == 1
    assert not hasattr(SyncAPIClient.__dict__["_process_response"], "__wrapped__")  # no peer: left alone
    instrumentor.uninstrument()
    assert Completions.create is original
    openai.OpenAI(base_url=sim.base_url, api_key="k").chat.completions.create(model="m", messages=MESSAGES)
    assert len(captured.spans) == 1


def test_a_peer_instrumentors_span_is_enriched_not_duplicated(instrumented, sim):
    from openinference.instrumentation.openai import OpenAIInstrumentor as Peer
    from opentelemetry import trace

    peer = Peer()
    peer.instrument(tracer_provider=trace.get_tracer_provider())
    try:
        openai.OpenAI(base_url=sim.base_url, api_key="k").chat.completions.create(
            model="gpt-oss-120b", messages=MESSAGES
        )
    finally:
        peer.uninstrument()
    llm = [s for s in instrumented.spans if instrumented.kind(s) == "llm"]
    assert len(llm) == 1
    assert llm[0].attributes.get("openinference.span.kind") == "LLM"
    assert llm[0].attributes["llm.token_count.completion"] == 8


def test_a_peer_span_current_around_a_stream_gets_its_first_token_and_usage(instrumented, sim):
    """A peer that makes its span current around the call but leaves the stream alone (as a wrapper
    around ``create`` does): agentscope records no span of its own, and marks the stream on the peer's."""
    from opentelemetry import trace

    tracer = trace.get_tracer("openinference.instrumentation.openai")
    client = openai.OpenAI(base_url=sim.base_url, api_key="k")
    peer_kind = {"openinference.span.kind": "LLM"}
    with tracer.start_as_current_span("ChatCompletion", attributes=peer_kind) as peer:
        stream = client.chat.completions.create(
            model="gpt-oss-120b", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        )
        chunks = sum(1 for _ in stream)
    (llm,) = llm_spans(instrumented)
    assert llm.context.span_id == peer.get_span_context().span_id
    a = llm.attributes
    assert a[A.GEN_AI_RESPONSE_TTFC] * 1000 >= 10 + 30  # the provider's queue and prefill
    assert a[A.GEN_AI_RESPONSE_TTFC] < (llm.end_time - llm.start_time) / 1e9
    assert a[A.STREAMED] is True and a[A.STREAM_CHUNKS] <= chunks
    assert a[A.GEN_AI_USAGE_OUTPUT_TOKENS] == 8


def test_a_peer_span_ended_before_its_stream_is_read_is_left_alone(instrumented, sim, caplog):
    from opentelemetry import trace

    tracer = trace.get_tracer("openinference.instrumentation.openai")
    client = openai.OpenAI(base_url=sim.base_url, api_key="k")
    with tracer.start_as_current_span("ChatCompletion", attributes={"openinference.span.kind": "LLM"}):
        stream = client.chat.completions.create(model="gpt-oss-120b", messages=MESSAGES, stream=True)
    assert sum(1 for _ in stream) > 0
    (llm,) = llm_spans(instrumented)
    assert A.GEN_AI_RESPONSE_TTFC not in llm.attributes and A.STREAMED not in llm.attributes
    assert not [r for r in caplog.records if "ended span" in r.getMessage()]  # the SDK's complaint


@pytest.mark.parametrize("case", ["plain", "trace state", "baggage", "trace context alone"])
def test_propagation_headers_are_the_configured_propagators(case, captured):
    """The direct format of OpenTelemetry's default propagators gives what the propagators give."""
    from agentscope.integrations._stainless import trace_headers
    from opentelemetry import baggage, context, propagate, trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    saved = propagate.get_global_textmap()
    if case == "trace context alone":
        propagate.set_global_textmap(TraceContextTextMapPropagator())
    parent = None
    if case == "trace state":
        remote = trace.SpanContext(
            0xABC,
            0xDEF,
            is_remote=True,
            trace_flags=trace.TraceFlags(1),
            trace_state=trace.TraceState([("vendor", "v1")]),
        )
        parent = trace.set_span_in_context(trace.NonRecordingSpan(remote))
    if case == "baggage":
        parent = baggage.set_baggage("tenant", "acme")
    token = context.attach(parent) if parent is not None else None
    try:
        with ags.span("call"):
            expected: dict[str, str] = {}
            propagate.inject(expected)
            got = trace_headers()
    finally:
        if token is not None:
            context.detach(token)
        propagate.set_global_textmap(saved)
    assert got == expected and got["traceparent"].startswith("00-")
    assert ("tracestate" in got) == (case == "trace state") and ("baggage" in got) == (case == "baggage")


@pytest.mark.parametrize("library", ["httpx", "httpx2"])
def test_a_propagation_header_is_added_once_and_replaces_the_apps_own(library):
    """The header is appended to httpx's own list where it is absent, and replaces one the request has
    (any case) where it is present: either way the request carries it once, as httpx's assignment
    leaves it."""
    import importlib

    from agentscope.integrations._stainless import set_header

    http = importlib.import_module(library)
    fresh = http.Request("POST", "http://127.0.0.1:1/v1/chat/completions", headers={"x-a": "1"})
    set_header(fresh.headers, "traceparent", "00-new")
    assert fresh.headers.get_list("traceparent") == ["00-new"] and fresh.headers["X-A"] == "1"
    assert fresh.headers.raw[-1] == (b"traceparent", b"00-new")
    own = http.Request("POST", "http://127.0.0.1:1/", headers={"TraceParent": "00-app", "x-a": "1"})
    set_header(own.headers, "traceparent", "00-new")
    assert own.headers.get_list("traceparent") == ["00-new"] and own.headers["x-a"] == "1"
    plain: dict[str, str] = {}
    set_header(plain, "traceparent", "00-new")
    assert plain == {"traceparent": "00-new"}


def test_the_apps_own_traceparent_is_replaced_by_the_calls(instrumented, sim):
    apps = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"
    client = openai.OpenAI(base_url=sim.base_url, api_key="k", default_headers={"traceparent": apps})
    client.chat.completions.create(model="m", messages=MESSAGES)
    (llm,) = llm_spans(instrumented)
    assert sim.seen_headers[-1]["traceparent"].split("-")[2] == format(llm.context.span_id, "016x")


def test_the_callers_parent_and_baggage_reach_a_self_hosted_server(instrumented, sim):
    """The call reads the caller's context once, for its peer check, its span and its headers: the span
    is the caller's span's child, and the caller's baggage goes to the server beside its traceparent."""
    from opentelemetry import baggage, context

    client = openai.OpenAI(base_url=sim.base_url, api_key="k")
    token = context.attach(baggage.set_baggage("tenant", "acme"))
    try:
        with ags.span("handle ticket"):
            client.chat.completions.create(model="m", messages=MESSAGES)
    finally:
        context.detach(token)
    (llm,) = llm_spans(instrumented)
    (outer,) = [s for s in instrumented.spans if s.name == "handle ticket"]
    assert llm.parent.span_id == outer.context.span_id
    sent = sim.seen_headers[-1]
    assert sent["baggage"] == "tenant=acme"
    assert sent["traceparent"].split("-")[2] == format(llm.context.span_id, "016x")
