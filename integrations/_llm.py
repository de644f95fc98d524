"""What the LLM-SDK integrations share: a base URL's provider, and usage and server timings in any dialect.

Providers report their own timings in different places and units (FACTS §3);
:func:`response_attributes` reads all of them from a response body (a dict or
an SDK model) and headers, in milliseconds.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any
from urllib.parse import urlparse

from agentscope import attributes as A

PROVIDERS = {
    "api.openai.com": "openai",
    "api.groq.com": "groq",
    "api.cerebras.ai": "cerebras",
    "api.anthropic.com": "anthropic",
    "api.together.xyz": "together",
    "api.fireworks.ai": "fireworks",
    "openrouter.ai": "openrouter",
    "api.deepseek.com": "deepseek",
    "generativelanguage.googleapis.com": "gcp.gemini",
    "api.mistral.ai": "mistral_ai",
    "api.x.ai": "x_ai",
    "api.perplexity.ai": "perplexity",
    "api.cohere.com": "cohere",
    "api.cohere.ai": "cohere",
    "api.sambanova.ai": "sambanova",
    "router.huggingface.co": "huggingface",
}
"""Host → ``gen_ai.provider.name``; extend it for your own gateways."""
PROVIDER_SUFFIXES = (
    (".openai.azure.com", "azure.ai.openai"),
    (".services.ai.azure.com", "azure.ai.inference"),
    (".models.ai.azure.com", "azure.ai.inference"),
    ("aiplatform.googleapis.com", "gcp.vertex_ai"),
)
"""Host ending → provider, for APIs served from a host per account or region
(``{resource}.openai.azure.com``, ``{region}-aiplatform.googleapis.com``); Bedrock's
``bedrock-runtime.{region}.amazonaws.com`` is read apart."""
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1", "0.0.0.0")


def _public_provider(host: str) -> str | None:
    """The provider of a public API's host (None: a host of the user's own, or unknown)."""
    known = PROVIDERS.get(host)
    if known is not None:
        return known
    for suffix, provider in PROVIDER_SUFFIXES:
        if host.endswith(suffix):
            return provider
    if host.startswith("bedrock") and host.endswith(".amazonaws.com"):
        return "aws.bedrock"
    return None


@functools.lru_cache(maxsize=256)
def _host(url: str) -> str:
    return (urlparse(url).hostname or "").lower()


def provider_for(base_url: Any) -> str:
    """``gen_ai.provider.name`` for a client's base URL (``local`` for loopback servers)."""
    host = _host(str(base_url))
    provider = _public_provider(host)
    if provider is not None:
        return provider
    if host in LOCAL_HOSTS:
        return "local"
    return host or "unknown"


def joins_traces(base_url: Any) -> bool:
    """Whether the server at ``base_url`` may record its own spans in the caller's trace: a self-hosted
    vLLM or SGLang, or any host that is not a public API.  A public API records no spans a caller could
    join: ``traceparent`` would cost every call a header and hand the caller's trace ids to a third
    party."""
    return _public_provider(_host(str(base_url))) is None


