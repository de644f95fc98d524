"""Foreign-trace repair (DESIGN §5.1), task selection (§5) and single failed attempts (§4).

The LangGraph trees below are the ones OpenInference's and OpenLLMetry's
LangChain instrumentations record for ``create_react_agent`` + ``ChatOpenAI``
(names, kinds and times as exported; times in ms from the trace's start).
"""

from __future__ import annotations

import itertools

import pytest
from tracebuild import MS, path, span, trace

from agentscope.analysis import KEYS
from agentscope.analysis.attribution import failed_attempts
from agentscope.analysis.repair import EARLY_END, ENCLOSED_SIBLING, SAME_CALL
from agentscope.analysis.report import trace_report
from agentscope.analysis.tasks import explain


def openinference_node(prefix: str, t0: float) -> list[dict]:
    """One ``agent`` node: OpenInference marks it AGENT (its name has "agent" in it)."""
    return [
        span(f"{prefix}0", "root", "agent", t0 + 2.9, t0 + 143.5, name="agent"),
        span(f"{prefix}1", f"{prefix}0", "step", t0 + 3.5, t0 + 139.7, name="call_model"),
        span(f"{prefix}2", f"{prefix}0", "step", t0 + 4.0, t0 + 139.0, name="RunnableSequence"),
        span(f"{prefix}3", f"{prefix}2", "step", t0 + 4.4, t0 + 4.8, name="Prompt"),
        span(f"{prefix}4", f"{prefix}2", "llm", t0 + 6.6, t0 + 137.7, name="ChatOpenAI"),
        span(f"{prefix}5", f"{prefix}0", "step", t0 + 140.9, t0 + 141.5, name="should_continue"),
    ]


def openinference_langgraph() -> list[dict]:
    return [
        span("root", None, "step", 0, 507.3, name="LangGraph"),
        *openinference_node("a", 0),
        span("t0", "root", "step", 145.2, 249.6, name="tools"),
        span("t1", "t0", "tool", 146.6, 247.9, name="wait_for_shipping"),
        *openinference_node("b", 250),
    ]


def openllmetry_langgraph() -> list[dict]:
    def node(prefix: str, t0: float) -> list[dict]:
        return [
            span(f"{prefix}0", "wf", "step", t0 + 11.2, t0 + 145.1, name="execute_task agent"),
            span(f"{prefix}1", f"{prefix}0", "step", t0 + 11.7, t0 + 143.2, name="execute_task call_model"),
            span(
                f"{prefix}2",
                f"{prefix}0",
                "step",
                t0 + 12.5,
                t0 + 143.0,
                name="execute_task RunnableSequence",
            ),
            span(f"{prefix}3", f"{prefix}2", "step", t0 + 13.0, t0 + 13.3, name="execute_task Prompt"),
            span(f"{prefix}4", f"{prefix}2", "llm", t0 + 14.5, t0 + 142.7, name="ChatOpenAI.chat"),
            span(
                f"{prefix}5",
                f"{prefix}0",
                "step",
                t0 + 143.6,
                t0 + 144.9,
                name="execute_task should_continue",
            ),
        ]

    return [
        span("create", None, "agent", 0, 5.2, name="create_agent react_agent", operation="create_agent"),
        span("inv", None, "agent", 5.4, 505.7, name="invoke_agent LangGraph", operation="invoke_agent"),
        span("wf", "inv", "task", 9.6, 505.7, name="LangGraph.workflow"),
        *node("a", 0),
        span("t0", "wf", "step", 146.0, 249.7, name="execute_task tools"),
        span("t1", "t0", "tool", 147.6, 249.0, name="execute_tool wait_for_shipping"),
        *node("b", 240),
    ]


def category_ms(t, task: int) -> dict[str, float]:
    result = explain(t, task).result
    return {category: ns / MS for category, ns in result.category_ns().items()}


