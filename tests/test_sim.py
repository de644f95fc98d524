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
