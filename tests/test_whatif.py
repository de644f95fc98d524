"""What-if re-simulation (DESIGN §6): exact hand-computed cases and properties over random trees."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_attribution import random_trees
from tracebuild import MS, span, trace
from whatif_walk import walk

from agentscope.analysis import KEYS
from agentscope.analysis.tasks import explain
from agentscope.analysis.whatif import Job, Scenario, reductions, simulate_batch


def new_ms(t, *variants) -> list[float]:
    return [ns / MS for ns in explain(t, 0, list(variants)).result.whatif_ns]


def test_sequential_task_shrinks_by_exactly_the_inference_saving():
    t = trace(
        span("R", None, "task", 0, 1000),
        span("L1", "R", "llm", 0, 300, server_prefill_ms=100, server_decode_ms=200),
        span("T", "R", "tool", 300, 500),
        span("L2", "R", "llm", 550, 950),
    )
    inference = 300 + 400
    for f in (1.7, 3.6, math.inf):
        (got,) = new_ms(t, {"inference": f})
        assert got == pytest.approx(1000 - inference * (1 - 1 / f))


def test_llm_parallel_to_a_longer_tool_does_not_shrink_at_all():
    t = trace(
        span("R", None, "task", 0, 1000),
        span("L", "R", "llm", 0, 600),
        span("T", "R", "tool", 0, 900),
    )
    assert new_ms(t, {"inference": 3.6}, {"inference": math.inf}) == [1000, 1000]


def test_design_example_shrinking_a_changes_nothing():
    t = trace(
        span("R", None, "task", 0, 1000),
        span("A", "R", "llm", 0, 400),
        span("B", "R", "tool", 50, 450),
        span("C", "R", "tool", 700, 900),
    )
    assert new_ms(t, {"inference": 4}) == [1000]


def test_mixed_case_by_hand():
    # A (llm 0-400) ∥ B (tool 50-450); C (llm 700-900) waits for both, then R's tail of 100.
    # inference ×2: A ends 200, B still 450; C starts 450+250=700, lasts 100 → 800; R ends 900.
    # inference ×∞: C lasts 0 → starts 700, R ends 800.
    # tool ×2: B lasts 200 → ends 250; A ends 400; C starts 400+(700−450)=650, ends 850; R ends 950.
    t = trace(
        span("R", None, "task", 0, 1000),
        span("A", "R", "llm", 0, 400),
        span("B", "R", "tool", 50, 450),
        span("C", "R", "llm", 700, 900),
    )
    assert new_ms(t, {"inference": 2}, {"inference": math.inf}, {"tool": 2}) == [900, 800, 950]


def test_gaps_scale_with_the_parents_self_time_mix():
    # R's self time is 60% cpu (cpu_ns 240 ms of 400 ms self); cpu ×2 shrinks each gap by 30%.
    t = trace(
        span("R", None, "task", 0, 1000, cpu_ns=240 * MS, thread_id=1),
        span("T", "R", "tool", 200, 800, thread_id=1, cpu_ns=0),
    )
    assert new_ms(t, {"cpu": 2}) == [pytest.approx(600 + 400 * 0.7)]


def test_component_speedups_and_unsplit_range():
    t = trace(
        span("R", None, "task", 0, 1000),
        span("L", "R", "llm", 0, 1000, ttft_s=0.2),
    )
    scenario = Scenario("inference x2", {"inference": 2})
    # optimistic: unsplit 200 and decode 800 both halve; pessimistic: only decode halves.
    assert new_ms(t, scenario.speedups, scenario.pessimistic) == [500, 600]
    assert new_ms(t, {"inference.decode": 4}) == [pytest.approx(400)]


def test_a_scenario_leaves_alone_what_it_does_not_name():
    t = trace(
        span("R", None, "task", 0, 1000),
        span("L", "R", "llm", 0, 1000, server_queue_ms=300, server_prefill_ms=100, server_decode_ms=400),
        span("F", "R", "tool", 0, 0),
    )
    # queue.provider (300) and network (200) stay; prefill+decode 500 → 0.
    assert new_ms(t, {"inference": math.inf}) == [500]


def test_a_call_cut_by_its_parent_is_blamed_and_simulated_alike():
    # The call outlives its task; its HTTP attempt starts after the task ended. Within the task the call
    # has no later child, so its time there is its own (inference), not a backoff between attempts.
    t = trace(
        span("R", None, "task", 0, 0.1),
        span("L", "R", "llm", 0, 0.2),
        span("H", "L", "http", 0.2, 0.2),
        span("S", "L", "task", 0, 0),
    )
    result = explain(t, 0, [{"inference": 3.6}]).result
    categories = dict(zip(KEYS, result.components, strict=True))
    assert categories["inference.unsplit"] == result.duration_ns
    assert result.whatif_ns == [pytest.approx(result.duration_ns / 3.6)]


def test_the_wait_between_attempts_is_backoff_and_keeps_its_time():
    """A 429, 300 ms of backoff inside the call, the retry: infinitely fast inference removes the retry's
    600 ms of model time, not the failed attempt's nor the wait between them."""
    t = trace(
        span("T", None, "task", 0, 1000),
        span("L", "T", "llm", 0, 1000),
        span("H1", "L", "http", 0, 100, status="ERROR", http_status=429),
        span("H2", "L", "http", 400, 1000),
    )
    categories = dict(zip(KEYS, explain(t, 0).result.components, strict=True))
    assert categories["retry.backoff"] == 300 * MS and categories["retry.failed"] == 100 * MS
    assert new_ms(t, {"inference": math.inf}) == [pytest.approx(400)]


