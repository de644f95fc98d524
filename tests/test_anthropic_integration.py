"""The anthropic integration, driving the real anthropic SDK against the simulated provider."""

from __future__ import annotations

import asyncio

import anthropic
import pytest
from agentscope.integrations.anthropic import AnthropicInstrumentor

import agentscope as ags
from agentscope import attributes as A
from agentscope.analysis.pipeline import blame_store
from agentscope.sim import Profile, SimServer
from agentscope.store import Store

MESSAGES = [{"role": "user", "content": "where is my refund"}]


@pytest.fixture
def sim():
    server = SimServer(
        Profile(
            queue_ms=10,
            prefill_ms=30,
            tokens_per_s=400,
            output_tokens=8,
            rate_limit_rate=0.5,
            retry_after_ms=30,
            seed=1,
        )
    ).start()
    yield server
    server.stop()


def test_calls_streams_and_retries_give_one_llm_span_each(tmp_path, sim):
    store = tmp_path / "anthropic.duckdb"
    ags.init(store=store, instrument=False)
    instrumentor = AnthropicInstrumentor()
    assert instrumentor.instrument()
    try:
        client = anthropic.Anthropic(base_url=sim.anthropic_base_url, api_key="sk-ant-secret", max_retries=10)

        @ags.task
        def ask() -> None:
            client.messages.create(model="claude-sim", max_tokens=50, messages=MESSAGES)
            with client.messages.create(
                model="claude-sim", max_tokens=50, messages=MESSAGES, stream=True
            ) as s:
                assert sum(1 for _ in s) == 8 + 5

        for _ in range(4):
            ask()

        async def main():
            async_client = anthropic.AsyncAnthropic(
                base_url=sim.anthropic_base_url, api_key="k", max_retries=10
            )
            await async_client.messages.create(model="claude-sim", max_tokens=50, messages=MESSAGES)

        asyncio.run(main())
        from anthropic._base_client import SyncAPIClient

        # the SDK's own span is the call and records its usage: nothing to read onto it
        assert not hasattr(SyncAPIClient.__dict__["_process_response"], "__wrapped__")
    finally:
        instrumentor.uninstrument()
        ags.shutdown()
    with Store(store, read_only=True) as opened:
        kinds = dict(opened.con.execute("SELECT kind, count(*) FROM spans GROUP BY kind").fetchall())
        llm = opened.con.execute("SELECT attributes FROM spans WHERE kind = 'llm'").fetchall()
        parents = opened.con.execute(
            "SELECT count(*) FROM spans s JOIN spans p ON s.parent_id = p.span_id "
            "WHERE s.kind IN ('http', 'backoff') AND p.kind = 'llm'"
        ).fetchall()[0][0]
        report = blame_store(opened)
    assert kinds["llm"] == 9
    assert kinds["http"] >= 3 and kinds["backoff"] == kinds["http"] and parents == 2 * kinds["http"]
    assert all("sk-ant-secret" not in text for (text,) in llm)
    assert all(f'"{A.GEN_AI_USAGE_OUTPUT_TOKENS}":8' in text for (text,) in llm)
    # a stream's input tokens come from its first event, message_start
    assert all(f'"{A.GEN_AI_USAGE_INPUT_TOKENS}":' in text for (text,) in llm)
    mean = {row["category"]: row for row in report["mean"]}
    assert mean["retry"]["components"]["failed"] > 0 and mean["retry"]["components"]["backoff"] > 0
    assert mean["inference"]["ms"] > 40


def test_uninstrument_restores_the_sdk():
    from anthropic.resources.messages.messages import Messages

    original = Messages.create
    instrumentor = AnthropicInstrumentor()
    instrumentor.instrument()
    assert Messages.create is not original
    instrumentor.uninstrument()
    assert Messages.create is original


def test_a_client_with_its_own_spans_switched_off_gets_agentscopes(tmp_path, monkeypatch):
    """``open_telemetry=False`` (or ``ANTHROPIC_OPEN_TELEMETRY=false``) stops the SDK's own span for each
    call; agentscope's is then the call, not nothing."""
    store = tmp_path / "off.duckdb"
    monkeypatch.setenv("ANTHROPIC_OPEN_TELEMETRY", "false")
    server = SimServer(Profile(prefill_ms=20, tokens_per_s=400, output_tokens=8, seed=1)).start()
    ags.init(store=store, instrument=False)
    instrumentor = AnthropicInstrumentor()
    instrumentor.instrument()
    try:
        clients = {
            "own": anthropic.Anthropic(base_url=server.anthropic_base_url, api_key="k", open_telemetry={}),
            "off": anthropic.Anthropic(base_url=server.anthropic_base_url, api_key="k", open_telemetry=False),
            "env": anthropic.Anthropic(base_url=server.anthropic_base_url, api_key="k"),
        }
        for name, client in clients.items():
            ags.task(name)(
                lambda client=client: client.messages.create(
                    model="claude-sim", max_tokens=50, messages=MESSAGES
                )
            )()
    finally:
        instrumentor.uninstrument()
        ags.shutdown()
        server.stop()
    with Store(store, read_only=True) as opened:
        scopes = dict(
            opened.con.execute(
                "SELECT t.name, s.scope FROM spans s JOIN spans t ON t.span_id = s.parent_id "
                "WHERE s.kind = 'llm'"
            ).fetchall()
        )
    assert scopes == {"own": "com.anthropic.sdk.python", "off": "agentscope", "env": "agentscope"}
