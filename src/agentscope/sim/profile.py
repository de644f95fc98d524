"""How the simulated provider behaves: its latencies, errors and what it reports."""

from __future__ import annotations

import random
from dataclasses import dataclass

TIMING_DIALECTS = ("groq", "openai", "cerebras", "vllm", "llamacpp", "ollama", "tgi", "none")
"""The ways the simulated provider can report its own timings (see :attr:`Profile.timings`)."""


@dataclass(frozen=True)
class Profile:
    """Latency profile of the simulated provider (all times in milliseconds)."""

    queue_ms: float = 20.0
    """Time a request waits for capacity before prefill starts."""
    prefill_ms: float = 60.0
    """Prompt processing time; the first token follows it."""
    prefill_tokens_per_s: float = 0.0
    """Prompt processing rate: each request's prefill is ``prefill_ms`` plus its input tokens at this
    rate (0: prefill does not grow with the prompt)."""
    prefill_quadratic_ms: float = 0.0
    """Prefill's growth beyond linear, in ms per (1,000 prompt tokens)²: attention on a real engine."""
    tokens_per_s: float = 500.0
    """Decode rate after the first token."""
    decode_context_ms: float = 0.0
    """Each output token's extra cost per 1,000 tokens of context (the prompt and the answer so far, on
    average half of it): a real engine reads the whole KV cache for every token."""
    batch_slowdown: float = 0.0
    """Each other request in flight when a request starts slows its prefill and decode by this share
    (0.25: four at once take 1.75× as long each): an engine batching concurrent streams shares its
    throughput among them."""
    output_tokens: int = 40
    """Tokens in each completion without ``max_tokens``; with it (chat completions), exactly that many."""
    capacity: int = 0
    """Requests served at once (0: unlimited); the others wait for a slot, in arrival order, and the
    wait is added to the queue time the response reports."""
    jitter: float = 0.0
    """Relative spread of each latency, e.g. 0.2 = uniform within ±20%."""
    error_rate: float = 0.0
    """Share of requests answered 500."""
    rate_limit_rate: float = 0.0
    """Share of requests answered 429 with ``retry-after-ms``."""
    retry_after_ms: float = 50.0
    rate_limit_first: bool = False
    """Answer 429 to every call's first attempt (``x-stainless-retry-count: 0``), so each call is
    exactly one 429 and then its retry."""
    timings: str = "groq"
    """In which provider's dialect the response reports its timings (FACTS §3): ``groq``
    (usage.queue_time, prompt_time, completion_time in seconds), ``openai`` (an
    ``openai-processing-ms`` header), ``cerebras`` (``time_info``, seconds), ``vllm`` (``metrics``,
    ms), ``llamacpp`` (``timings``, ms), ``ollama`` (``*_duration``, ns), ``tgi`` (``x-queue-time``,
    ``x-inference-time`` … headers, ms; none on streams) or ``none``."""
    traced: bool = False
    """Join the caller's trace as vLLM does with tracing on: a SERVER span ``llm_request`` per chat
    completion, under the caller's ``traceparent``, with vLLM's ``gen_ai.latency.*`` timings (seconds),
    recorded through this process's OpenTelemetry tracer provider."""
    seed: int | None = None

    def draw(self, rng: random.Random, value: float) -> float:
        if self.jitter <= 0:
            return value
        return max(0.0, value * (1 + rng.uniform(-self.jitter, self.jitter)))
