"""What the LLM-SDK integrations share: the provider of a base URL, and server timings in any dialect.

Providers report their own timings in different places and units (FACTS §3);
:func:`server_timings` reads all of them from a response body (a dict or an SDK
model) and headers, and returns milliseconds.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

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
}
"""Host → ``gen_ai.provider.name``; extend it for your own gateways."""
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1", "0.0.0.0")


@functools.lru_cache(maxsize=256)
def _provider_for_url(url: str) -> str:
    host = (urlparse(url).hostname or "").lower()
    if host in PROVIDERS:
        return PROVIDERS[host]
    if host in LOCAL_HOSTS:
        return "local"
    return host or "unknown"


def provider_for(base_url: Any) -> str:
    """``gen_ai.provider.name`` for a client's base URL (``local`` for loopback servers)."""
    return _provider_for_url(str(base_url))


def get(obj: Any, *path: str) -> Any:
    """``obj.a.b`` or ``obj["a"]["b"]``, whichever the object is; None when absent.

    SDK response models are pydantic models: their fields are read from
    ``__dict__`` and the provider's extra fields from ``__pydantic_extra__``, so
    a missing key costs a dict lookup, not a raised AttributeError.  Plain dicts
    and models are tried before the ``Mapping`` ABC, whose isinstance check is
    the slowest step on the per-call path.
    """
    for key in path:
        if obj is None:
            return None
        if type(obj) is dict:
            obj = obj.get(key)
            continue
        fields = getattr(obj, "__dict__", None)
        if fields is not None:
            if key in fields:
                obj = fields[key]
                continue
            extra = getattr(obj, "__pydantic_extra__", None)
            if isinstance(extra, dict):
                obj = extra.get(key)
                continue
            if hasattr(type(obj), "model_fields"):
                obj = None
                continue
        obj = obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)
    return obj


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _scaled(value: Any, to_ms: float) -> float | None:
    number = _number(value)
    return None if number is None else number * to_ms


def server_timings(body: Any, headers: Mapping[str, str] | None = None) -> dict[str, float]:
    """Queue, prefill, decode and total server time (ms) from whatever the provider returned.

    Timings in the body win; the headers (TGI's, ``openai-processing-ms``) are
    read only when the body has none.
    """
    found = _body_timings(body) if body is not None else {}
    if headers and not found:
        # SDK headers are case-insensitive mappings; plain dicts are expected in lower case.
        queue, inference = headers.get("x-queue-time"), headers.get("x-inference-time")
        if queue is not None or inference is not None:  # Hugging Face TGI, ms
            found = {"queue_ms": _number(queue), "total_ms": _number(inference)}
        else:
            found = {"total_ms": _number(headers.get("openai-processing-ms"))}
    return {key: value for key, value in found.items() if value is not None}


def _body_timings(body: Any) -> dict[str, float | None]:
    if _schema_only(body):
        return {}
    usage = get(body, "x_groq", "usage") or get(body, "usage")
    if get(usage, "queue_time") is not None or get(usage, "prompt_time") is not None:  # Groq, seconds
        return _seconds(usage)
    info = get(body, "time_info")
    if info is not None:  # Cerebras, seconds
        return _seconds(info)
    metrics = get(body, "metrics")
    if get(metrics, "queue_time_ms") is not None:  # vLLM per-request metrics, ms
        return {
            "queue_ms": _number(get(metrics, "queue_time_ms")),
            "prefill_ms": _number(get(metrics, "time_to_first_token_ms")),
            "decode_ms": _number(get(metrics, "generation_time_ms")),
        }
    timings = get(body, "timings")
    if get(timings, "prompt_ms") is not None:  # llama.cpp, ms
        return {
            "prefill_ms": _number(get(timings, "prompt_ms")),
            "decode_ms": _number(get(timings, "predicted_ms")),
        }
    if get(body, "eval_duration") is not None:  # Ollama native API, ns
        return {
            "queue_ms": _scaled(get(body, "load_duration"), 1e-6),
            "prefill_ms": _scaled(get(body, "prompt_eval_duration"), 1e-6),
            "decode_ms": _scaled(get(body, "eval_duration"), 1e-6),
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


def _seconds(times: Any) -> dict[str, float | None]:
    """Groq's and Cerebras' ``queue_time``/``prompt_time``/``completion_time`` (seconds) in ms."""
    return {
        "queue_ms": _scaled(get(times, "queue_time"), 1000),
        "prefill_ms": _scaled(get(times, "prompt_time"), 1000),
        "decode_ms": _scaled(get(times, "completion_time"), 1000),
    }


def usage_counts(body: Any) -> dict[str, int]:
    """Input, output and cached input tokens in the OpenAI, Responses or Anthropic shapes."""
    usage = get(body, "usage") or get(body, "x_groq", "usage")
    if usage is None:
        return {}
    inputs = get(usage, "prompt_tokens")
    if inputs is None:
        inputs = get(usage, "input_tokens")
    outputs = get(usage, "completion_tokens")
    if outputs is None:
        outputs = get(usage, "output_tokens")
    cached = get(usage, "prompt_tokens_details", "cached_tokens")
    if cached is None:
        cached = get(usage, "input_tokens_details", "cached_tokens")
    if cached is None:
        cached = get(usage, "cache_read_input_tokens")
    out = {"input_tokens": inputs, "output_tokens": outputs, "cached_tokens": cached}
    return {key: int(value) for key, value in out.items() if isinstance(value, (int, float))}
