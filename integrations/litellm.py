"""LiteLLM: one llm span per ``completion``/``acompletion`` and ``embedding``/``aembedding`` call, whatever
provider it routes to.

Patched (and restored by ``uninstrument``): those four functions of the ``litellm`` module, which its
``Router`` calls too.  LiteLLM sends through its own HTTP handlers, and an openai-compatible model
through the openai SDK's low-level ``post``, past ``chat.completions.create``: without this its calls
read as network time, with no tokens.  A call is made as an openai one is (``_stainless``): inside
it the openai SDK's attempts and backoff are recorded and a self-hosted ``api_base`` is sent
``traceparent``; usage, server timings and a stream's first token and chunks are read in the
OpenAI shape LiteLLM returns for every provider.  The model is the one asked for less LiteLLM's
provider prefix (``anthropic/claude-…`` → ``claude-…``, provider ``anthropic``); without a prefix the
provider is ``custom_llm_provider``, else the ``api_base`` host.  Modules that imported ``completion``
by name before ``ags.instrument()`` keep the original.
"""

from __future__ import annotations

from typing import Any

from agentscope.integrations._llm import joins_traces, provider_for
from agentscope.integrations._stainless import (
    Dialect,
    StreamState,
    call_async,
    call_sync,
    open_call,
)

from agentscope import attributes as A
from agentscope.sdk.instrumentation import Instrumentor

__all__ = ["LiteLLMInstrumentor"]


def _seen(tracked: StreamState, chunk: Any) -> None:
    """A LiteLLM stream chunk (OpenAI's chunk shape, whose fields a provider may leave out)."""
    choices = getattr(chunk, "choices", None) or ()
    if not tracked.first_seen:
        for choice in choices:
            delta = getattr(choice, "delta", None)
            if delta is not None and (getattr(delta, "content", None) or getattr(delta, "tool_calls", None)):
                tracked.first_token()
                break
    if getattr(chunk, "usage", None) is not None or (choices and getattr(choices[0], "finish_reason", None)):
        tracked.note(chunk)


def _route(kwargs: dict) -> tuple[str | None, str, bool]:
    """The call's model less LiteLLM's provider prefix, its provider, and whether its server joins the
    caller's trace (a self-hosted ``api_base``)."""
    from litellm import provider_list

    model = kwargs.get("model")
    model = model if model is None or isinstance(model, str) else str(model)
    base = kwargs.get("api_base") or kwargs.get("base_url")
    provider = kwargs.get("custom_llm_provider")
    if model and "/" in model:
        prefix, rest = model.split("/", 1)
        if prefix in provider_list:
            model, provider = rest, provider or prefix
    if not provider:
        provider = provider_for(base) if base else "litellm"
    return model, str(provider), bool(base) and joins_traces(base)


def _opens(wrapped: Any, instance: Any, kwargs: dict, operation: str, dialect: Dialect) -> Any:
    model, provider, joins = _route(kwargs)
    return open_call(operation, model, provider, joins, dialect, kwargs)


class LiteLLMInstrumentor(Instrumentor):
    """Instrument LiteLLM's completion and embedding calls (sync and async, streamed or not)."""

    library = "litellm"

    def _instrument(self) -> None:
        dialect = Dialect("litellm", (), _seen)
        for name, operation in (("completion", A.OPERATION_CHAT), ("embedding", A.OPERATION_EMBEDDINGS)):
            self.wrap("litellm", name, call_sync(operation, dialect, opens=_opens))
            self.wrap("litellm", f"a{name}", call_async(operation, dialect, opens=_opens))
