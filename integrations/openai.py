"""openai-python: one llm span per logical call, with every retry visible.

Patched (and restored by ``uninstrument``):

- ``chat.completions.create``/``parse`` and ``responses.create``/``parse`` (and
  their ``beta`` namesakes), sync and async (also reached through
  ``with_raw_response`` and ``with_streaming_response``, whose response hands
  back the wrapped stream from ``parse()``; ``parse``, structured outputs, posts
  without ``create``), the legacy ``completions.create`` and ``embeddings.create``: the
  llm span, with model, provider, token usage, server timings from any
  provider dialect, and, for streams, the
  time to the first content or tool-call delta, the chunk count and the time
  spent inside the stream (the stream is wrapped; its span ends exactly once,
  on exhaustion, ``break``/``close()``, an exception or garbage collection);
- ``close`` of the stream helpers (``chat.completions.stream()``,
  ``responses.stream()``), which close the HTTP response directly: leaving the
  helper's ``with`` block early ends the call's span there;
- ``_send_request`` of the SDK's base client (openai ≥ 3 sends through httpx2,
  earlier versions through httpx; both reach this method): each HTTP attempt.
  It injects ``traceparent`` so a vLLM/SGLang server's own spans join the trace,
  and keeps the response headers (``openai-processing-ms``, TGI's timings);
- ``_sleep_for_retry``: a failed attempt becomes an ``http`` span with status
  ERROR and its attempt number, and the SDK's sleep a ``backoff`` span — the
  retries every other instrumentation hides inside one LLM span.

When OpenInference or OpenLLMetry also instrument openai in the same process,
agentscope does not add a second llm span for a call: if the peer's span is
already open (it wrapped outside agentscope), agentscope records its usage and
timings on that span; if the peer wraps inside (its patch is below
agentscope's, or on the client's ``request``), agentscope skips its own span and
the peer's span is the call — agentscope's attempt and backoff spans then nest
under it, and the base client's ``_process_response`` (where the SDK turns the
response into the call's result, inside the peer's span) sets the body's usage
and server timings, or a stream's first token, chunks and last events, on it.
That method is patched the first time a peer's span is the call: an app
without such a peer never has it patched.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from agentscope.integrations._stainless import (
    Dialect,
    StreamState,
    call_async,
    call_sync,
    helper_close_async,
    helper_close_sync,
    peer_reader,
    send_async,
    send_sync,
    set_provider,
    sleep_async,
    sleep_sync,
)

from agentscope import attributes as A
from agentscope.sdk.instrumentation import Instrumentor

__all__ = ["OpenAIInstrumentor", "set_provider"]


def _seen(tracked: StreamState, chunk: Any) -> None:
    """A chunk before the first token, or one of the last: cheap reads; first token and usage kept."""
    choices = getattr(chunk, "choices", None)
    if choices is None:  # a Responses API event
        event = getattr(chunk, "type", "") or ""
        if not tracked.first_seen and event.endswith(".delta"):
            tracked.first_token()
        if event == "response.completed":
            tracked.note(getattr(chunk, "response", None))
        return
    if not tracked.first_seen:
        for choice in choices:
            delta = choice.delta
            if delta is not None and (delta.content or delta.tool_calls or delta.function_call):
                tracked.first_token()
                break
    if chunk.usage is not None or (choices and choices[0].finish_reason is not None):
        tracked.note(chunk)  # providers put usage and timings on the last chunks


def _seen_text(tracked: StreamState, chunk: Any) -> None:
    """A legacy text completion's chunk: each choice carries its text itself, not a delta."""
    choices = chunk.choices
    if not tracked.first_seen and any(choice.text for choice in choices):
        tracked.first_token()
    if chunk.usage is not None or (choices and choices[0].finish_reason is not None):
        tracked.note(chunk)


def _raw_responses() -> tuple[type, ...]:
    from openai._legacy_response import LegacyAPIResponse
    from openai._response import APIResponse, AsyncAPIResponse

    return (APIResponse, AsyncAPIResponse, LegacyAPIResponse)


_CALLS = (
    ("openai.resources.chat.completions", "Completions", ("create", "parse"), A.OPERATION_CHAT),
    ("openai.resources.beta.chat.completions", "Completions", ("parse",), A.OPERATION_CHAT),
    ("openai.resources.responses", "Responses", ("create", "parse"), A.OPERATION_CHAT),
    ("openai.resources.beta.responses", "Responses", ("create",), A.OPERATION_CHAT),
    ("openai.resources.completions", "Completions", ("create",), A.OPERATION_TEXT_COMPLETION),
    ("openai.resources.embeddings", "Embeddings", ("create",), A.OPERATION_EMBEDDINGS),
)
"""(module, resource class, methods, GenAI operation) of each API call; its ``Async`` twin alike.  The
beta chat ``parse`` is structured outputs before openai 1.9x moved it out of beta; the beta Responses
API (``client.beta.responses``) is a class of its own.  A path a version lacks is skipped."""


class OpenAIInstrumentor(Instrumentor):
    """Instrument openai-python (chat completions, responses, text completions, embeddings; sync and
    async; retries)."""

    library = "openai"

    def _instrument(self) -> None:
        dialect = Dialect(
            "openai",
            _raw_responses(),
            _seen,
            ("openinference.instrumentation.openai", "opentelemetry.instrumentation.openai"),
            reads_for_peers=peer_reader(self, "openai._base_client"),
        )
        text = dataclasses.replace(dialect, seen=_seen_text)
        for module, resource, methods, operation in _CALLS:
            read = text if operation == A.OPERATION_TEXT_COMPLETION else dialect
            for method in methods:
                self.wrap(module, f"{resource}.{method}", call_sync(operation, read))
                self.wrap(module, f"Async{resource}.{method}", call_async(operation, read))
        for module, stream in (
            ("openai.lib.streaming.chat._completions", "ChatCompletionStream"),
            ("openai.lib.streaming.responses._responses", "ResponseStream"),
        ):
            self.wrap(module, f"{stream}.close", helper_close_sync)
            self.wrap(module, f"Async{stream}.close", helper_close_async)
        self.wrap("openai._base_client", "SyncAPIClient._send_request", send_sync)
        self.wrap("openai._base_client", "AsyncAPIClient._send_request", send_async)
        self.wrap("openai._base_client", "SyncAPIClient._sleep_for_retry", sleep_sync)
        self.wrap("openai._base_client", "AsyncAPIClient._sleep_for_retry", sleep_async)