@pytest.mark.parametrize(
    "shape", [openinference_langgraph, openllmetry_langgraph], ids=["openinference", "openllmetry"]
)
def test_langgraph_node_span_gets_the_runnable_it_ran(shape):
    t = trace(*shape())
    (task,) = t.tasks()
    moved = {t.span_id(r.span): t.span_id(r.new_parent) for r in t.repairs}
    assert moved == {"a2": "a1", "b2": "b1"}
    assert {r.rule for r in t.repairs} == {ENCLOSED_SIBLING}
    segments = [span_id for span_id, _, _ in path(t, task)]
    assert "a4" in segments and "b4" in segments  # both model calls are on the critical path
    spent = category_ms(t, task)
    model_calls = (137.7 - 6.6) * 2 if shape is openinference_langgraph else (142.7 - 14.5) * 2
    assert spent["inference"] == pytest.approx(model_calls)
    assert explain(t, task).result.repaired == 2


@pytest.mark.parametrize(
    "shape", [openinference_langgraph, openllmetry_langgraph], ids=["openinference", "openllmetry"]
)
def test_without_repair_the_model_calls_fall_off_the_path(shape):
    t = trace(*shape(), repair=False)
    (task,) = t.tasks()
    assert t.repairs == []
    assert category_ms(t, task)["inference"] == 0
    assert explain(t, task).result.repaired == 0


def test_openinference_graph_nodes_marked_agent_are_steps_of_the_graph_task():
    t = trace(*openinference_langgraph())
    assert [t.span_id(i) for i in t.tasks()] == ["root"]


def test_a_single_agent_invocation_under_a_root_is_the_task():
    t = trace(
        span("http", None, "step", 0, 100, name="POST /chat"),
        span("ag", "http", "agent", 5, 95, operation="invoke_agent"),
        span("llm", "ag", "llm", 10, 90),
    )
    assert [t.span_id(i) for i in t.tasks()] == ["ag"]


def test_a_leaf_step_that_truly_ran_in_parallel_gives_its_time_to_the_enclosed_work():
    """The documented limit: a thread that did its own untraced work while the model call ran."""
    t = trace(
        span("R", None, "task", 0, 200),
        span("watchdog", "R", "step", 0, 200, cpu_ns=200 * MS, thread_id=2),
        span("call", "R", "llm", 50, 150),
    )
    assert [t.span_id(r.span) for r in t.repairs] == ["call"]
    spent = category_ms(t, 0)
    assert spent["inference"] == pytest.approx(100)  # the step's own CPU for that time is not counted
    assert spent["cpu"] == pytest.approx(100)


def test_no_repair_when_the_leaf_does_not_enclose_the_sibling_or_has_children():
    t = trace(
        span("R", None, "task", 0, 300),
        span("early", "R", "step", 0, 120),  # ends before the call does
        span("call", "R", "llm", 50, 150),
        span("busy", "R", "step", 160, 300),
        span("inner", "busy", "step", 170, 180),
        span("tool", "R", "tool", 170, 290),  # enclosed by busy, but busy has a child
        span("note", "R", "step", 175, 280),  # a leaf that encloses nothing with work in it
        span("log", "R", "step", 176, 180),
    )
    assert t.repairs == []


def test_the_shortest_enclosing_leaf_takes_the_sibling():
    t = trace(
        span("R", None, "task", 0, 300),
        span("outer", "R", "step", 0, 300),
        span("node", "R", "step", 40, 160),
        span("call", "R", "llm", 50, 150),
    )
    assert [(t.span_id(r.span), t.span_id(r.new_parent)) for r in t.repairs] == [("call", "node")]


def test_an_explicit_task_counts_whatever_it_holds():
    producer = trace(
        span("T", None, "task", 0, 50, task_name="enqueue"),
        span("send", "T", "step", 5, 10, span_kind="PRODUCER"),
        span("db", "T", "db", 10, 40),
    )
    assert [producer.span_id(i) for i in producer.tasks()] == ["T"]
    assert category_ms(producer, 0)["db"] == pytest.approx(30)
    lone_query = trace(span("Q", None, "db", 0, 10))
    assert lone_query.tasks() == []