class _Attributes:
    """An object read as a mapping of its attributes (properties included)."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def get(self, key: str) -> Any:
        return getattr(self.obj, key, None)


_EMPTY: Mapping[str, Any] = MappingProxyType({})


def fields_of(obj: Any) -> Mapping[str, Any]:
    """``obj``'s fields as a mapping to read with ``.get``, whichever kind of object it is.

    SDK response models are pydantic models: their fields are in ``__dict__`` and
    the provider's extra fields in ``__pydantic_extra__``, so a field is a dict
    lookup and a missing one costs no raised AttributeError.  Several fields of
    one model are read through one mapping.  Plain dicts and models are tried
    before the ``Mapping`` ABC, whose isinstance check is the slowest step on the
    per-call path.
    """
    if type(obj) is dict:
        return obj
    if obj is None:
        return _EMPTY
    fields = getattr(obj, "__dict__", None)
    if fields is not None:
        extra = getattr(obj, "__pydantic_extra__", None)
        if isinstance(extra, dict):
            return {**fields, **extra} if extra else fields
        if hasattr(type(obj), "model_fields"):
            return fields
    return obj if isinstance(obj, Mapping) else _Attributes(obj)


def get(obj: Any, *path: str) -> Any:
    """``obj.a.b`` or ``obj["a"]["b"]``, whichever the object is; None when absent."""
    for key in path:
        obj = fields_of(obj).get(key)
    return obj


def _number(value: Any) -> float | None:
    kind = type(value)
    if kind is float or kind is int:  # what a parsed body holds: checked first, as every call reads some
        return float(value)
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, (str, bytes)):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _scaled(value: Any, to_ms: float) -> float | None:
    number = value if type(value) is float else _number(value)
    return None if number is None else number * to_ms


def response_attributes(body: Any, headers: Any = None) -> dict[str, Any]:
    """Token usage, server timings (ms) and the response model of a response, as span attributes.

    Usage comes in the OpenAI, Responses or Anthropic shapes; timings in any
    provider's dialect.  Timings in the body win; the headers (TGI's,
    ``openai-processing-ms``) are read only when the body has none.  Every LLM
    call pays for this, so each model is read through one mapping, once, and
    each field in line rather than through a helper call.
    """
    fields = fields_of(body)
    groq = fields.get("x_groq")
    groq_usage = None if groq is None else fields_of(groq).get("usage")
    groq_usage = _EMPTY if groq_usage is None else fields_of(groq_usage)
    usage = fields.get("usage")
    usage = fields_of(usage) if usage else groq_usage
    field = usage.get
    inputs = field("prompt_tokens")
    if inputs is None:
        inputs = field("input_tokens")
    outputs = field("completion_tokens")
    if outputs is None:
        outputs = field("output_tokens")
    details = field("prompt_tokens_details")
    cached = None if details is None else get(details, "cached_tokens")
    if cached is None:
        details = field("input_tokens_details")
        cached = None if details is None else get(details, "cached_tokens")
        if cached is None:
            cached = field("cache_read_input_tokens")
    found: dict[str, Any] = {}
    if isinstance(inputs, (int, float)):
        found[A.GEN_AI_USAGE_INPUT_TOKENS] = int(inputs)
    if isinstance(outputs, (int, float)):
        found[A.GEN_AI_USAGE_OUTPUT_TOKENS] = int(outputs)
    if isinstance(cached, (int, float)):
        found[A.GEN_AI_USAGE_CACHED_INPUT_TOKENS] = int(cached)
    timings = {} if _schema_only(body) else _body_timings(fields, groq_usage or usage)
    if headers and not timings:
        timings = header_timings(headers)
    for key, value in timings.items():
        if value is not None:
            found[key] = value
    model = fields.get("model")
    if isinstance(model, str):
        found[A.GEN_AI_RESPONSE_MODEL] = model
    return found


def header_timings(headers: Any) -> dict[str, float | None]:
    """Hugging Face TGI's queue and inference time, or ``openai-processing-ms``, as span attributes (ms).

    An httpx ``Headers`` (what both SDKs return) is read as one dict of its raw
    list, where each of its own lookups would scan every header (names are
    lower-cased first when a server sent them in other case).  Plain dicts are
    expected in lower case.
    """
    raw = getattr(headers, "raw", None)
    if type(raw) is list:
        values = dict(raw)
        names = b"".join(values)
        if names != names.lower():  # a server that sends names in other case
            values = {key.lower(): value for key, value in raw}
        header = values.get
        queue, inference, processing = (
            header(b"x-queue-time"),
            header(b"x-inference-time"),
            header(b"openai-processing-ms"),
        )
    else:
        header = headers.get
        queue, inference, processing = (
            header("x-queue-time"),
            header("x-inference-time"),
            header("openai-processing-ms"),
        )
    if queue is not None or inference is not None:  # Hugging Face TGI, ms
        return {A.SERVER_QUEUE_MS: _number(queue), A.SERVER_TOTAL_MS: _number(inference)}
    return {A.SERVER_TOTAL_MS: _number(processing)}


def _body_timings(fields: Mapping[str, Any], usage: Mapping[str, Any]) -> dict[str, float | None]:
    """The timings in a response body's ``fields`` (its ``usage``, or Groq's ``x_groq.usage``, read)."""
    if usage.get("queue_time") is not None or usage.get("prompt_time") is not None:  # Groq, seconds
        return _seconds(usage)
    info = fields.get("time_info")
    if info is not None:  # Cerebras, seconds
        return _seconds(fields_of(info))
    metrics = fields_of(fields.get("metrics"))
    if metrics.get("queue_time_ms") is not None:  # vLLM per-request metrics, ms
        return {
            A.SERVER_QUEUE_MS: _number(metrics.get("queue_time_ms")),
            A.SERVER_PREFILL_MS: _number(metrics.get("time_to_first_token_ms")),
            A.SERVER_DECODE_MS: _number(metrics.get("generation_time_ms")),
        }
    timings = fields_of(fields.get("timings"))
    if timings.get("prompt_ms") is not None:  # llama.cpp, ms
        return {
            A.SERVER_PREFILL_MS: _number(timings.get("prompt_ms")),
            A.SERVER_DECODE_MS: _number(timings.get("predicted_ms")),
        }
    if fields.get("eval_duration") is not None:  # Ollama native API, ns
        return {
            A.SERVER_QUEUE_MS: _scaled(fields.get("load_duration"), 1e-6),
            A.SERVER_PREFILL_MS: _scaled(fields.get("prompt_eval_duration"), 1e-6),
            A.SERVER_DECODE_MS: _scaled(fields.get("eval_duration"), 1e-6),
        }
    return {}


def _schema_only(body: Any) -> bool:
    """Whether ``body`` is an SDK model holding only its schema's fields, it and its usage.

    Every provider's timings are fields the OpenAI and Anthropic schemas lack (Groq's ``x_groq`` and
    ``usage.queue_time``, Cerebras' ``time_info``, vLLM's ``metrics``, llama.cpp's ``timings``), so
    they land in pydantic's extras; a response with none (OpenAI's own) is known to carry no timings
    after two dict reads instead of a search of every dialect.
    """
    extra = getattr(body, "__pydantic_extra__", False)
    if extra is False or extra:
        return False
    usage = body.__dict__.get("usage")
    return usage is None or not getattr(usage, "__pydantic_extra__", True)


def _seconds(times: Mapping[str, Any]) -> dict[str, float | None]:
    """Groq's and Cerebras' ``queue_time``/``prompt_time``/``completion_time`` (seconds) in ms."""
    return {
        A.SERVER_QUEUE_MS: _scaled(times.get("queue_time"), 1000),
        A.SERVER_PREFILL_MS: _scaled(times.get("prompt_time"), 1000),
        A.SERVER_DECODE_MS: _scaled(times.get("completion_time"), 1000),
    }