@settings(max_examples=300, deadline=None)
@given(random_trees())
def test_properties_hold_for_every_trace(spans):
    t = trace(*spans)
    result = explain(t, 0).result
    categories = {}
    for key, ns in zip(KEYS, result.components):
        categories[key.split(".")[0]] = categories.get(key.split(".")[0], 0.0) + ns
    variants = [{}, {"inference": 3.6}, {"tool": 2, "db": 5}, {"inference": math.inf}]
    same, faster, two, infinite = explain(t, 0, variants).result.whatif_ns
    assert same == result.duration_ns
    for got in (faster, two, infinite):
        assert got <= result.duration_ns + 1e-3
    assert result.duration_ns - faster <= categories["inference"] * (1 - 1 / 3.6) + 1_000
    assert result.duration_ns - infinite <= categories["inference"] + 1_000


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_batch_simulation_gives_what_a_walk_span_by_span_gives(data):
    """Several random traces in one batch, some spans handed off (CONSUMER under PRODUCER), some LLM
    calls' scales replaced as a candidate profile does: each task's new durations are the walk's."""
    scenarios = [Scenario("a", {"inference": 3.6}), Scenario("b", {"tool": 2, "db": 5, "inference": 1.7})]
    variants = [{}, *(v for s in scenarios for v in (s.speedups, s.pessimistic)), {"inference": math.inf}]
    tables = reductions(variants)
    jobs = []
    for spans in data.draw(st.lists(random_trees(), min_size=1, max_size=4)):
        for row in spans[1:]:
            row["span_kind"] = data.draw(st.sampled_from(["INTERNAL", "INTERNAL", "PRODUCER", "CONSUMER"]))
        e = explain(trace(*spans), 0)
        llm = [i for i in e.mixes if e.trace.kind[i] == "llm"]
        predicted = data.draw(st.sampled_from([None, 0.25, 2.0]))
        overrides = {i: [predicted, *[None] * (len(tables) - 1)] for i in llm} if predicted else None
        jobs.append(Job(e.trace, e.task, e.mixes, e.leaves, e.between, overrides))
    batch = simulate_batch(jobs, tables)
    for job, got in zip(jobs, batch, strict=True):
        expected = walk(job.trace, job.task, job.mixes, job.leaves, tables, job.between, job.overrides)
        assert got == pytest.approx(expected, rel=1e-12, abs=1e-3)