def test_a_single_429_under_a_call_that_succeeded_is_a_failed_attempt():
    """The openai SDK's usual retry: one failed attempt span, the successful attempt has none."""
    t = trace(
        span("R", None, "task", 0, 300),
        span("L", "R", "llm", 0, 300, server_queue_ms=10, server_prefill_ms=100, server_decode_ms=100),
        span("H1", "L", "http", 0, 30, http_status=429),
        span("B", "L", "backoff", 30, 80),
    )
    assert failed_attempts(t, t.descendants(0)) == {2}
    result = explain(t, 0).result
    spent = {key: ns / MS for key, ns in zip(KEYS, result.components)}
    assert spent["retry.failed"] == pytest.approx(30)
    assert spent["retry.backoff"] == pytest.approx(50)
    assert spent["inference.prefill"] + spent["inference.decode"] == pytest.approx(200)


def test_an_error_attempt_of_a_call_that_failed_is_the_calls_time_unless_retried():
    failed_call = trace(
        span("R", None, "task", 0, 100),
        span("L", "R", "llm", 0, 100, status="ERROR"),
        span("H1", "L", "http", 0, 95, status="ERROR", http_status=400),
    )
    assert failed_attempts(failed_call, failed_call.descendants(0)) == set()
    retried_then_failed = trace(
        span("R", None, "task", 0, 200),
        span("L", "R", "llm", 0, 200, status="ERROR"),
        span("H1", "L", "http", 0, 50, http_status=503),
        span("H2", "L", "http", 120, 195, http_status=503),
    )
    assert failed_attempts(retried_then_failed, retried_then_failed.descendants(0)) == {2}


def test_trace_json_times_are_exact_and_adjacent_pieces_share_bounds():
    epoch = 1_780_000_000_000_000_000  # absolute epoch ns: as floats they are 256 ns apart

    def at(name: str, parent: str | None, kind: str, start_ns: int, end_ns: int, **extra) -> dict:
        return span(name, parent, kind, 0, 0, start_ns=epoch + start_ns, end_ns=epoch + end_ns, **extra)

    t = trace(
        at("R", None, "task", 0, 100_000_000),
        at("L", "R", "llm", 10_000_000, 77_000_001, server_queue_ms=3.3, server_prefill_ms=21.7),
        at("T", "R", "tool", 77_000_001, 99_999_999),
    )
    document = trace_report(explain(t, 0))
    pieces = document["critical_path"]
    assert pieces[0]["start_ms"] == 0
    assert pieces[-1]["end_ms"] == 100
    for before, after in itertools.pairwise(pieces):
        assert before["end_ms"] == after["start_ms"]
    tool = next(p for p in pieces if p["span_id"] == "T")
    assert tool["start_ms"] == 77.000001 and tool["end_ms"] == 99.999999
    assert document["explained"] == "task" and document["repaired"] == []


def test_trace_json_lists_repairs():
    t = trace(*openinference_langgraph())
    document = trace_report(explain(t, t.tasks()[0]))
    assert document["repaired"] == [
        {"span_id": "a2", "rule": "enclosed-sibling", "new_parent_id": "a1"},
        {"span_id": "b2", "rule": "enclosed-sibling", "new_parent_id": "b1"},
    ]


OURS, THEIRS = "agentscope", "openinference.instrumentation.langchain"


