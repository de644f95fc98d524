"""The simulated provider's HTTP server (Starlette on uvicorn, in a background thread)."""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any, NamedTuple

import orjson
import uvicorn
from opentelemetry import propagate, trace
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from agentscope.sdk.clock import now_ns
from agentscope.sim.profile import Profile

WORDS = ("the", "agent", "checks", "the", "ticket", "and", "drafts", "a", "reply", "for", "the", "customer")


def _completion_words(n: int) -> list[str]:
    return [WORDS[i % len(WORDS)] + " " for i in range(n)]


def tool_calls_for(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The tool calls a scripted agent's model makes next, given the request's tools and messages.

    With ``tools`` in the request, the model calls them one per turn, in the
    order given, then answers; if the first user message asks for them
    "in parallel", it calls them all in its first turn.  Without tools, or once
    every tool has answered, it answers in text (no calls).
    """
    names = [
        (tool.get("function") or {}).get("name") or tool.get("name")
        for tool in body.get("tools") or []
        if isinstance(tool, Mapping)
    ]
    names = [n for n in names if n]
    if not names:
        return []
    messages = [m for m in body.get("messages") or [] if isinstance(m, Mapping)]
    answered = sum(1 for m in messages if m.get("role") == "tool")
    first_user = next((str(m.get("content")) for m in messages if m.get("role") == "user"), "")
    parallel = "in parallel" in first_user
    chosen = (names if answered == 0 else []) if parallel else names[answered : answered + 1]
    return [
        {
            "id": f"call_{uuid.uuid4().hex[:12]}",
            "type": "function",
            "function": {"name": n, "arguments": "{}"},
        }
        for n in chosen
    ]


def structured(response_format: Any, words: list[str]) -> str | None:
    """The answer as JSON when the request asks for it (``response_format`` of chat completions, or the
    Responses API's ``text.format``): an object whose schema's properties hold the words (strings),
    the word count (numbers) or ``true``; None when plain text was asked for."""
    if not isinstance(response_format, Mapping) or response_format.get("type") not in (
        "json_schema",
        "json_object",
    ):
        return None
    schema = response_format.get("schema") or (response_format.get("json_schema") or {}).get("schema") or {}
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping):
        return orjson.dumps({"answer": "".join(words).strip()}).decode()
    filler = {
        "string": "".join(words).strip(),
        "integer": len(words),
        "number": float(len(words)),
        "boolean": True,
    }
    return orjson.dumps(
        {
            name: filler.get(str(spec.get("type")))
            for name, spec in properties.items()
            if isinstance(spec, Mapping)
        }
    ).decode()


def timing_report(
    dialect: str, queue_ms: float, prefill_ms: float, decode_ms: float, tokens: int
) -> tuple[dict[str, Any], dict[str, str]]:
    """The body fields and headers in which a provider of ``dialect`` reports its timings (FACTS §3).

    Body fields go into a completion, or into a stream's last chunk; headers
    only into a completion (TGI sends none on streams).  Groq's usage fields and
    OpenAI's processing-time header are added where the response is built.
    """
    s = 1 / 1000
    if dialect == "cerebras":
        info = {
            "queue_time": queue_ms * s,
            "prompt_time": prefill_ms * s,
            "completion_time": decode_ms * s,
            "total_time": (queue_ms + prefill_ms + decode_ms) * s,
            "created": time.time(),
        }
        return {"time_info": info}, {}
    if dialect == "vllm":
        metrics = {
            "queue_time_ms": queue_ms,
            "time_to_first_token_ms": prefill_ms,
            "generation_time_ms": decode_ms,
            "mean_itl_ms": decode_ms / max(1, tokens - 1),
        }
        return {"metrics": metrics}, {}
    if dialect == "llamacpp":
        timings = {
            "prompt_ms": prefill_ms,
            "predicted_ms": decode_ms,
            "predicted_n": tokens,
            "predicted_per_token_ms": decode_ms / max(1, tokens),
        }
        return {"timings": timings}, {}
    if dialect == "ollama":
        ns = 1_000_000
        durations = {
            "load_duration": int(queue_ms * ns),
            "prompt_eval_duration": int(prefill_ms * ns),
            "eval_duration": int(decode_ms * ns),
            "total_duration": int((queue_ms + prefill_ms + decode_ms) * ns),
            "eval_count": tokens,
        }
        return durations, {}
    if dialect == "tgi":
        inference = prefill_ms + decode_ms
        headers = {
            "x-validation-time": "1",
            "x-queue-time": str(round(queue_ms)),
            "x-inference-time": str(round(inference)),
            "x-time-per-token": str(int(inference / max(1, tokens))),
            "x-total-time": str(round(queue_ms + inference + 1)),
            "x-compute-time": f"{(queue_ms + inference + 1) / 1000:.6f}",
        }
        return {}, headers
    return {}, {}


def app_for(
    profile: Profile,
    seen_headers: list[dict[str, str]] | None = None,
    served: list[Served] | None = None,
) -> Starlette:
    """A Starlette app serving OpenAI's chat completions, Responses, legacy completions and embeddings and
    Anthropic's Messages API (``POST /v1/...``) with this latency profile.

    ``seen_headers``, if given, collects the headers of the last 100 requests (for tests);
    ``served`` collects every chat completion and Messages API request the server answered, with its own
    timing.
    """
    rng = random.Random(profile.seed)

    def log(arrival_ns: int, status: int, usage: Mapping[str, Any] | None = None) -> None:
        if served is not None:
            usage = usage or {}
            tokens = (usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0))
            served.append(Served(arrival_ns, now_ns(), status, *tokens))

    async def admit(request: Request) -> dict[str, Any] | Response:
        """The request's JSON body, or the error response the profile draws for it."""
        if seen_headers is not None:
            seen_headers.append(dict(request.headers))
            del seen_headers[:-100]
        try:
            body = orjson.loads(await request.body())
        except orjson.JSONDecodeError:
            return JSONResponse({"error": {"message": "invalid JSON body"}}, status_code=400)
        if profile.rate_limit_first and _first_attempt(request):
            return _rate_limited(profile)
        roll = rng.random()
        if roll < profile.rate_limit_rate:
            return _rate_limited(profile)
        if roll < profile.rate_limit_rate + profile.error_rate:
            return JSONResponse({"error": {"message": "simulated server error"}}, status_code=500)
        return body

    slots = asyncio.Semaphore(profile.capacity) if profile.capacity > 0 else None
    """Requests served at once; the others wait their turn, and the wait is reported as queue time."""

    in_flight = [0]
    """Requests between their prefill's start and their answer's end (chat completions)."""

    def latencies(tokens: int, prompt_tokens: int = 0, others: int = 0) -> tuple[float, float, float]:
        """Queue, prefill and decode (ms) of a request reading ``prompt_tokens`` and writing ``tokens``
        while ``others`` requests are in flight."""
        rate = profile.tokens_per_s
        decode_ms = tokens / rate * 1000 if rate > 0 else 0.0
        decode_ms += profile.decode_context_ms * tokens * (prompt_tokens + tokens / 2) / 1000
        prefill_ms = profile.prefill_ms + profile.prefill_quadratic_ms * (prompt_tokens / 1000) ** 2
        if profile.prefill_tokens_per_s > 0:
            prefill_ms += prompt_tokens / profile.prefill_tokens_per_s * 1000
        shared = 1 + profile.batch_slowdown * others
        return (
            profile.draw(rng, profile.queue_ms),
            profile.draw(rng, prefill_ms * shared),
            profile.draw(rng, decode_ms * shared),
        )

    async def take_slot() -> float:
        """Wait for a free slot (with a capacity); the ms waited."""
        if slots is None:
            return 0.0
        waited = time.perf_counter()
        await slots.acquire()
        return (time.perf_counter() - waited) * 1000

    def free_slot() -> None:
        in_flight[0] -= 1
        if slots is not None:
            slots.release()

    async def chat(request: Request) -> Response:
        return await admitted(request, text=False)

    async def text_completion(request: Request) -> Response:
        """The legacy Completions API (``prompt`` in, ``choices[].text`` out), as vLLM still serves it."""
        return await admitted(request, text=True)

    async def admitted(request: Request, text: bool) -> Response:
        arrival_ns = now_ns()
        body = await admit(request)
        if isinstance(body, Response):
            log(arrival_ns, body.status_code)
            return body
        waited_ms = await take_slot()
        in_flight[0] += 1
        streamed = False
        try:
            response = await completion(request, body, arrival_ns, waited_ms, text)
            streamed = isinstance(response, StreamingResponse)
            return response
        finally:
            if not streamed:  # a stream gives its slot back when it ends
                free_slot()

    async def completion(
        request: Request, body: dict[str, Any], arrival_ns: int, waited_ms: float, text: bool
    ) -> Response:
        """One chat (or text) completion, its slot taken after ``waited_ms`` (reported as queue time)."""
        model = body.get("model") or "sim-model"
        tokens = profile.output_tokens
        if isinstance(body.get("max_tokens"), int):  # honoured exactly: the completion is that long
            tokens = max(1, body["max_tokens"])
        if text:
            prompt_tokens = len(str(body.get("prompt", "")).split()) + 8
        else:
            prompt_tokens = (
                sum(len(str(m.get("content", "")).split()) for m in body.get("messages") or []) + 8
            )
        queue_ms, prefill_ms, decode_ms = latencies(tokens, prompt_tokens, in_flight[0] - 1)
        await asyncio.sleep(queue_ms / 1000)
        queue_ms += waited_ms
        started = time.perf_counter()
        await asyncio.sleep(prefill_ms / 1000)
        request_id = f"req_{uuid.uuid4().hex[:24]}"
        usage: dict[str, Any] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": tokens,
            "total_tokens": prompt_tokens + tokens,
        }
        if profile.timings == "groq":
            usage.update(
                queue_time=queue_ms / 1000,
                prompt_time=prefill_ms / 1000,
                completion_time=decode_ms / 1000,
                total_time=(prefill_ms + decode_ms) / 1000,
            )
        words = _completion_words(tokens)
        created = int(time.time())
        fields, timing_headers = timing_report(profile.timings, queue_ms, prefill_ms, decode_ms, tokens)

        calls = [] if text else tool_calls_for(body)
        if calls:
            words = []
        answer = structured(body.get("response_format"), words)
        if answer is not None:
            words = [answer]

        def traced() -> None:
            log(arrival_ns, 200, usage)
            if profile.traced:
                attributes = _vllm_attributes(request_id, model, queue_ms, prefill_ms, decode_ms, usage)
                record_request(request.headers, arrival_ns, attributes)

        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            chunks = _stream(
                request_id,
                model,
                created,
                words,
                decode_ms,
                usage,
                include_usage,
                profile,
                fields,
                calls,
                text,
            )
            return StreamingResponse(
                _then(chunks, traced, free_slot),
                media_type="text/event-stream",
                headers={"x-request-id": request_id},
            )
        await asyncio.sleep(decode_ms / 1000)
        traced()
        headers = {"x-request-id": request_id, **timing_headers}
        if profile.timings == "openai":
            headers["openai-processing-ms"] = str(int((time.perf_counter() - started) * 1000 + queue_ms))
        if text:
            choice = {"index": 0, "text": "".join(words), "finish_reason": "stop", "logprobs": None}
        else:
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": "".join(words) or None}
                | ({"tool_calls": calls} if calls else {}),
                "finish_reason": "tool_calls" if calls else "stop",
            }
        payload = {
            "id": f"{'cmpl' if text else 'chatcmpl'}-{request_id}",
            "object": "text_completion" if text else "chat.completion",
            "created": created,
            "model": model,
            "choices": [choice],
            "usage": usage,
            **fields,
        }
        if profile.timings == "groq":
            payload["x_groq"] = {"id": request_id}
        return Response(orjson.dumps(payload), media_type="application/json", headers=headers)

    async def responses(request: Request) -> Response:
        """OpenAI's Responses API: the same latencies; timings in the dialect's body fields."""
        body = await admit(request)
        if isinstance(body, Response):
            return body
        tokens = profile.output_tokens
        if isinstance(body.get("max_output_tokens"), int):
            tokens = max(1, min(tokens, body["max_output_tokens"]))
        prompt = body.get("input")
        prompt_tokens = len(str(prompt).split()) + 8
        queue_ms, prefill_ms, decode_ms = latencies(tokens)
        await asyncio.sleep((queue_ms + prefill_ms) / 1000)
        fields, _ = timing_report(profile.timings, queue_ms, prefill_ms, decode_ms, tokens)
        request_id = uuid.uuid4().hex[:24]
        response = {
            "id": f"resp_{request_id}",
            "object": "response",
            "created_at": time.time(),
            "status": "completed",
            "model": body.get("model") or "sim-model",
            "output": [],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": prompt_tokens,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": prompt_tokens + tokens,
            },
            **fields,
        }
        words = _completion_words(tokens)
        if body.get("stream"):
            return StreamingResponse(
                _responses_stream(response, words, decode_ms),
                media_type="text/event-stream",
                headers={"x-request-id": request_id},
            )
        await asyncio.sleep(decode_ms / 1000)
        answer = structured((body.get("text") or {}).get("format"), words)
        message = _output_message(response["id"], "".join(words) if answer is None else answer, "completed")
        payload = response | {"output": [message]}
        return Response(orjson.dumps(payload), media_type="application/json")

    async def embeddings(request: Request) -> Response:
        """Embeddings: a queue and a prefill over the input, no decode; one small vector per input."""
        body = await admit(request)
        if isinstance(body, Response):
            return body
        inputs = body.get("input")
        inputs = inputs if isinstance(inputs, list) else [inputs]
        prompt_tokens = sum(len(str(one).split()) for one in inputs) + len(inputs)
        queue_ms, prefill_ms, _ = latencies(0, prompt_tokens)
        await asyncio.sleep((queue_ms + prefill_ms) / 1000)
        fields, headers = timing_report(profile.timings, queue_ms, prefill_ms, 0.0, 0)
        payload = {
            "object": "list",
            "data": [
                {"object": "embedding", "index": i, "embedding": [rng.uniform(-1, 1) for _ in range(8)]}
                for i in range(len(inputs))
            ],
            "model": body.get("model") or "sim-embedding",
            "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
            **fields,
        }
        return Response(orjson.dumps(payload), media_type="application/json", headers=headers)

    async def messages(request: Request) -> Response:
        """Anthropic's Messages API: the same latencies, Anthropic's shapes (no server timings)."""
        arrival_ns = now_ns()
        try:
            body = orjson.loads(await request.body())
        except orjson.JSONDecodeError:
            log(arrival_ns, 400)
            return JSONResponse({"type": "error", "error": {"message": "invalid JSON body"}}, status_code=400)
        if rng.random() < profile.rate_limit_rate:
            log(arrival_ns, 429)
            return JSONResponse(
                {"type": "error", "error": {"type": "rate_limit_error", "message": "rate limited"}},
                status_code=429,
                headers={"retry-after": f"{profile.retry_after_ms / 1000:.3f}"},
            )
        tokens = min(profile.output_tokens, body.get("max_tokens") or profile.output_tokens)
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in body.get("messages") or []) + 8
        rate = profile.tokens_per_s
        decode_ms = profile.draw(rng, tokens / rate * 1000) if rate > 0 else 0.0
        await asyncio.sleep(
            (profile.draw(rng, profile.queue_ms) + profile.draw(rng, profile.prefill_ms)) / 1000
        )
        request_id = f"req_{uuid.uuid4().hex[:24]}"
        model = body.get("model") or "sim-model"
        words = _completion_words(tokens)
        usage = {"input_tokens": prompt_tokens, "output_tokens": tokens, "cache_read_input_tokens": 0}
        served_usage = {"prompt_tokens": prompt_tokens, "completion_tokens": tokens}
        message = {
            "id": f"msg_{request_id}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "stop_reason": "end_turn",
            "stop_sequence": None,
        }
        if body.get("stream"):
            return StreamingResponse(
                _then(
                    _anthropic_stream(message, words, decode_ms, usage),
                    lambda: log(arrival_ns, 200, served_usage),
                ),
                media_type="text/event-stream",
                headers={"request-id": request_id},
            )
        await asyncio.sleep(decode_ms / 1000)
        log(arrival_ns, 200, served_usage)
        payload = message | {"content": [{"type": "text", "text": "".join(words)}], "usage": usage}
        return Response(
            orjson.dumps(payload), media_type="application/json", headers={"request-id": request_id}
        )

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/completions", text_completion, methods=["POST"]),
            Route("/v1/embeddings", embeddings, methods=["POST"]),
            Route("/v1/responses", responses, methods=["POST"]),
            Route("/v1/messages", messages, methods=["POST"]),
        ]
    )


