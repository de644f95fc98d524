"""agentscope's spans join another package's open span that is not current (DESIGN §14: traces whole).

OpenInference's LangChain tracer and Langfuse's openai drop-in start their spans with
``tracer.start_span`` and never attach them; the spans here are started the same way, through the
same provider, by a tracer of another name.
"""

from __future__ import annotations

import threading

from opentelemetry import trace

import agentscope as ags


def _foreign():
    return trace.get_tracer_provider().get_tracer("openinference.instrumentation.langchain")


def test_a_span_made_inside_a_foreign_run_goes_under_the_innermost_one(captured):
    tracer = _foreign()
    graph = tracer.start_span("LangGraph")
    tool = tracer.start_span("count_orders", context=trace.set_span_in_context(graph))
    with ags.span("SELECT orders", kind="db"):
        pass
    tool.end()
    with ags.span("after the tool", kind="step"):
        pass
    graph.end()
    with ags.span("after the graph", kind="step"):
        pass
    select, after_tool, after_graph = (
        captured.one(n) for n in ("SELECT orders", "after the tool", "after the graph")
    )
    assert select.parent.span_id == tool.get_span_context().span_id
    assert select.context.trace_id == graph.get_span_context().trace_id
    assert after_tool.parent.span_id == graph.get_span_context().span_id
    assert after_graph.parent is None and after_graph.context.trace_id != graph.get_span_context().trace_id


def test_under_a_current_span_only_runs_started_below_it_are_joined(captured):
    tracer = _foreign()
    outer = tracer.start_span("LangGraph")  # no current span: the task below joins it
    with ags.span("task", kind="task"):
        sibling = tracer.start_span(
            "side run", context=trace.set_span_in_context(outer)
        )  # not under the task
        run = tracer.start_span("ChatOpenAI")  # under the task, which is current
        with ags.span("chat", kind="llm"):
            pass
        run.end()
        sibling.end()
    outer.end()
    task, chat = captured.one("task"), captured.one("chat")
    assert task.parent.span_id == outer.get_span_context().span_id
    assert run.parent.span_id == task.context.span_id
    assert chat.parent.span_id == run.get_span_context().span_id


def test_a_run_open_on_another_thread_is_not_joined(captured):
    tracer = _foreign()
    opened, done = threading.Event(), threading.Event()

    def other_thread() -> None:
        span = tracer.start_span("run on a worker")
        opened.set()
        done.wait(5)
        span.end()

    worker = threading.Thread(target=other_thread)
    worker.start()
    opened.wait(5)
    with ags.span("here", kind="step"):
        pass
    done.set()
    worker.join(5)
    assert captured.one("here").parent is None


def test_a_run_that_never_ends_is_forgotten_at_the_bound(captured, monkeypatch):
    from agentscope.sdk import open_spans
    from agentscope.sdk.state import STATE

    monkeypatch.setattr(open_spans, "MAX_OPEN", 3)
    tracer = _foreign()
    leaked = [tracer.start_span(f"leak {n}") for n in range(5)]
    assert len(STATE.open_spans._open) == 3
    for span in leaked:
        span.end()
    assert STATE.open_spans._open == {}