def test_two_packages_records_of_one_call_are_counted_once_with_each_ones_data():
    t = trace(
        span("R", None, "task", 0, 1000),
        span(
            "O",
            "R",
            "llm",
            10,
            700,
            name="ChatOpenAI",
            label="gpt-x",
            scope=THEIRS,
            input_tokens=90,
            output_tokens=40,
        ),
        span("I", "O", "llm", 12, 690, name="chat gpt-x", label="gpt-x", scope=OURS, ttft_s=0.2),
        span("T", "R", "tool", 700, 1000),
    )
    result = explain(t, 0).result
    assert (result.llm_calls, result.input_tokens, result.output_tokens) == (1, 90, 40)
    assert result.models == {"gpt-x": [90, 40, 0, 1]}
    assert [(t.span_id(r.span), r.rule, t.span_id(r.new_parent)) for r in t.repairs] == [
        ("O", SAME_CALL, "I")
    ]
    ms = {key: round(ns / MS, 3) for key, ns in zip(KEYS, result.components) if ns}
    # The inner record is the call: 200 ms to its first token, then decode; the wrapper's own 12 ms are
    # the client's (other, with the task's 10 ms before it), not the model's.
    assert ms == {
        "inference.unsplit": 200,
        "inference.decode": 478,
        "other": 22,
        "tool": 300,
    }


def test_the_first_token_of_the_outer_record_is_moved_to_the_inner_ones_start():
    t = trace(
        span("R", None, "task", 0, 600),
        span("O", "R", "llm", 0, 600, name="OpenAI-generation", scope="langfuse-sdk", ttft_s=0.25),
        span("I", "R", "llm", 50, 590, name="chat gpt-x", label="gpt-x", scope=OURS),
    )
    result = explain(t, 0).result
    assert result.llm_calls == 1 and result.models == {"gpt-x": [0, 0, 0, 1]}
    ms = {key: round(ns / MS, 3) for key, ns in zip(KEYS, result.components) if ns}
    assert ms["inference.unsplit"] == 200 and ms["inference.decode"] == 340


@pytest.mark.parametrize(
    "second",
    [
        span("B", "R", "llm", 0, 100, name="chat gpt-x", label="gpt-x", scope=OURS),  # one package: two calls
        span("B", "R", "llm", 0, 100, name="chat gpt-y", label="gpt-y", scope=THEIRS),  # another model
        span("B", "R", "llm", 200, 300, name="chat gpt-x", label="gpt-x", scope=THEIRS),  # later
        span("B", "R", "llm", 0, 100, name="B"),  # no scope, and not one inside the other
        span("B", "R", "llm", 0, 100, name="B", scope=THEIRS, span_kind="SERVER"),  # the provider's record
    ],
    ids=["same scope", "other model", "disjoint", "unknown scope, siblings", "provider span"],
)
def test_calls_that_are_not_one_request_stay_two(second):
    t = trace(
        span("R", None, "task", 0, 400),
        span("A", "R", "llm", 0, 150, name="chat gpt-x", label="gpt-x", scope=OURS, input_tokens=5),
        second,
    )
    assert explain(t, 0).result.llm_calls == 2 and t.repairs == []


@pytest.mark.parametrize(
    ("spans", "repair"),
    [
        (  # a call, then another recorded twice: only the later two share an instant
            [
                span("A", "R", "llm", 0, 100, name="chat gpt-x", label="gpt-x", scope=OURS),
                span("B", "R", "llm", 100, 300, name="ChatOpenAI", label="gpt-x", scope=THEIRS),
                span("C", "R", "llm", 120, 290, name="chat gpt-x", label="gpt-x", scope=OURS),
            ],
            ("B", SAME_CALL, "C"),
        ),
        (  # an instant's record beside a longer one of the same start
            [
                span("A", "R", "llm", 50, 50, name="OpenAI-generation", scope="langfuse-sdk"),
                span("B", "R", "llm", 50, 150, name="chat gpt-x", label="gpt-x", scope=OURS),
            ],
            ("B", SAME_CALL, "A"),
        ),
    ],
    ids=["after a disjoint call", "same start, one of no length"],
)
def test_records_of_one_call_are_found_among_calls_one_after_another(spans, repair):
    t = trace(span("R", None, "task", 0, 400), *spans)
    same = [(t.span_id(r.span), r.rule, t.span_id(r.new_parent)) for r in t.repairs if r.rule == SAME_CALL]
    assert same == [repair]
    assert explain(t, 0).result.llm_calls == len(spans) - 1


