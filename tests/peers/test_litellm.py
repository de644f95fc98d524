"""LiteLLM's calls through agentscope's integration, against the simulated provider: one llm call each,
whatever route LiteLLM takes (the openai SDK's low-level ``post`` for an openai-compatible model, its
own HTTP handler for anthropic), its model, provider, tokens and a stream's first token."""

from __future__ import annotations

import asyncio
import os

import pytest
from harness import Measured, assert_model_time, require

import agentscope as ags
from agentscope.analysis import categories as C
from agentscope.analysis.pipeline import task_results
from agentscope.sim import Profile, SimServer
from agentscope.store import Store

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of LiteLLM's price list
litellm = require("litellm")

MESSAGES = [{"role": "user", "content": "where is my refund"}]
PROFILE = Profile(queue_ms=5, prefill_ms=150, tokens_per_s=200, output_tokens=40, seed=5)
"""Each call: 5 ms queue, 150 ms prefill, 200 ms decode."""


def _calls(sim: SimServer) -> dict:
    openai_route = {"model": "openai/gpt-oss-120b", "api_base": sim.base_url, "api_key": "sim"}
    anthropic_route = {"model": "anthropic/claude-sim", "api_base": sim.anthropic_base_url, "api_key": "sim"}
    usage = {"stream_options": {"include_usage": True}}

    async def streamed_async() -> None:
        async for _ in await litellm.acompletion(**openai_route, messages=MESSAGES, stream=True, **usage):
            pass

    return {
        "openai": lambda: litellm.completion(**openai_route, messages=MESSAGES),
        "openai, stream": lambda: list(
            litellm.completion(**openai_route, messages=MESSAGES, stream=True, **usage)
        ),
        "openai, async stream": lambda: asyncio.run(streamed_async()),
        "anthropic": lambda: litellm.completion(**anthropic_route, messages=MESSAGES, max_tokens=100),
        "anthropic, stream": lambda: list(
            litellm.completion(**anthropic_route, messages=MESSAGES, max_tokens=100, stream=True)
        ),
        "embedding": lambda: litellm.embedding(
            **openai_route | {"model": "openai/embed-sim"}, input=["refund"]
        ),
    }


def test_each_litellm_call_is_one_llm_call_whatever_its_route(tmp_path):
    from agentscope.integrations.litellm import LiteLLMInstrumentor

    store = tmp_path / "litellm.duckdb"
    sim = SimServer(PROFILE).start()
    ags.init(store=store, instrument=False)
    original = litellm.completion
    instrumentor = LiteLLMInstrumentor()
    assert instrumentor.instrument()
    truth = []
    try:
        for warm_up in (True, False):
            for name, call in _calls(sim).items():
                first = len(sim.served)
                ags.task(name)(call)()
                truth.append((name, warm_up, sim.served[first:]))
    finally:
        instrumentor.uninstrument()
        ags.shutdown()
        sim.stop()
    assert litellm.completion is original
    with Store(store, read_only=True) as opened:
        results = sorted(task_results(opened), key=lambda r: r.start_ns)
        providers = dict(
            opened.con.execute(
                "SELECT json_extract_string(attributes, '$.\"gen_ai.request.model\"'),"
                " json_extract_string(attributes, '$.\"gen_ai.provider.name\"') FROM spans WHERE kind = 'llm'"
            ).fetchall()
        )
    assert providers == {"gpt-oss-120b": "openai", "claude-sim": "anthropic", "embed-sim": "openai"}
    assert [r.name for r in results] == [name for name, _, _ in truth]
    for (name, warm_up, served), result in zip(truth, results):
        if warm_up:
            continue
        row = (
            f"{name}: {result.llm_calls} calls, {result.input_tokens}+{result.output_tokens}, {result.models}"
        )
        assert result.llm_calls == 1, row
        if not served:  # the simulated provider keeps no record of an embedding
            assert result.category_ns()["inference"] > 0 and result.input_tokens > 0, row
            continue
        served_ms = sum(s.end_ns - s.arrival_ns for s in served) / 1e6
        assert_model_time(Measured.model_ms(result), served_ms, 1, row)
        if name != "anthropic, stream":  # LiteLLM asks anthropic for no usage on a stream
            assert (result.input_tokens, result.output_tokens) == (
                served[0].input_tokens,
                served[0].output_tokens,
            ), row
        if "stream" in name:
            assert result.components[C.KEY_INDEX[C.DECODE]] / 1e6 == pytest.approx(200, abs=40), row