def _output_message(response_id: str, text: str, status: str) -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": []}] if status == "completed" else []
    return {
        "type": "message",
        "id": f"msg_{response_id}",
        "status": status,
        "role": "assistant",
        "content": content,
    }


async def _responses_stream(
    response: dict[str, Any], words: list[str], decode_ms: float
) -> AsyncIterator[bytes]:
    """The Responses API's event sequence for one text output, as the SDK's stream helper expects it."""
    sequence = iter(range(1_000_000))

    def event(name: str, **data: Any) -> bytes:
        payload = {"type": name, "sequence_number": next(sequence), **data}
        return f"event: {name}\n".encode() + b"data: " + orjson.dumps(payload) + b"\n\n"

    text = "".join(words)
    item = {"item_id": f"msg_{response['id']}", "output_index": 0, "content_index": 0}
    started = response | {"status": "in_progress", "usage": None}
    yield event("response.created", response=started)
    yield event("response.in_progress", response=started)
    yield event(
        "response.output_item.added", output_index=0, item=_output_message(response["id"], "", "in_progress")
    )
    part = {"type": "output_text", "text": "", "annotations": []}
    yield event("response.content_part.added", part=part, **item)
    async for word in _paced(words, decode_ms):
        yield event("response.output_text.delta", delta=word, logprobs=[], **item)
    yield event("response.output_text.done", text=text, logprobs=[], **item)
    yield event("response.content_part.done", part=part | {"text": text}, **item)
    message = _output_message(response["id"], text, "completed")
    yield event("response.output_item.done", output_index=0, item=message)
    yield event("response.completed", response=response | {"output": [message]})