def test_without_repair_both_records_are_counted():
    spans = (
        span("R", None, "task", 0, 1000),
        span("O", "R", "llm", 10, 700, label="gpt-x", scope=THEIRS, input_tokens=90),
        span("I", "O", "llm", 12, 690, label="gpt-x", scope=OURS, input_tokens=90),
    )
    assert explain(trace(*spans, repair=False), 0).result.input_tokens == 180
    assert explain(trace(*spans), 0).result.input_tokens == 90


LLAMAINDEX = "openinference.instrumentation.llama_index"


def llamaindex_streamed_task(steps: int = 3) -> list[dict]:
    """OpenInference's LlamaIndex shape of a streamed FunctionAgent run: each workflow step prepares the
    request, then asks ``OpenAILike.astream_chat`` for a stream (two nested spans, a decorator's and the
    method's), which end as the generator is handed back (1 ms); the step reads the stream, and the inner
    span's first-token event comes 206 ms after its start."""
    spans = [span("W", None, "agent", 0, steps * 320 + 10, name="FunctionAgent.run", scope=LLAMAINDEX)]
    for n in range(steps):
        t0 = 5 + n * 320
        spans += [
            span(
                f"S{n}", "W", "step", t0, t0 + 306, name="BaseWorkflowAgent.run_agent_step", scope=LLAMAINDEX
            ),
            span(f"P{n}", f"S{n}", "step", t0 + 0.1, t0 + 0.2, name="OpenAILike._prepare_chat_with_tools"),
            span(
                f"O{n}", f"S{n}", "llm", t0 + 0.2, t0 + 1.2, name="OpenAILike.astream_chat", scope=LLAMAINDEX
            ),
            span(
                f"L{n}",
                f"O{n}",
                "llm",
                t0 + 0.3,
                t0 + 1.2,
                name="OpenAILike.astream_chat",
                scope=LLAMAINDEX,
                ttft_s=0.206,
            ),
        ]
    return spans


def test_a_streamed_span_that_ends_before_its_first_token_takes_the_step_that_read_it():
    t = trace(*llamaindex_streamed_task())
    repairs = {(t.span_id(r.span), r.rule, t.span_id(r.new_parent)) for r in t.repairs}
    assert repairs == {
        *((f"O{n}", EARLY_END, f"S{n}") for n in range(3)),  # the step read the stream
        *((f"L{n}", EARLY_END, f"O{n}") for n in range(3)),  # the inner record ends with the outer one
        *((f"O{n}", SAME_CALL, f"L{n}") for n in range(3)),  # and the two are one call
    }
    result = explain(t, 0).result
    assert result.llm_calls == 3
    ms = {key: round(ns / MS, 1) for key, ns in zip(KEYS, result.components) if ns}
    assert ms["inference.unsplit"] == pytest.approx(3 * 206, abs=0.5)  # up to each first token
    assert ms["inference.decode"] == pytest.approx(3 * (306 - 0.3 - 206), abs=0.5)  # the stream read
    assert ms["other"] == pytest.approx(970 - 3 * 305.7, abs=1)  # the agent's gaps, the preparation


def test_a_record_that_ends_before_its_child_does_is_extended_to_it():
    t = trace(
        span("R", None, "task", 0, 500),
        span("O", "R", "llm", 10, 11, name="OpenAILike.astream_chat", scope=LLAMAINDEX),
        span("C", "O", "llm", 12, 400, name="chat gpt-x", label="gpt-x", scope=OURS, ttft_s=0.1),
        span("T", "R", "tool", 420, 480),
    )
    assert (t.end[1] - t.start[1]) / MS == pytest.approx(390)  # to its child's end, the parent is busy
    assert explain(t, 0).result.llm_calls == 1


def test_without_repair_the_streamed_calls_are_a_millisecond_each():
    result = explain(trace(*llamaindex_streamed_task(), repair=False), 0).result
    inference = sum(ns for key, ns in zip(KEYS, result.components) if key.startswith("inference"))
    assert inference / MS < 5


