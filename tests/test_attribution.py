"""Category attribution (DESIGN §4): LLM splits, cpu/other, retries, and the sum invariant."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tracebuild import MS, span, trace

from agentscope.analysis import KEYS
from agentscope.analysis.tasks import explain


def ms_by_key(t, task=0) -> dict[str, float]:
    result = explain(t, task).result
    return {key: round(ns / MS, 6) for key, ns in zip(KEYS, result.components) if abs(ns) > 1e-6}


def test_llm_with_server_timings():
    t = trace(
        span("R", None, "task", 0, 1000),
        span("L", "R", "llm", 0, 1000, server_queue_ms=100, server_prefill_ms=200, server_decode_ms=500),
    )
    assert ms_by_key(t) == {
        "queue.provider": 100,
        "inference.prefill": 200,
        "inference.decode": 500,
        "network": 200,
    }


def test_server_timings_longer_than_the_call_are_scaled_down():
    t = trace(
        span("R", None, "task", 0, 100),
        span("L", "R", "llm", 0, 100, server_queue_ms=50, server_prefill_ms=50, server_decode_ms=100),
    )
    assert ms_by_key(t) == {"queue.provider": 25, "inference.prefill": 25, "inference.decode": 50}


def test_total_only_server_time_is_unsplit_plus_network():
    t = trace(span("R", None, "task", 0, 100), span("L", "R", "llm", 0, 100, server_total_ms=70))
    assert ms_by_key(t) == {"inference.unsplit": 70, "network": 30}


def test_streamed_without_server_timings_splits_at_the_first_token():
    t = trace(span("R", None, "task", 0, 100), span("L", "R", "llm", 0, 100, ttft_s=0.03, streamed=True))
    assert ms_by_key(t) == {"inference.unsplit": 30, "inference.decode": 70}


def test_callers_time_between_chunks_is_the_callers_not_decode():
    t = trace(
        span("R", None, "task", 0, 100, cpu_ns=0, thread_id=1),
        span("L", "R", "llm", 0, 100, ttft_s=0.01, stream_wait_ns=40 * MS, thread_id=1, cpu_ns=0),
    )
    assert ms_by_key(t) == {"inference.unsplit": 10, "inference.decode": 30, "other": 60}


@pytest.mark.parametrize("via_http", [False, True], ids=["under the call", "under its HTTP attempt"])
def test_the_providers_own_span_gives_the_call_its_timings(via_http):
    server_parent = "H" if via_http else "L"
    t = trace(
        span("R", None, "task", 0, 1000),
        span("L", "R", "llm", 0, 1000, input_tokens=900, output_tokens=100),
        *([span("H", "L", "http", 10, 990, span_kind="CLIENT")] if via_http else []),
        span(
            "S",
            server_parent,
            "llm",
            100,
            900,
            span_kind="SERVER",
            server_queue_ms=100,
            server_prefill_ms=200,
            server_decode_ms=450,
            input_tokens=900,
            output_tokens=100,
        ),
        span("C", "S", "llm", 200, 850, server_prefill_ms=200, server_decode_ms=450),
    )
    assert ms_by_key(t) == {
        "queue.provider": 100,
        "inference.prefill": 200,
        "inference.decode": 450,
        "network": 250,  # 200 outside the provider's span, 50 inside it not in its timings
    }
    result = explain(t, 0).result
    assert (result.llm_calls, result.input_tokens, result.serial_llm_calls) == (1, 900, 1)
    assert set(result.operations) == {"L"}


def test_no_timings_at_all_is_unsplit():
    t = trace(span("R", None, "task", 0, 100), span("L", "R", "llm", 20, 100))
    assert ms_by_key(t) == {"inference.unsplit": 80, "other": 20}


@pytest.mark.parametrize("garbage", [-3.0, float("nan"), float("inf")])
def test_negative_or_non_finite_server_timings_are_no_timings(garbage):
    """Clamped to 0, a garbage prefill made the server's part 0 and the whole call network."""
    only = trace(span("R", None, "task", 0, 100), span("L", "R", "llm", 20, 100, server_prefill_ms=garbage))
    assert ms_by_key(only) == {"inference.unsplit": 80, "other": 20}
    beside = trace(
        span("R", None, "task", 0, 1000),
        span("L", "R", "llm", 0, 1000, server_queue_ms=garbage, server_prefill_ms=200, server_decode_ms=500),
    )
    assert ms_by_key(beside) == {"inference.prefill": 200, "inference.decode": 500, "network": 300}


def test_partial_segment_of_an_llm_takes_components_in_proportion():
    t = trace(
        span("R", None, "task", 0, 100),
        span("L", "R", "llm", 0, 100, server_prefill_ms=50, server_decode_ms=50),
        span("T", "L", "tool", 0, 40),
    )
    assert ms_by_key(t) == {"tool": 40, "inference.prefill": 30, "inference.decode": 30}


