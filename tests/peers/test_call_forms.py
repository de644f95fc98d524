"""Every form of an anthropic or openai call is one model call, alone or beside OpenInference's or
OpenLLMetry's instrumentor of that SDK, each scenario in a process of its own (``call_forms.py``).

Two anthropic generations: the one the ``peers`` extra installs, which makes its own span for each call,
and anthropic 1.13 (extra ``peers-anthropic-classic``, an environment of its own), the last that makes
none, where agentscope's integration makes the call's span: ``messages.stream()``, ``parse`` and the
beta API post without ``create`` and were once left out.  On both SDKs, a stream read through the raw
response (``with_raw_response``, ``with_streaming_response``), which no peer can wrap: the peers end
their record at its headers.  Held to the simulated provider's own record of each request: one call,
its model time, its tokens, and a first-token split on streamed calls."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from harness import Measured, assert_model_time, interpreter_of, require

from agentscope.analysis import categories as C
from agentscope.analysis.pipeline import task_results
from agentscope.store import Store

RUNNER = Path(__file__).with_name("call_forms.py")

STREAMED = {
    "create, stream=True",
    "stream()",
    "async stream()",
    "beta stream()",
    "with_streaming_response, stream=True",
    "with_raw_response, stream=True",
    "async with_streaming_response, stream=True",
}
EMPTY_PEER_RECORD = {("openllmetry", "beta stream()")}
"""OpenLLMetry 0.62's span for ``beta.messages.stream()`` ends as the helper returns its manager, before
the request is sent, with no tokens: a record of its own beside the call, counted as a second call
(docs/coexistence.md)."""

PEER_ALONE = ("classic", "openllmetry", "peer-first", "create, stream=True")
"""OpenLLMetry's anthropic spans are never current, so where it patched ``create`` below agentscope on an
SDK that makes no span, a stream is its record alone: its tokens (message_start's one output token added
to the final count) and no first token, the call's time unsplit (docs/coexistence.md)."""

SCENARIOS = [
    (sdk, peer, order)
    for sdk in ("current", "classic", "openai")
    for peer, order in (
        ("none", "ags-first"),
        ("openinference", "ags-first"),
        ("openinference", "peer-first"),
        ("openllmetry", "ags-first"),
        ("openllmetry", "peer-first"),
    )
]
"""``current`` and ``classic`` are the two anthropic generations."""


def _python(sdk: str) -> str:
    if sdk == "classic":
        return interpreter_of("AGENTSCOPE_ANTHROPIC_CLASSIC_PYTHON", "peers-anthropic-classic")
    library = "anthropic" if sdk == "current" else "openai"
    require(library)
    require(f"openinference.instrumentation.{library}")
    require(f"opentelemetry.instrumentation.{library}")
    return sys.executable


@pytest.mark.parametrize(("sdk", "peer", "order"), SCENARIOS, ids=["-".join(s) for s in SCENARIOS])
def test_every_form_of_a_call_is_one_model_call(sdk, peer, order, tmp_path):
    store = tmp_path / "store.duckdb"
    library = "openai" if sdk == "openai" else "anthropic"
    command = [_python(sdk), str(RUNNER), str(store), "--sdk", library, "--peer", peer, "--order", order]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    if sdk == "classic":
        assert seen["sdk"] == "1.13.0", seen["sdk"]
    assert seen["said"] == []
    with Store(store, read_only=True) as opened:
        results = sorted(task_results(opened), key=lambda r: r.start_ns)
    assert [r.name for r in results] == [t["form"] for t in seen["tasks"]]
    rows = []
    for truth, result in zip(seen["tasks"], results):
        if truth["warm_up"]:
            continue
        (served,) = truth["served"]
        served_ms = (served["end_ns"] - served["arrival_ns"]) / 1e6
        decode_ms = result.components[C.KEY_INDEX[C.DECODE]] / 1e6
        model_ms = Measured.model_ms(result)
        row = (
            f"| {sdk} | {peer}, {order} | {truth['form']} | {model_ms:.0f} / {served_ms:.0f} | "
            f"{result.llm_calls} | {result.input_tokens}+{result.output_tokens} / "
            f"{served['input_tokens']}+{served['output_tokens']} | {decode_ms:.0f} |"
        )
        rows.append(row)
        calls = 2 if (peer, truth["form"]) in EMPTY_PEER_RECORD else 1
        assert result.llm_calls == calls, row
        assert_model_time(model_ms, served_ms, 1, row)
        assert Measured.tools_ms(result) == pytest.approx(truth["tool_ms"], rel=0.10), row
        tokens = (served["input_tokens"], served["output_tokens"])
        if (sdk, peer, order, truth["form"]) == PEER_ALONE:
            assert (result.input_tokens, result.output_tokens, decode_ms) == (tokens[0], tokens[1] + 1, 0), (
                row
            )
            continue
        assert (result.input_tokens, result.output_tokens) == tokens, row
        if truth["form"] in STREAMED:
            assert decode_ms > 0, row
    print("\n".join(rows))