def record_request(headers: Mapping[str, str], start_ns: int, attributes: dict[str, Any]) -> None:
    """Record a request as an inference server with tracing on does: a SERVER span in the caller's trace.

    The caller's ``traceparent`` header puts the span under the caller's span;
    the span goes to this process's OpenTelemetry tracer provider.
    """
    context = propagate.extract(dict(headers))
    tracer = trace.get_tracer("agentscope.sim")
    span = tracer.start_span(
        "llm_request", context=context, kind=trace.SpanKind.SERVER, start_time=start_ns, attributes=attributes
    )
    span.end(end_time=now_ns())


def _vllm_attributes(
    request_id: str, model: str, queue_ms: float, prefill_ms: float, decode_ms: float, usage: dict[str, Any]
) -> dict[str, Any]:
    """vLLM's request span attributes (seconds)."""
    return {
        "gen_ai.request.id": request_id,
        "gen_ai.response.model": model,
        "gen_ai.usage.prompt_tokens": usage["prompt_tokens"],
        "gen_ai.usage.completion_tokens": usage["completion_tokens"],
        "gen_ai.latency.time_in_queue": queue_ms / 1000,
        "gen_ai.latency.time_to_first_token": (queue_ms + prefill_ms) / 1000,
        "gen_ai.latency.time_in_model_prefill": prefill_ms / 1000,
        "gen_ai.latency.time_in_model_decode": decode_ms / 1000,
        "gen_ai.latency.e2e": (queue_ms + prefill_ms + decode_ms) / 1000,
    }


