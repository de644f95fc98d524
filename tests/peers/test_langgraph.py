"""LangGraph's prebuilt ReAct agent with ChatOpenAI, traced by OpenInference's and by OpenLLMetry's
LangChain instrumentation: both record the node span beside the runnable it ran (DESIGN §5.1)."""

from __future__ import annotations

import json
import warnings

import pytest
from harness import MODEL, TOOLS, assert_model_time, measure, prompt_for, require

require("langgraph")
require("langchain_openai")


def react_agent(base_url: str, shape: str):
    from langchain_core.tools import StructuredTool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent

    model = ChatOpenAI(model=MODEL, base_url=base_url, api_key="sim", streaming=shape == "streamed")
    tools = [StructuredTool.from_function(f, name=name, description=f.__doc__) for name, f in TOOLS.items()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent's move to langchain.agents
        return create_react_agent(model, tools)


def run_react(shape: str, base_url: str) -> None:
    react_agent(base_url, shape).invoke({"messages": [("user", prompt_for(shape))]})


LANGCHAIN_INSTRUMENTATIONS = {
    "openinference_langchain": ("openinference.instrumentation.langchain", "LangChainInstrumentor"),
    "openllmetry_langchain": ("opentelemetry.instrumentation.langchain", "LangchainInstrumentor"),
}


@pytest.fixture
def langchain_traced(request, otel):
    """The OTel pipeline with one peer's LangChain instrumentation on (the parameter names which)."""
    module, name = LANGCHAIN_INSTRUMENTATIONS[request.param]
    instrumentor = getattr(require(module), name)()
    instrumentor.instrument(tracer_provider=otel.provider)
    yield otel
    instrumentor.uninstrument()


@pytest.mark.parametrize("langchain_traced", list(LANGCHAIN_INSTRUMENTATIONS), indirect=True)
def test_langgraph_blame_matches_the_known_delays(langchain_traced, request, providers, tmp_path):
    peer = f"LangGraph + {request.node.callspec.params['langchain_traced']}"
    measured = measure(peer, run_react, langchain_traced.export, providers, tmp_path)
    print(measured.row())
    calls = sum(1 for truth in measured.truths for served in truth.served if served.status == 200)
    assert measured.repaired == calls  # every model call's runnable was moved under its node
    measured.check_sequential()
    measured.check_streamed()
    measured.check_hidden_retries()
    measured.check_parallel_tools()


def measured_index(key: str) -> int:
    from agentscope.analysis import categories

    return categories.KEY_INDEX[key]


@pytest.mark.parametrize("langchain_traced", ["openinference_langchain"], indirect=True)
def test_without_repair_langgraph_shows_no_inference(langchain_traced, providers, tmp_path):
    from agentscope.analysis.pipeline import blame_store
    from agentscope.ingest import ingest
    from agentscope.store import Store

    run_react("sequential", providers.normal.base_url)
    path = langchain_traced.export(tmp_path)
    with Store(None) as store:
        ingest(store, [path])
        before = blame_store(store, repair=False)
        after = blame_store(store)
    share = {row["category"]: row["share"] for row in before["budget"]}
    assert share["inference"] == 0 and before["whatif"][1]["p95_change"] == 0
    assert {row["category"]: row["share"] for row in after["budget"]}["inference"] > 0.5
    assert after["repaired_spans"] == 4


@pytest.fixture
def langsmith_tracer(monkeypatch):
    """LangChain's LangSmith tracer with the real langsmith client, pointed at a loopback capture."""
    from langsmith_capture import LangSmithCapture

    require("langsmith")
    from langchain_core.tracers.langchain import LangChainTracer
    from langsmith import Client

    capture = LangSmithCapture().start()
    monkeypatch.setenv("LANGSMITH_ENDPOINT", capture.url)
    monkeypatch.setenv("LANGSMITH_API_KEY", "lsv2-test-key")
    client = Client()
    tracer = LangChainTracer(client=client, project_name="support-agent")
    yield capture, tracer, client
    capture.stop()


def test_langgraph_traced_to_langsmith_reads_back_with_the_same_answers(
    langsmith_tracer, providers, tmp_path
):
    capture, tracer, client = langsmith_tracer

    def run(shape: str, base_url: str) -> None:
        agent = react_agent(base_url, shape)
        agent.invoke({"messages": [("user", prompt_for(shape))]}, config={"callbacks": [tracer]})

    def export(folder):
        tracer.wait_for_futures()
        client.flush()
        return capture.export(folder / "langsmith-runs.jsonl")

    measured = measure("LangGraph → LangSmith runs", run, export, providers, tmp_path)
    print(measured.row())
    assert measured.repaired == 0  # LangSmith keeps call_model above the runnable it ran
    measured.check_sequential()
    for truth, result in measured.pairs("streamed"):  # the first new_token event splits the call
        assert result.components[measured_index("inference.decode")] > 0
        assert_model_time(measured.model_ms(result), truth.model_ms, len(truth.served), "streamed")
    for _, result in measured.pairs("sequential"):
        assert result.llm_calls == 4 and result.input_tokens > 0 and result.output_tokens > 0
    measured.check_hidden_retries()
    measured.check_parallel_tools()


def test_bad_langsmith_runs_are_named_by_file_and_line_and_the_good_ones_kept(
    langsmith_tracer, providers, tmp_path
):
    from agentscope.ingest import ingest
    from agentscope.store import Store

    capture, tracer, client = langsmith_tracer
    react_agent(providers.normal.base_url, "sequential").invoke(
        {"messages": [("user", prompt_for("sequential"))]}, config={"callbacks": [tracer]}
    )
    tracer.wait_for_futures()
    client.flush()
    path = capture.export(tmp_path / "runs.jsonl")
    lines = path.read_text().splitlines()
    total = len(lines)
    lines[1] = lines[1][:40]  # a line cut short
    broken = json.loads(lines[2])
    broken.pop("end_time")
    lines[2] = json.dumps(broken)
    path.write_text("\n".join(lines) + "\n")
    with Store(None) as store:
        summary = ingest(store, [path])
        assert summary.formats["langsmith"] == 1
        assert store.span_count() == total - 2
    problems = sorted((p.line, p.reason.split(":")[0]) for p in summary.problems)
    assert all(p.file == str(path) for p in summary.problems)
    assert problems == [
        (2, "invalid JSON"),
        (3, "run has no end_time (it never finished, or its update was not exported)"),
    ]


def test_a_langsmith_export_whose_runs_carry_long_prompts_is_read(langsmith_tracer, providers, tmp_path):
    """The real client's runs, carrying 200 KB of prompt, are told apart and read whole.

    (This client writes ``run_type`` before ``inputs``; the orders that put it after them are in
    tests/test_detect.py.)"""
    from agentscope.ingest import ingest
    from agentscope.store import Store

    capture, tracer, client = langsmith_tracer
    history = "Earlier in this ticket: " + "the customer wrote again " * 8_000
    react_agent(providers.normal.base_url, "sequential").invoke(
        {"messages": [("system", history), ("user", prompt_for("sequential"))]},
        config={"callbacks": [tracer]},
    )
    tracer.wait_for_futures()
    client.flush()
    path = capture.export(tmp_path / "runs.jsonl")
    assert len(path.read_bytes().split(b"\n", 1)[0]) > 200_000  # the first record, the one that decides
    with Store(None) as store:
        summary = ingest(store, [path])
        llm_calls = store.con.execute("SELECT count(*) FROM spans WHERE kind = 'llm'").fetchone()[0]
    assert summary.ok, summary.problems
    assert dict(summary.formats) == {"langsmith": 1}
    assert summary.stored == len(capture.runs) and summary.tasks == 1 and llm_calls == 4