def test_a_span_ending_early_under_a_busy_parent_is_extended_only_to_its_first_token():
    t = trace(
        span("R", None, "task", 0, 500),
        span("L", "R", "llm", 10, 11, name="astream_chat", ttft_s=0.2),
        span("T", "R", "tool", 300, 480),
    )
    assert [(t.span_id(r.span), r.rule, t.span_id(r.new_parent)) for r in t.repairs] == [
        ("L", EARLY_END, "L")
    ]
    assert (t.end[1] - t.start[1]) / MS == pytest.approx(200)


def test_a_span_whose_first_token_is_inside_it_is_not_extended():
    t = trace(span("R", None, "task", 0, 500), span("L", "R", "llm", 10, 400, ttft_s=0.2))
    assert t.repairs == [] and t.end[1] == 400 * MS


LOGFIRE = "logfire.openai"


def logfire_streamed_task(tool_between: bool = False) -> list[dict]:
    """Logfire's openai instrumentation on a streamed call: ``Chat Completion with 'gpt-x'`` ends when the
    SDK hands back the stream (160 ms, at the headers); when the stream ends (365 ms) it logs a record of
    no duration beside it, with the usage and the stream's duration."""
    return [
        span("R", None, "task", 0, 500),
        span("C", "R", "llm", 1, 161, name="Chat Completion with 'gpt-x'", label="gpt-x", scope=LOGFIRE),
        *([span("T", "R", "tool", 200, 300)] * tool_between),
        span(
            "E",
            "R",
            "llm",
            365,
            365,
            name="streaming response from 'gpt-x' took 0.20s",
            label="gpt-x",
            scope=LOGFIRE,
            input_tokens=10,
            output_tokens=40,
        ),
        span("A", "R", "tool", 380, 480),
    ]


def test_a_stream_end_log_ends_its_call_and_is_not_a_call_itself():
    t = trace(*logfire_streamed_task())
    assert [(t.span_id(r.span), r.rule, t.span_id(r.new_parent)) for r in t.repairs] == [
        ("C", EARLY_END, "C"),
        ("E", SAME_CALL, "C"),
    ]
    result = explain(t, 0).result
    assert (result.llm_calls, result.input_tokens, result.output_tokens) == (1, 10, 40)
    assert result.components[KEYS.index("inference.unsplit")] / MS == pytest.approx(364)
    untouched = explain(trace(*logfire_streamed_task(), repair=False), 0).result
    assert (untouched.llm_calls, untouched.output_tokens) == (2, 40)
    assert untouched.components[KEYS.index("inference.unsplit")] / MS == pytest.approx(160)


def test_a_record_of_no_duration_after_other_work_is_a_call_of_its_own():
    t = trace(*logfire_streamed_task(tool_between=True))
    assert t.repairs == []
    assert explain(t, 0).result.llm_calls == 2


def test_a_stream_end_log_beside_agentscopes_record_of_the_stream_counts_the_call_once():
    """agentscope's ``chat`` span (the whole stream, its first token) around Logfire's two records."""
    t = trace(
        span("R", None, "task", 0, 400),
        span(
            "O",
            "R",
            "llm",
            0.1,
            365.2,
            name="chat gpt-x",
            label="gpt-x",
            scope=OURS,
            ttft_s=0.17,
            input_tokens=10,
            output_tokens=40,
        ),
        span("C", "O", "llm", 1, 161, name="Chat Completion with 'gpt-x'", label="gpt-x", scope=LOGFIRE),
        span(
            "E",
            "O",
            "llm",
            365,
            365,
            name="streaming response",
            label="gpt-x",
            scope=LOGFIRE,
            input_tokens=10,
            output_tokens=40,
        ),
    )
    result = explain(t, 0).result
    assert (result.llm_calls, result.input_tokens, result.output_tokens) == (1, 10, 40)
    ms = {key: ns / MS for key, ns in zip(KEYS, result.components) if ns}
    assert ms["inference.decode"] == pytest.approx(365 - 170.1, abs=0.5)  # from the first token on
    assert ms["other"] == pytest.approx(400 - 364, abs=0.5)  # only the task's own time around the call


