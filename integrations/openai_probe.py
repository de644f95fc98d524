"""Probe an OpenAI-compatible endpoint with the openai SDK: synthetic prompts of recorded sizes, streamed.

Never the recorded content: each prompt is filler text, sized after a two-call
calibration against the token counts the endpoint itself reports.  Calls stream
(``include_usage``) so the time to the first content token and the decode time
are measured apart; 429s are retried by the SDK, which honours ``retry-after``.
The run is bounded: at most the calls asked for, and none started after
``max_seconds``.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import openai

from agentscope.analysis.probing import ProbeCall

FILLER = ("the", "order", "ships", "from", "our", "main", "store", "and", "arrives", "soon")


def filler(words: int) -> str:
    """``words`` words of filler, opening with a word of its own so no two prompts share a prefix
    (an endpoint's prefix cache would otherwise serve the repeats and read as a fast prefill)."""
    opening = uuid.uuid4().hex[:8]
    return " ".join([opening, *(FILLER[i % len(FILLER)] for i in range(max(0, words - 1)))])


class Endpoint:
    """One candidate endpoint and model, reached through the real openai SDK."""

    def __init__(self, base_url: str, model: str, api_key: str, timeout_s: float = 120.0) -> None:
        self.model = model
        self.client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=5, timeout=timeout_s)
        self.base_tokens = 0.0
        self.tokens_per_word = 1.0

    def calibrate(self) -> None:
        """How many tokens the endpoint counts for a prompt of N filler words: base + N × per word.

        Two streamed calls, like the measured ones, so the first measured call does
        not pay for the connection or the SDK's first stream.
        """
        self.base_tokens, self.tokens_per_word = 0.0, 1.0
        (w1, t1), (w2, t2) = ((words, self.call(words, 1).input_tokens) for words in (8, 264))
        self.tokens_per_word = max((t2 - t1) / (w2 - w1), 1e-3)
        self.base_tokens = max(t1 - w1 * self.tokens_per_word, 0.0)

    def words_for(self, input_tokens: int) -> int:
        return max(1, round((input_tokens - self.base_tokens) / self.tokens_per_word))

    def call(self, input_tokens: int, output_tokens: int) -> ProbeCall:
        """One streamed call of about ``input_tokens`` in and exactly ``output_tokens`` asked for."""
        started = time.perf_counter()
        first = None
        usage = None
        stream = self.client.chat.completions.create(
            model=self.model,
            messages=[{"role": "user", "content": filler(self.words_for(input_tokens))}],
            max_tokens=output_tokens,
            stream=True,
            stream_options={"include_usage": True},
        )
        for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            if first is None and any(c.delta.content or c.delta.tool_calls for c in chunk.choices):
                first = time.perf_counter()
        ended = time.perf_counter()
        first = first or ended
        return ProbeCall(
            input_tokens=usage.prompt_tokens if usage else input_tokens,
            output_tokens=usage.completion_tokens if usage else output_tokens,
            ttft_ms=(first - started) * 1000,
            total_ms=(ended - started) * 1000,
        )


def probe(
    endpoint: Endpoint,
    sizes: Sequence[tuple[int, int]],
    concurrency: int = 1,
    max_seconds: float = 600.0,
    on_call: Callable[[ProbeCall], None] | None = None,
) -> list[ProbeCall]:
    """Send one call per size, ``concurrency`` at a time; none is started after ``max_seconds``.

    Under load the sizes go in a shuffled (fixed) order, so the load a call meets
    does not depend on its size; the first and last calls still meet less of it."""
    deadline = time.monotonic() + max_seconds
    if concurrency > 1:
        sizes = random.Random(0).sample(list(sizes), len(sizes))
    endpoint.calibrate()

    def one(size: tuple[int, int]) -> ProbeCall | None:
        if time.monotonic() > deadline:
            return None
        measured = endpoint.call(*size)
        if on_call is not None:
            on_call(measured)
        return measured

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        results = list(pool.map(one, sizes))
    return [r for r in results if r is not None]
