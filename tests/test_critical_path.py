"""Critical path on hand-checked traces (DESIGN §5)."""

from __future__ import annotations

import itertools

from tracebuild import MS, batch, path, span, trace

from agentscope.analysis.critical_path import critical_path
from agentscope.analysis.trace import Trace


def test_sequential_children_and_gaps():
    t = trace(span("R", None, "task", 0, 100), span("A", "R", "tool", 10, 40), span("B", "R", "llm", 50, 90))
    assert path(t) == [("R", 0, 10), ("A", 10, 40), ("R", 40, 50), ("B", 50, 90), ("R", 90, 100)]


def test_overlapping_children_the_later_ending_one_is_on_the_path():
    t = trace(span("R", None, "task", 0, 100), span("A", "R", "tool", 10, 60), span("B", "R", "tool", 20, 80))
    assert path(t) == [("R", 0, 20), ("B", 20, 80), ("R", 80, 100)]


def test_child_that_outlives_its_parent_is_clipped():
    t = trace(span("R", None, "task", 0, 100), span("A", "R", "tool", 50, 150))
    assert path(t) == [("R", 0, 50), ("A", 50, 100)]


def test_child_that_starts_before_its_parent_is_clipped():
    t = trace(span("R", None, "task", 10, 100), span("A", "R", "tool", 0, 30))
    assert path(t) == [("A", 10, 30), ("R", 30, 100)]


def test_nested_parallelism():
    t = trace(
        span("R", None, "task", 0, 100),
        span("S", "R", "step", 10, 90),
        span("A", "S", "tool", 20, 50),
        span("B", "S", "llm", 15, 70),
        span("C", "R", "tool", 5, 60),
    )
    assert path(t) == [("R", 0, 10), ("S", 10, 15), ("B", 15, 70), ("S", 70, 90), ("R", 90, 100)]


def test_zero_length_spans_add_nothing():
    t = trace(
        span("R", None, "task", 0, 100), span("Z", "R", "tool", 50, 50), span("E", "R", "tool", 100, 100)
    )
    assert path(t) == [("R", 0, 100)]


def test_equal_end_times_the_earlier_start_wins():
    t = trace(span("R", None, "task", 0, 100), span("B", "R", "tool", 30, 80), span("A", "R", "tool", 10, 80))
    assert path(t) == [("R", 0, 10), ("A", 10, 80), ("R", 80, 100)]


def test_child_entirely_after_its_parent_is_off_the_path():
    t = trace(
        span("R", None, "task", 0, 100), span("A", "R", "tool", 10, 20), span("F", "R", "tool", 120, 200)
    )
    assert path(t) == [("R", 0, 10), ("A", 10, 20), ("R", 20, 100)]


def _tiles(t: Trace, task: int) -> bool:
    segments = critical_path(t, task)
    return (
        segments[0][1] == t.start[task]
        and segments[-1][2] == t.end[task]
        and all(a[2] == b[1] for a, b in itertools.pairwise(segments))
    )


def test_ten_thousand_deep_chain():
    spans = [span("s0", None, "task", 0, 20_000)]
    for i in range(1, 10_000):
        spans.append(span(f"s{i}", f"s{i - 1}", "step", i, 20_000 - i))
    t = trace(*spans)
    segments = critical_path(t, 0)
    assert len(segments) == 2 * 10_000 - 1
    assert _tiles(t, 0)


def test_five_thousand_wide_fan_out():
    spans = [span("R", None, "task", 0, 10_000)]
    spans += [span(f"c{i}", "R", "tool", i, 5_000 + i) for i in range(5_000)]
    t = trace(*spans)
    assert path(t) == [("R", 0, 4_999), ("c4999", 4_999, 9_999), ("R", 9_999, 10_000)]


def test_orphans_are_reported_and_tasks_found():
    t = trace(
        span("R", None, "task", 0, 100),
        span("A", "R", "tool", 10, 20),
        span("O", "missing-parent", "tool", 30, 40),
    )
    assert [t.span_id(i) for i in t.orphans] == ["O"]
    assert [t.span_id(i) for i in t.tasks()] == ["R"]


def test_a_loop_of_parent_ids_is_cut_at_its_earliest_span():
    """Parent ids that loop (malformed input) left the loop's spans out of every walk, and the walks up
    the parents of the repair rules never ended; the loop is cut where it starts first."""
    t = trace(
        span("T", "C", "task", 0, 100),
        span("C", "T", "llm", 10, 60, model="m"),  # the task's parent id is its own child's
        span("L1", "L2", "llm", 20, 50, model="m"),  # two records of one call, each the other's parent
        span("L2", "L1", "llm", 20, 50, model="m"),
        span("S", "S", "tool", 70, 80),  # its own parent
    )
    assert sorted(t.span_id(i) for i in t.orphans) == ["L1", "S", "T"]
    assert [t.span_id(i) for i in t.tasks()] == ["T"] and path(t)[1] == ("C", 10, 60)
    assert all(t.root_of(i) in t.orphans for i in range(len(t)))


def test_task_rules_agent_then_root_and_no_llm_no_task():
    agent = trace(
        span("root", None, "step", 0, 100),
        span("make", "root", "agent", 0, 5, operation="create_agent"),
        span("run", "root", "agent", 5, 100, operation="invoke_agent"),
        span("call", "run", "llm", 10, 90),
    )
    assert [agent.span_id(i) for i in agent.tasks()] == ["run"]
    plain = trace(span("root", None, "step", 0, 100), span("q", "root", "tool", 10, 20))
    assert [plain.span_id(i) for i in plain.tasks()] == ["root"]
    lone_db = trace(span("root", None, "step", 0, 100), span("q", "root", "db", 10, 20))
    assert lone_db.tasks() == []


def test_many_tasks_in_one_trace_and_traces_without_trace_ids():
    rows = [span("batch", None, "step", 0, 1000)]
    for k in range(3):
        rows += [
            span(f"task{k}", "batch", "task", k * 100, k * 100 + 50),
            span(f"t{k}", f"task{k}", "tool", k * 100, k * 100 + 40),
        ]
    t = trace(*rows)
    assert [t.span_id(i) for i in t.tasks()] == ["task0", "task1", "task2"]
    for row in rows:
        row["trace_id"] = None
    rows.append(span("other-root", None, "task", 0, 10))
    groups = list(batch(*rows).traces())
    assert sorted(len(g) for g in groups) == [1, 7]
    assert MS == 1_000_000


def test_a_consumer_under_a_producer_is_not_blocking():
    t = trace(
        span("R", None, "task", 0, 100),
        span("P", "R", "tool", 10, 20, span_kind="PRODUCER"),
        span("C", "P", "tool", 30, 400, span_kind="CONSUMER"),
        span("L", "R", "llm", 20, 90),
    )
    assert path(t) == [("R", 0, 10), ("P", 10, 20), ("L", 20, 90), ("R", 90, 100)]
    assert [t.span_id(i) for i in t.handoffs] == ["C"]
