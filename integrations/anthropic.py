"""anthropic (Messages API, sync and async, streamed or not): one llm span per call, retries visible.

The same client machinery as openai (``_stainless``): the llm span around
``messages.create`` and ``parse`` and around the request of the
``messages.stream()`` helper (all three post on their own, the helper only when
its block is entered), and their ``beta.messages`` namesakes; each failed HTTP
attempt (``_attempt_request``, anthropic 0.50 and later) an ``http`` span, each
retry sleep a ``backoff`` span.  Usage includes cache reads and
writes; for streams the first token is the first ``content_block_delta`` and
usage comes from ``message_start`` and ``message_delta``.  Anthropic reports no
server timings, so its calls are split by time to first token, else unsplit.

SDK versions that emit their own OpenTelemetry GenAI span for each call (scope
``com.anthropic.sdk.python``, anthropic 1.14 and later) keep it as the call's llm
span: agentscope then adds only the failed attempts and backoff sleeps under it.
A client whose own spans are switched off (``open_telemetry=False``,
``ANTHROPIC_OPEN_TELEMETRY=false``) gets agentscope's.  A peer patched below
agentscope (OpenInference's or OpenLLMetry's anthropic instrumentor) has its span
made the call in the same way, and gets the response's usage and a stream's
first token on it while that span is current, as with openai (OpenLLMetry's
never is: see docs/coexistence.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentscope.integrations._stainless import (
    Dialect,
    StreamState,
    attempt_begins,
    attempt_ends,
    call_async,
    call_sync,
    peer_reader,
    set_provider,
    sleep_async,
    sleep_sync,
    stream_manager,
)

from agentscope import attributes as A
from agentscope.sdk.instrumentation import Instrumentor

__all__ = ["AnthropicInstrumentor", "set_provider"]


def _seen(tracked: StreamState, event: Any) -> None:
    kind = getattr(event, "type", None)
    if kind == "content_block_delta":
        if not tracked.first_seen:
            tracked.first_token()
    elif kind == "message_start":
        tracked.note(getattr(event, "message", None))
    elif kind == "message_delta":
        tracked.note(event)


def _attempt(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    state = attempt_begins(None)
    result = wrapped(*args, **kwargs)
    attempt_ends(state, result[0] if isinstance(result, tuple) else result)
    return result


async def _attempt_async(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    state = attempt_begins(None)
    result = await wrapped(*args, **kwargs)
    attempt_ends(state, result[0] if isinstance(result, tuple) else result)
    return result


_CALLS = (
    ("anthropic.resources.messages", ("create", "parse")),
    ("anthropic.resources.beta.messages", ("create", "parse")),
    ("anthropic.resources.beta.prompt_caching", ("create",)),
)
"""(module, methods) of each Messages API, the classes ``Messages`` and ``AsyncMessages``: the API (a module
up to anthropic 0.40, a package from 0.41, which re-exports its classes), its beta namesake, and prompt
caching's beta (``client.beta.prompt_caching``, up to 0.40).  ``parse`` (structured outputs) posts
without ``create``.  Each API's ``stream()`` helper does too, from a manager that sends the request when
its block is entered.  A path a version lacks is skipped."""


def _raw_responses() -> tuple[type, ...]:
    from anthropic import _response

    names = ("APIResponse", "AsyncAPIResponse", "LegacyAPIResponse")
    return tuple(getattr(_response, name) for name in names if hasattr(_response, name))


def _client_traces(client: Any) -> bool:
    """Whether this client makes a span of its own for each call.  Clients of anthropic 1.14 and later do
    unless their ``open_telemetry`` option (or ``ANTHROPIC_OPEN_TELEMETRY=false``) switches them off;
    earlier ones have no such option and make none.  Where it makes none, agentscope's span is the call."""
    try:
        return bool(client.open_telemetry["traces"]["enabled"])
    except (AttributeError, KeyError, TypeError):
        return False


class AnthropicInstrumentor(Instrumentor):
    """Instrument the anthropic SDK's Messages API (sync and async; retries)."""

    library = "anthropic"

    def _instrument(self) -> None:
        dialect = Dialect(
            "anthropic",
            _raw_responses(),
            _seen,
            (
                "com.anthropic",
                "openinference.instrumentation.anthropic",
                "opentelemetry.instrumentation.anthropic",
            ),
            skip_span=_client_traces,
            reads_for_peers=peer_reader(self, "anthropic._base_client"),
        )
        calls, calls_async = call_sync(A.OPERATION_CHAT, dialect), call_async(A.OPERATION_CHAT, dialect)
        for module, methods in _CALLS:
            for method in methods:
                self.wrap(module, f"Messages.{method}", calls)
                self.wrap(module, f"AsyncMessages.{method}", calls_async)
            self.wrap(module, "Messages.stream", stream_manager(calls))
            self.wrap(module, "AsyncMessages.stream", stream_manager(calls_async))
        self.wrap("anthropic._base_client", "SyncAPIClient._attempt_request", _attempt)
        self.wrap("anthropic._base_client", "AsyncAPIClient._attempt_request", _attempt_async)
        self.wrap("anthropic._base_client", "SyncAPIClient._sleep_for_retry", sleep_sync)
        self.wrap("anthropic._base_client", "AsyncAPIClient._sleep_for_retry", sleep_async)
