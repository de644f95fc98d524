"""agentscope and another instrumentation in one process, each scenario in a process of its own
(``coexist.py``): one call counted once, traces whole, the peer's exporter still fed, no prompt stored.

Against the simulated provider's own record of every request: per task, model time as
``harness.assert_model_time`` holds it, tools ±10%, calls and tokens as served, the tool's SQLite query
under its tool, a first-token split on streamed calls (DESIGN §14)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from harness import SEQUENTIAL_PROMPT, Measured, assert_model_time, interpreter_of, require

from agentscope.analysis import categories as C
from agentscope.analysis.pipeline import task_results
from agentscope.store import Store

require("langgraph")
require("openinference.instrumentation.langchain")
require("openinference.instrumentation.openai")
require("opentelemetry.instrumentation.openai")
require("langfuse")

RUNNER = Path(__file__).with_name("coexist.py")

SCENARIOS = {
    # id: (scenario, order, under @ags.task, a span name the peer's own exporter must have received)
    "OpenInference LangChain, no task": ("openinference-langchain", "ags-first", False, "ChatOpenAI"),
    "OpenInference LangChain, task": ("openinference-langchain", "ags-first", True, "ChatOpenAI"),
    "OpenInference LangChain first, task": ("openinference-langchain", "peer-first", True, "ChatOpenAI"),
    "OpenLLMetry LangChain, task": ("openllmetry-langchain", "ags-first", True, "ChatOpenAI.chat"),
    "OpenLLMetry LangChain first, no task": ("openllmetry-langchain", "peer-first", False, "ChatOpenAI.chat"),
    "OpenInference openai": ("openinference-openai", "ags-first", True, "ChatCompletion"),
    "OpenInference openai first": ("openinference-openai", "peer-first", True, "ChatCompletion"),
    "OpenLLMetry openai": ("openllmetry-openai", "ags-first", True, "openai.chat"),
    "OpenLLMetry openai first": ("openllmetry-openai", "peer-first", True, "openai.chat"),
    "OpenInference openai-agents, task": ("openinference-openai-agents", "ags-first", True, "support"),
    "OpenInference openai-agents first, no task": (
        "openinference-openai-agents",
        "peer-first",
        False,
        "support",
    ),
    "Langfuse LangChain callback, task": ("langfuse-langchain", "ags-first", True, "ChatOpenAI"),
    "Langfuse LangChain callback first, no task": ("langfuse-langchain", "peer-first", False, "ChatOpenAI"),
    "Langfuse @observe, after ags.init": ("langfuse-observe", "ags-first", False, "support_workflow"),
    "Langfuse @observe first": ("langfuse-observe", "peer-first", False, "support_workflow"),
    "Langfuse drop-in after ags.init": ("langfuse", "ags-first", True, "OpenAI-generation"),
    "Langfuse drop-in before ags.init": ("langfuse", "peer-first", True, "OpenAI-generation"),
    "Traceloop SDK, task": ("traceloop", "ags-first", True, "openai.chat"),
    "Traceloop SDK first, its workflow": ("traceloop", "peer-first", False, "support_workflow.workflow"),
    "Phoenix register, after ags.init": ("phoenix-register", "ags-first", True, "ChatCompletion"),
    "Phoenix register first": ("phoenix-register", "peer-first", True, "ChatCompletion"),
    "Strands Agents first": ("strands", "peer-first", False, "invoke_agent Strands Agents"),
    "Strands Agents after ags.init": ("strands", "ags-first", False, "invoke_agent Strands Agents"),
    "pydantic-ai, task": ("pydantic-ai", "ags-first", True, "chat gpt-oss-120b"),
    "pydantic-ai first, no task": ("pydantic-ai", "peer-first", False, "chat gpt-oss-120b"),
    "Logfire openai": ("logfire-openai", "ags-first", True, "Chat Completion with {request_data[model]!r}"),
    "Logfire openai first": (
        "logfire-openai",
        "peer-first",
        True,
        "Chat Completion with {request_data[model]!r}",
    ),
    "Logfire openai alone first": (
        "logfire-openai-only",
        "peer-first",
        True,
        "streaming response from {request_data[model]!r} took {duration:.2f}s",
    ),
    "OpenInference LlamaIndex, task": ("openinference-llamaindex", "ags-first", True, "OpenAILike.achat"),
    "OpenInference LlamaIndex alone, task": (
        "openinference-llamaindex-only",
        "ags-first",
        True,
        "OpenAILike.astream_chat",
    ),
    "OpenInference LlamaIndex first, no task": (
        "openinference-llamaindex",
        "peer-first",
        False,
        "OpenAILike.astream_chat",
    ),
}

NO_FIRST_TOKEN = {"logfire-openai-only"}
"""Peers that record no first token: alone, their streamed calls are inference unsplit."""


def _python(scenario: str) -> str:
    """LlamaIndex's openai LLMs need an openai release the ``peers`` extra does not allow, so its scenarios
    run in an environment with the ``peers-llamaindex`` extra."""
    if not scenario.startswith("openinference-llamaindex"):
        return sys.executable
    return interpreter_of("AGENTSCOPE_LLAMAINDEX_PYTHON", "peers-llamaindex")


def _run(scenario: str, order: str, as_task: bool, store: Path) -> dict:
    command = [_python(scenario), str(RUNNER), scenario, str(store), "--order", order]
    result = subprocess.run(command + ["--task"] * as_task, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.splitlines()[-1])


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_beside_a_peer_each_call_counts_once_and_each_task_is_whole(name, tmp_path):
    scenario, order, as_task, peer_span = SCENARIOS[name]
    store = tmp_path / "store.duckdb"
    seen = _run(scenario, order, as_task, store)
    truths = seen["tasks"]
    with Store(store, read_only=True) as opened:
        results = sorted(task_results(opened), key=lambda r: r.start_ns)
        prompt = f"%{SEQUENTIAL_PROMPT}%"
        (with_prompt,) = opened.con.execute(
            "SELECT count(*) FROM spans WHERE attributes LIKE ?", [prompt]
        ).fetchone()
    rows = [_row(name, truth, result) for truth, result in zip(truths, results)]
    print("\n".join(rows))
    assert len(results) == len(truths), f"{name}: {len(results)} tasks for {len(truths)} run"
    assert with_prompt == 0
    assert peer_span in seen["peer_spans"], sorted(set(seen["peer_spans"]))
    assert seen["said"] == []
    for truth, result, row in zip(truths[1:], results[1:], rows[1:]):  # the first warms the process up
        served = [s for s in truth["served"] if s["status"] == 200]
        model_ms = sum(s["end_ns"] - s["arrival_ns"] for s in truth["served"]) / 1e6
        assert_model_time(Measured.model_ms(result), model_ms, len(truth["served"]), row)
        assert Measured.tools_ms(result) == pytest.approx(sum(truth["tools"].values()), rel=0.10), row
        assert result.llm_calls == len(served), row
        if not scenario.endswith("-only"):  # with agentscope's integrations on, the SELECT is under its tool
            assert result.components[C.KEY_INDEX["db"]] > 0, row
        if truth["shape"] == "streamed":
            assert result.components[C.KEY_INDEX[C.DECODE]] > 0 or scenario in NO_FIRST_TOKEN, row
        else:
            assert result.input_tokens == sum(s["input_tokens"] for s in served), row
            assert result.output_tokens == sum(s["output_tokens"] for s in served), row


def _row(name: str, truth: dict, result) -> str:
    """One task as docs/coexistence.md tabulates it: model, tools, calls and tokens against the truth."""
    served = [s for s in truth["served"] if s["status"] == 200]
    model_ms = sum(s["end_ns"] - s["arrival_ns"] for s in truth["served"]) / 1e6
    tools_ms = sum(truth["tools"].values())
    tokens = (sum(s["input_tokens"] for s in served), sum(s["output_tokens"] for s in served))
    model = Measured.model_ms(result)
    decode_ms = result.components[C.KEY_INDEX[C.DECODE]] / 1e6
    return (
        f"| {name} | {truth['shape']} | {model:.0f} / {model_ms:.0f} ({model / model_ms - 1:+.1%}) | "
        f"{Measured.tools_ms(result):.0f} / {tools_ms:.0f} | {result.llm_calls} / {len(served)} | "
        f"{result.input_tokens}+{result.output_tokens} / {tokens[0]}+{tokens[1]} | {decode_ms:.0f} | "
        f"{result.repaired} |"
    )