async def _paced(words: list[str], decode_ms: float) -> AsyncIterator[str]:
    """The words, the first at once and the last ``decode_ms`` later, evenly spaced.

    Paced against the clock, so the event loop's overshoot of each short sleep
    does not add up over a long stream (it would make the decode rate read low).
    """
    per_token = decode_ms / 1000 / max(1, len(words) - 1)
    began = time.perf_counter()
    for i, word in enumerate(words):
        if i:
            await asyncio.sleep(max(0.0, began + i * per_token - time.perf_counter()))
        yield word


async def _then(
    chunks: AsyncIterator[bytes], done: Callable[[], None], finally_: Callable[[], None] = lambda: None
) -> AsyncIterator[bytes]:
    """``chunks``, with ``done()`` called as the last is handed over; ``finally_()`` however the stream ends.

    Before the last rather than after it: a client that has read the whole stream then finds the
    request recorded, where after it the record waits for the server to ask for a chunk past the end,
    which on a loaded machine comes later than the client's next step.
    """
    try:
        last = None
        async for chunk in chunks:
            if last is not None:
                yield last
            last = chunk
        done()
        if last is not None:
            yield last
    finally:
        finally_()


async def _anthropic_stream(
    message: dict[str, Any], words: list[str], decode_ms: float, usage: dict[str, int]
) -> AsyncIterator[bytes]:
    def event(name: str, data: dict[str, Any]) -> bytes:
        return f"event: {name}\n".encode() + b"data: " + orjson.dumps({"type": name, **data}) + b"\n\n"

    start = message | {"content": [], "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 1}}
    yield event("message_start", {"message": start})
    yield event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
    async for word in _paced(words, decode_ms):
        yield event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": word}})
    yield event("content_block_stop", {"index": 0})
    yield event(
        "message_delta",
        {
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        },
    )
    yield event("message_stop", {})


async def _stream(
    request_id: str,
    model: str,
    created: int,
    words: list[str],
    decode_ms: float,
    usage: dict[str, Any],
    include_usage: bool,
    profile: Profile,
    fields: dict[str, Any],
    calls: list[dict[str, Any]],
    text: bool = False,
) -> AsyncIterator[bytes]:
    """A chat completion's chunks, or with ``text`` a legacy text completion's (the text in the choice)."""
    kind, prefix = ("text_completion", "cmpl") if text else ("chat.completion.chunk", "chatcmpl")

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        if text:
            choice = {
                "index": 0,
                "text": delta.get("content") or "",
                "finish_reason": finish,
                "logprobs": None,
            }
        else:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
        data = {
            "id": f"{prefix}-{request_id}",
            "object": kind,
            "created": created,
            "model": model,
            "choices": [choice],
            **extra,
        }
        return b"data: " + orjson.dumps(data) + b"\n\n"

    if not text:
        yield chunk({"role": "assistant", "content": ""})
    async for word in _paced(words, decode_ms):
        yield chunk({"content": word})
    if calls:
        await asyncio.sleep(decode_ms / 1000)
        yield chunk({"tool_calls": [call | {"index": i} for i, call in enumerate(calls)]})
    extra: dict[str, Any] = dict(fields)
    if profile.timings == "groq":
        extra["x_groq"] = {"id": request_id, "usage": usage}
    yield chunk({}, "tool_calls" if calls else "stop", **extra)
    if include_usage:
        yield (
            b"data: "
            + orjson.dumps(
                {
                    "id": f"{prefix}-{request_id}",
                    "object": kind,
                    "created": created,
                    "model": model,
                    "choices": [],
                    "usage": usage,
                }
            )
            + b"\n\n"
        )
    yield b"data: [DONE]\n\n"


class Served(NamedTuple):
    """One chat completion or Messages request as the simulated provider saw it: its own measured time."""

    arrival_ns: int
    end_ns: int
    """When the last byte of the answer was handed to the server (streams: as the last chunk is)."""
    status: int
    input_tokens: int = 0
    output_tokens: int = 0
    """The usage the answer reported (0 for an answer that was not a completion)."""

    @property
    def ms(self) -> float:
        return (self.end_ns - self.arrival_ns) / 1e6


def _first_attempt(request: Request) -> bool:
    """Whether the openai/anthropic SDK says this is a call's first attempt (``x-stainless-retry-count``)."""
    return request.headers.get("x-stainless-retry-count", "0") == "0"


def _rate_limited(profile: Profile) -> Response:
    return JSONResponse(
        {"error": {"message": "rate limited", "type": "rate_limit_exceeded"}},
        status_code=429,
        headers={"retry-after-ms": str(int(profile.retry_after_ms))},
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class SimServer:
    """The simulated provider running on a loopback port in a daemon thread."""

    def __init__(self, profile: Profile | None = None, port: int | None = None) -> None:
        self.profile = profile or Profile()
        self.port = port or free_port()
        self.seen_headers: list[dict[str, str]] = []
        self.served: list[Served] = []
        """Every chat completion request answered, in order (the provider's own timing)."""
        app = app_for(self.profile, self.seen_headers, self.served)
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="agentscope-sim", daemon=True)

    @property
    def base_url(self) -> str:
        """For the openai SDK (``.../v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """For the anthropic SDK (it adds ``/v1/messages`` itself)."""
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 10.0) -> SimServer:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"the simulated provider did not start on port {self.port}")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)


@contextlib.contextmanager
def serve(profile: Profile | None = None) -> Iterator[str]:
    """Run the simulated provider for the duration of a ``with`` block; yields its base URL."""
    server = SimServer(profile).start()
    try:
        yield server.base_url
    finally:
        server.stop()
