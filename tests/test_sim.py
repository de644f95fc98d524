"""The simulated provider's knobs for probing: prefill by prompt size, exact max_tokens, a capacity."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from agentscope.sim import Profile, SimServer


@pytest.fixture
def sim(request):
    server = SimServer(request.param).start()
    yield server
    server.stop()


def ask(server: SimServer, words: int, max_tokens: int | None = None):
    client = openai.OpenAI(base_url=server.base_url, api_key="sim", max_retries=0)
    prompt = " ".join(["token"] * words)
    options = {"max_tokens": max_tokens} if max_tokens is not None else {}
    started = time.perf_counter()
    response = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": prompt}], **options
    )
    return response, (time.perf_counter() - started) * 1000


@pytest.mark.parametrize(
    "sim", [Profile(queue_ms=0, prefill_ms=10, prefill_tokens_per_s=10_000, tokens_per_s=1e9)], indirect=True
)
def test_prefill_grows_with_the_prompt_and_is_reported(sim):
    short, _ = ask(sim, 10)
    long, _ = ask(sim, 2_000)
    assert long.usage.prompt_tokens == 2_008
    assert short.usage.prompt_time == pytest.approx(0.010 + 18 / 10_000)
    assert long.usage.prompt_time == pytest.approx(0.010 + 2_008 / 10_000)


@pytest.mark.parametrize(
    "sim", [Profile(queue_ms=0, prefill_ms=1, tokens_per_s=1_000, output_tokens=5)], indirect=True
)
def test_max_tokens_is_honoured_exactly(sim):
    response, elapsed = ask(sim, 3, max_tokens=120)
    assert response.usage.completion_tokens == 120
    assert response.usage.completion_time == pytest.approx(0.120)
    assert elapsed >= 120
    assert ask(sim, 3)[0].usage.completion_tokens == 5


@pytest.mark.parametrize(
    "sim", [Profile(queue_ms=0, prefill_ms=100, tokens_per_s=1e9, output_tokens=1, capacity=2)], indirect=True
)
def test_a_capacity_queues_the_rest_and_reports_the_wait(sim):
    clients = [openai.OpenAI(base_url=sim.base_url, api_key="sim", max_retries=0) for _ in range(6)]
    ask(sim, 3)  # the server's first request is slower; not part of the measure
    together = threading.Barrier(6)

    def at_once(client: openai.OpenAI):
        together.wait(timeout=30)
        started = time.perf_counter()
        response = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        return response, (time.perf_counter() - started) * 1000

    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(at_once, clients))
    queues = sorted(response.usage.queue_time for response, _ in answers)
    assert queues[:2] == pytest.approx([0, 0], abs=0.02)  # two at once, then two more, then two more
    assert queues[2:4] == pytest.approx([0.1, 0.1], abs=0.04)
    assert queues[4:] == pytest.approx([0.2, 0.2], abs=0.05)
    assert max(elapsed for _, elapsed in answers) >= 300


@pytest.mark.parametrize(
    "sim",
    [Profile(queue_ms=0, prefill_ms=10, prefill_quadratic_ms=40, tokens_per_s=1_000, decode_context_ms=2.0)],
    indirect=True,
)
def test_prefill_is_convex_in_the_prompt_and_decode_slows_with_the_context(sim):
    short, _ = ask(sim, 92, max_tokens=10)  # 100 prompt tokens
    long, _ = ask(sim, 1_992, max_tokens=10)  # 2,000
    assert short.usage.prompt_time == pytest.approx(0.010 + 0.040 * 0.1**2)
    assert long.usage.prompt_time == pytest.approx(0.010 + 0.040 * 2.0**2)
    assert short.usage.completion_time == pytest.approx(0.010 + 10 * 0.002 * (100 + 5) / 1000)
    assert long.usage.completion_time == pytest.approx(0.010 + 10 * 0.002 * (2_000 + 5) / 1000)


@pytest.mark.parametrize(
    "sim",
    [Profile(queue_ms=0, prefill_ms=100, tokens_per_s=100, batch_slowdown=0.5, output_tokens=10)],
    indirect=True,
)
def test_requests_in_flight_share_the_engine(sim):
    alone, _ = ask(sim, 3)
    clients = [openai.OpenAI(base_url=sim.base_url, api_key="sim", max_retries=0) for _ in range(3)]
    together = threading.Barrier(3)

    def at_once(client: openai.OpenAI):
        together.wait(timeout=30)
        return client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])

    with ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(at_once, clients))
    assert alone.usage.prompt_time == pytest.approx(0.100)
    assert alone.usage.completion_time == pytest.approx(0.100)
    slowed = sorted(round(a.usage.prompt_time / 0.100 * 2) / 2 for a in answers)
    assert slowed == [1.0, 1.5, 2.0]  # each request slowed by the others in flight when it started
    assert [a.usage.completion_time / a.usage.prompt_time for a in answers] == pytest.approx([1, 1, 1])
