"""Probe an OpenAI-compatible endpoint with the openai SDK: synthetic prompts of recorded sizes, streamed.

Never the recorded content: each prompt is filler text, sized after a two-call
calibration against the token counts the endpoint itself reports.  Calls stream
(``include_usage``) so the time to the first content token and the decode time
are measured apart; 429s are retried by the SDK, which honours ``retry-after``.
The run is bounded: at most the calls asked for, and none started after
``max_seconds``.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import openai

from agentscope.analysis.probing import ProbeCall, load_plan

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
    recorded: Sequence[tuple[int, int]] = (),
) -> list[ProbeCall]:
    """One measured call per size, in the order sent; at ``concurrency`` > 1 the measured calls go one at
    a time while ``concurrency − 1`` senders make the load with calls the size of the ``recorded`` ones
    (default: ``sizes``), not measured (:func:`agentscope.analysis.probing.load_plan`).  The first
    measured call waits until each of those senders has finished a call and sends its next, so that
    it meets neither an idle engine nor streams that all started together; no call is started after
    ``max_seconds``."""
    deadline = time.monotonic() + max_seconds
    measured_sizes, background = load_plan(sizes, recorded or sizes, concurrency)
    senders = max(1, concurrency) - 1 if background else 0
    pending = iter(background)
    lock = threading.Lock()
    warmed, done = [threading.Event() for _ in range(senders)], threading.Event()
    errors: list[BaseException] = []
    measured: list[ProbeCall] = []
    endpoint.calibrate()

    def load(warm: threading.Event) -> None:
        try:
            for sent in itertools.count():
                if done.is_set() or errors or time.monotonic() > deadline:
                    return
                with lock:
                    size = next(pending, None)
                if size is None:
                    return
                if sent:  # its first call done, it sends the next: the measured calls may start
                    warm.set()
                endpoint.call(*size)
        finally:
            warm.set()  # whatever happens, the measured calls do not wait for this sender

    def measure() -> None:
        try:
            for warm in warmed:
                warm.wait(timeout=max(0.0, deadline - time.monotonic()))
            for size in measured_sizes:
                if errors or time.monotonic() > deadline:
                    return
                call = endpoint.call(*size)
                measured.append(call)
                if on_call is not None:
                    on_call(call)
        finally:
            done.set()

    def run(work: Callable[..., None], *args: Any) -> None:
        try:
            work(*args)
        except BaseException as exc:  # raised to the caller once every sender has stopped
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(measure,), name="agentscope-probe")]
    threads += [
        threading.Thread(target=run, args=(load, warm), name=f"agentscope-probe-load-{k}")
        for k, warm in enumerate(warmed)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return measured