def test_a_peer_record_ended_at_the_headers_beside_the_sdks_record_of_the_stream_is_not_the_call():
    """OpenLLMetry's anthropic record of a stream read through ``with_streaming_response``: it ends when
    the SDK hands back the response (at the headers), with zero tokens, beside the SDK's own record of
    the whole stream.  Neither holds the other, so the shorter was once taken as the call and the rest
    of the stream read as `other`."""
    t = trace(
        span("R", None, "task", 0, 406),
        span("T", "R", "tool", 0, 40),
        span("P", "R", "llm", 40.7, 201.4, name="anthropic.chat", label="claude-x", scope=THEIRS,
             input_tokens=0, output_tokens=0),
        span("S", "R", "llm", 42.2, 405.7, name="anthropic.messages.create", label="claude-x",
             scope="com.anthropic.sdk.python", ttft_s=0.167, input_tokens=12, output_tokens=40),
    )  # fmt: skip
    assert [(t.span_id(r.span), r.rule, t.span_id(r.new_parent)) for r in t.repairs] == [
        ("P", EARLY_END, "P"),
        ("P", SAME_CALL, "S"),
        ("S", ENCLOSED_SIBLING, "P"),
    ]
    result = explain(t, 0).result
    assert (result.llm_calls, result.input_tokens, result.output_tokens) == (1, 12, 40)
    ms = {key: round(ns / MS, 1) for key, ns in zip(KEYS, result.components) if ns}
    assert ms["inference.unsplit"] == 167 and ms["inference.decode"] == pytest.approx(196.5)


def test_a_peer_record_ended_before_the_first_token_of_the_record_around_it_is_extended():
    """A peer patched below agentscope records a raw-response stream inside agentscope's record and ends
    at the headers, before the first token agentscope's record saw: it is extended to the end of the
    record around it, which read the stream, and stands for the call with that record's data."""
    spans = [
        span("R", None, "task", 0, 400),
        span("O", "R", "llm", 0, 360, name="chat claude-x", label="claude-x", scope=OURS, ttft_s=0.165,
             input_tokens=12, output_tokens=40),
        span("P", "O", "llm", 0.5, 159, name="anthropic.chat", label="claude-x", scope=THEIRS,
             input_tokens=0, output_tokens=0),
    ]  # fmt: skip
    t = trace(*spans)
    assert [(t.span_id(r.span), r.rule, t.span_id(r.new_parent)) for r in t.repairs] == [
        ("P", EARLY_END, "O"),
        ("O", SAME_CALL, "P"),
    ]
    result = explain(t, 0).result
    assert (result.llm_calls, result.input_tokens, result.output_tokens) == (1, 12, 40)
    ms = {key: round(ns / MS, 1) for key, ns in zip(KEYS, result.components) if ns}
    assert ms["inference.unsplit"] == 164.5 and ms["inference.decode"] == 195
    untouched = explain(trace(*spans, repair=False), 0).result
    assert (untouched.llm_calls, untouched.output_tokens) == (2, 40)


def test_calls_inside_an_llm_record_that_holds_several_are_not_extended_to_its_first_token():
    """An llm span around two calls (a framework's run marked LLM) is not a record of either: its first
    token says nothing of where each ended."""
    t = trace(
        span("R", None, "task", 0, 1000),
        span("O", "R", "llm", 0, 900, name="agent run", scope=THEIRS, ttft_s=0.8),
        span("A", "O", "llm", 10, 300, name="chat gpt-x", label="gpt-x", scope=OURS),
        span("B", "O", "llm", 310, 600, name="chat gpt-x", label="gpt-x", scope=OURS),
    )
    assert [r for r in t.repairs if r.rule == EARLY_END] == []
    ends = {t.span_id(i): t.end[i] - t.start[0] for i in range(len(t))}
    assert (ends["A"], ends["B"]) == (300 * MS, 600 * MS)