def test_self_time_splits_into_cpu_and_other_by_own_cpu():
    t = trace(
        span("R", None, "task", 0, 100, cpu_ns=40 * MS, thread_id=7),
        span("T", "R", "tool", 20, 70, cpu_ns=20 * MS, thread_id=7),
        span("U", "R", "tool", 70, 80, cpu_ns=5 * MS, thread_id=8),
    )
    # own CPU = 40 − 20 (same thread) = 20 ms over 40 ms of self time → half cpu.
    assert ms_by_key(t) == {"tool": 60, "cpu": 20, "other": 20}


def test_failed_attempt_and_backoff_are_retry():
    t = trace(
        span("R", None, "task", 0, 100),
        span("A1", "R", "tool", 0, 30, name="billing", status="ERROR", attempt=1),
        span("W", "R", "backoff", 30, 50),
        span("A2", "R", "tool", 50, 90, name="billing", attempt=2),
    )
    assert ms_by_key(t) == {"retry.failed": 30, "retry.backoff": 20, "tool": 40, "other": 10}


def test_http_under_llm_is_transport_with_failed_attempts_and_backoff():
    t = trace(
        span("R", None, "task", 0, 100),
        span("L", "R", "llm", 0, 100, server_prefill_ms=20, server_decode_ms=40),
        span("H1", "L", "http", 0, 10, name="POST", status="ERROR"),
        span("H2", "L", "http", 30, 100, name="POST"),
    )
    assert ms_by_key(t) == {
        "retry.failed": 10,
        "retry.backoff": 20,
        "inference.prefill": 20,
        "inference.decode": 40,
        "network": 10,
    }


@st.composite
def random_trees(draw):
    n = draw(st.integers(1, 25))
    kinds = ["task", "step", "tool", "db", "llm", "http", "queue", "backoff", "agent"]
    spans = [
        span(
            "s0",
            None,
            "task",
            0,
            draw(st.integers(1, 10_000)) / 10,
            cpu_ns=draw(st.integers(0, 10**9)),
            thread_id=1,
        )
    ]
    for i in range(1, n):
        parent = draw(st.integers(0, i - 1))
        a = draw(st.integers(-100, 11_000)) / 10
        b = a + draw(st.integers(0, 5_000)) / 10
        extra = {}
        kind = draw(st.sampled_from(kinds))
        if kind == "llm":
            extra = draw(
                st.sampled_from(
                    [
                        {},
                        {"server_queue_ms": 5.0, "server_prefill_ms": 50.0, "server_decode_ms": 700.0},
                        {"server_total_ms": 30.0},
                        {"ttft_s": 0.02, "stream_wait_ns": 50 * MS},
                    ]
                )
            )
        extra["cpu_ns"] = draw(st.integers(0, 10**9))
        extra["thread_id"] = draw(st.integers(1, 2))
        extra["status"] = draw(st.sampled_from(["UNSET", "ERROR"]))
        extra["name"] = draw(st.sampled_from(["x", "y"]))
        spans.append(span(f"s{i}", f"s{parent}", kind, a, b, **extra))
    return spans


@settings(max_examples=300, deadline=None)
@given(random_trees())
def test_categories_sum_to_the_tasks_wall_time(spans):
    t = trace(*spans)
    result = explain(t, 0).result
    assert sum(result.components) == pytest.approx(result.duration_ns, abs=1_000)
    assert all(ns >= -1e-6 for ns in result.components)


def test_a_db_or_http_operation_recorded_by_two_instrumentations_is_one_call():
    """OpenTelemetry's redis and httpx instrumentations beside agentscope's: each operation is a span of
    one package with the other's inside it.  One call each; the queries a repository call's span holds
    stay calls of their own."""
    theirs, ours = "opentelemetry.instrumentation.redis", "agentscope"
    t = trace(
        span("R", None, "task", 0, 100),
        span("S", "R", "db", 0, 10, label="redis", scope=theirs),
        span("s", "S", "db", 1, 9, label="redis SET", scope=ours),
        span("H", "R", "http", 10, 30, label="127.0.0.1", scope=ours),
        span("h", "H", "http", 11, 29, label="GET", scope="opentelemetry.instrumentation.httpx"),
        span("Q", "R", "db", 30, 60, label="load_customer", scope=ours),
        span("q1", "Q", "db", 31, 40, label="postgresql SELECT", scope=ours),
        span("q2", "Q", "db", 41, 59, label="postgresql SELECT", scope=theirs),
    )
    operations = {label: calls for label, (_, _, calls) in explain(t, 0).result.operations.items()}
    assert operations == {"redis": 1, "127.0.0.1": 1, "load_customer": 1, "postgresql SELECT": 2}
    assert ms_by_key(t)["db"] == pytest.approx(40) and ms_by_key(t)["network"] == pytest.approx(20)
