"""From traces on a slow provider to a measured prediction for a faster one (DESIGN §12), end to end.

An agent runs against provider A into a store; provider B, with other prefill and decode
rates, is probed through the CLI; ``blame --target`` on A's store predicts the p95 on B;
then the same agent really runs against B.  The prediction and the fitted profile are held
to ±10% of what B did and what B is.
"""

from __future__ import annotations

import contextvars
import json
import random
import threading
import time
from functools import partial
from pathlib import Path

import clirun
import openai
import pytest
from agentscope.integrations.openai import OpenAIInstrumentor

import agentscope as ags
from agentscope.analysis.profiles import load_profile
from agentscope.sim import Profile, SimServer

cli = partial(clirun.cli, columns=160)

SLOW = Profile(queue_ms=10, prefill_ms=60, prefill_tokens_per_s=3_000, tokens_per_s=150, timings="none")
FAST = Profile(queue_ms=2, prefill_ms=25, prefill_tokens_per_s=12_000, tokens_per_s=600, timings="none")
TASKS = 20
WORDS = (
    "please",
    "look",
    "up",
    "the",
    "order",
    "history",
    "and",
    "shipping",
    "status",
    "for",
    "this",
    "customer",
)


def run_agent(base_url: str, store: Path, tasks: int = TASKS, workers: int = 1) -> None:
    """The agent: a plan call, two tools at once, a streamed draft, a short check; sizes vary by task
    (task ``k`` has the same sizes on every run). ``workers`` threads run the tasks, as many at once."""
    ags.init(service_name="support-agent", store=store, instrument=False)
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument()
    client = openai.OpenAI(base_url=base_url, api_key="sim")

    def prompt(words: int) -> list[dict]:
        return [{"role": "user", "content": " ".join(WORDS[i % len(WORDS)] for i in range(words))}]

    @ags.tool("search_kb")
    def search_kb() -> None:
        time.sleep(0.05)

    @ags.tool("fetch_account")
    def fetch_account() -> None:
        time.sleep(0.03)

    @ags.task("resolve_ticket")
    def resolve(k: int) -> None:
        sizes = random.Random(k)
        client.chat.completions.create(
            model="m", messages=prompt(sizes.randint(50, 1500)), max_tokens=sizes.randint(5, 40)
        )
        threads = [
            threading.Thread(target=contextvars.copy_context().run, args=(tool,))
            for tool in (search_kb, fetch_account)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        stream = client.chat.completions.create(
            model="m",
            messages=prompt(sizes.randint(200, 2500)),
            max_tokens=sizes.randint(20, 90),
            stream=True,
            stream_options={"include_usage": True},
        )
        for _ in stream:
            pass
        client.chat.completions.create(
            model="m", messages=prompt(sizes.randint(20, 300)), max_tokens=sizes.randint(2, 10)
        )

    def worker(first: int) -> None:
        for k in range(first, tasks, workers):
            resolve(k)

    try:
        threads = [threading.Thread(target=worker, args=(w,)) for w in range(workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        instrumentor.uninstrument()
        ags.shutdown()


@pytest.fixture
def providers():
    slow, fast = SimServer(SLOW).start(), SimServer(FAST).start()
    yield slow, fast
    slow.stop()
    fast.stop()


def test_a_probe_of_b_predicts_the_p95_the_agent_then_gets_on_b(providers, tmp_path):
    slow, fast = providers
    store_a, store_b, profile_path = tmp_path / "a.duckdb", tmp_path / "b.duckdb", tmp_path / "b.toml"
    run_agent(slow.base_url, store_a)
    probed = cli(
        "probe", "--base-url", fast.base_url, "--model", "m", "--store", str(store_a),
        "--calls", "16", "--yes", "--output", str(profile_path),
    )  # fmt: skip
    assert probed.returncode == 0, probed.stderr
    assert "filler text, never your recorded content" in probed.stderr
    fitted = load_profile(profile_path)
    assert fitted.value("decode_tokens_per_s") == pytest.approx(FAST.tokens_per_s, rel=0.10)
    for prompt in (100, 1000, 2500):  # the time to first token B takes, whichever terms the fit chose
        true_ttft = FAST.queue_ms + FAST.prefill_ms + prompt / FAST.prefill_tokens_per_s * 1000
        assert true_ttft <= fitted.predict_ms(prompt, 0) <= true_ttft * 1.1 + 10  # plus the client's time

    predicted = json.loads(
        cli("blame", "--store", str(store_a), "--target", str(profile_path), "--format", "json").stdout
    )
    (row,) = [r for r in predicted["whatif"] if r.get("target") == fitted.name]
    assert row["calls_without_tokens"] == 0 and predicted["tasks"]["count"] == TASKS

    run_agent(fast.base_url, store_b)
    measured = json.loads(cli("blame", "--store", str(store_b), "--format", "json").stdout)
    print(
        f"p95 on A {predicted['latency_ms']['p95']:.0f} ms; predicted on B {row['p95_ms']:.0f} ms; "
        f"measured on B {measured['latency_ms']['p95']:.0f} ms; p50 predicted {row['p50_ms']:.0f}, measured "
        f"{measured['latency_ms']['p50']:.0f} ms"
    )
    assert row["p95_ms"] == pytest.approx(measured["latency_ms"]["p95"], rel=0.10)
    assert row["p50_ms"] == pytest.approx(measured["latency_ms"]["p50"], rel=0.10)
    assert predicted["latency_ms"]["p95"] > 1.5 * measured["latency_ms"]["p95"]  # B really is faster


SLOW_ENGINE = Profile(
    queue_ms=4,
    prefill_ms=30,
    prefill_tokens_per_s=4_000,
    prefill_quadratic_ms=60,
    tokens_per_s=120,
    decode_context_ms=2.0,
    batch_slowdown=0.15,
    timings="none",
)
"""An engine like a real one: prefill convex in the prompt, decode slower in a long context, and
concurrent requests sharing its throughput."""
FAST_ENGINE = Profile(
    queue_ms=2,
    prefill_ms=20,
    prefill_tokens_per_s=10_000,
    prefill_quadratic_ms=15,
    tokens_per_s=420,
    decode_context_ms=0.5,
    batch_slowdown=0.15,
    timings="none",
)
"""A candidate whose prefill and decode speed up differently (prefill 2.5–4×, decode 3.5–4×)."""


@pytest.mark.parametrize("workers", [1, 4])
def test_on_a_non_linear_engine_the_prediction_holds_at_the_apps_concurrency(workers, tmp_path):
    slow, fast = SimServer(SLOW_ENGINE).start(), SimServer(FAST_ENGINE).start()
    tasks = 24 if workers == 1 else 48
    store_a, store_b, profile_path = tmp_path / "a.duckdb", tmp_path / "b.duckdb", tmp_path / "b.toml"
    try:
        run_agent(slow.base_url, store_a, tasks, workers)
        probed = cli(
            "probe", "--base-url", fast.base_url, "--model", "m", "--store", str(store_a),
            "--calls", "30", "--yes", "--output", str(profile_path),
        )  # fmt: skip
        assert probed.returncode == 0, probed.stderr
        fitted = load_profile(profile_path)
        predicted = json.loads(
            cli("blame", "--store", str(store_a), "--target", str(profile_path), "--format", "json").stdout
        )
        (row,) = [r for r in predicted["whatif"] if r.get("target") == fitted.name]
        run_agent(fast.base_url, store_b, tasks, workers)
        measured = json.loads(cli("blame", "--store", str(store_b), "--format", "json").stdout)["latency_ms"]
    finally:
        slow.stop()
        fast.stop()
    print(
        f"{workers} at once: probe load {fitted.concurrency}; p50 predicted {row['p50_ms']:.0f} ms, "
        f"measured {measured['p50']:.0f} ({row['p50_ms'] / measured['p50'] - 1:+.1%}); p95 predicted "
        f"{row['p95_ms']:.0f}, measured {measured['p95']:.0f} ({row['p95_ms'] / measured['p95'] - 1:+.1%}); "
        f"fitted {[(k, round(v.value, 3)) for k, v in fitted.figures.items()]}"
    )
    assert row["concurrency"] == fitted.concurrency and f"{fitted.concurrency} at a time" in probed.stderr
    assert (fitted.concurrency > 1) == (workers > 1)  # the default load is the app's own
    # At load the probe's background senders keep their calls back to back, where the app's tasks pause
    # for tools between calls: the probe meets a little more load than the app, +3-4% here.
    tolerance = 0.05 if workers == 1 else 0.075
    assert row["p50_ms"] == pytest.approx(measured["p50"], rel=tolerance)
    assert row["p95_ms"] == pytest.approx(measured["p95"], rel=tolerance)
