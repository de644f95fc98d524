"""Traces kept in Arize Phoenix, read back through its REST API and ingested: a real Phoenix server on
loopback receives an OpenInference-traced agent's spans, and both shapes its API pages them in are saved
as users save them (each page a file, an array of spans, JSON lines) and held to what the simulated
provider served (harness.assert_model_time, calls, tokens, tools ±10%, a streamed call's decode)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from harness import SEQUENTIAL_PROMPT, Measured, assert_model_time, interpreter_of, require

from agentscope.analysis import categories as C
from agentscope.analysis.pipeline import task_results
from agentscope.ingest import ingest
from agentscope.store import Store

require("openinference.instrumentation.openai")

AGENT = Path(__file__).with_name("phoenix_agent.py")
PROJECT = "support-agents"
START_S = 120


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory) -> str:
    """A Phoenix server of the ``peers-phoenix`` environment on loopback, its data in a temporary folder."""
    python = interpreter_of("AGENTSCOPE_PHOENIX_PYTHON", "peers-phoenix")
    work = tmp_path_factory.mktemp("phoenix")
    port = _free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(work),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(_free_port()),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = work / "phoenix.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [str(Path(python).parent / "phoenix"), "serve"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_S
        while not _healthy(base):
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"Phoenix did not start; its log ends: {log.read_text()[-2000:]}")
            time.sleep(0.5)
        yield base
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)


def _healthy(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


def _pages(base: str, path: str, spans: int) -> list[dict]:
    """Every page of a span listing, ``limit`` spans a page, following ``next_cursor`` (bounded); waits
    until Phoenix has inserted all ``spans`` (it writes them in batches after the export returns)."""
    deadline = time.monotonic() + 60
    while True:
        pages, cursor = [], None
        for _ in range(spans):
            query = f"?limit=10&cursor={cursor}" if cursor else "?limit=10"
            with urllib.request.urlopen(f"{base}/v1/projects/{PROJECT}/{path}{query}", timeout=30) as answer:
                pages.append(json.load(answer))
            cursor = pages[-1]["next_cursor"]
            if cursor is None:
                break
        if sum(len(page["data"]) for page in pages) >= spans or time.monotonic() > deadline:
            return pages
        time.sleep(0.5)


@pytest.fixture(scope="module")
def exported(phoenix, tmp_path_factory) -> tuple[list[dict], Path]:
    """The agent's run (the provider's record of it) and a folder of Phoenix's pages, saved as users do."""
    done = subprocess.run(
        [sys.executable, str(AGENT), phoenix, PROJECT], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-4000:]
    truths = json.loads(done.stdout.splitlines()[-1])
    spans = sum(1 + len(truth["served"]) + len(truth["tools"]) for truth in truths)  # task, calls, tools
    folder = tmp_path_factory.mktemp("phoenix-export")
    own = _pages(phoenix, "spans", spans)
    otlp = _pages(phoenix, "spans/otlpv1", spans)
    assert len(own) > 1 and sum(len(page["data"]) for page in own) == spans, [len(p["data"]) for p in own]
    (folder / "pages").mkdir()
    for number, page in enumerate(own, start=1):
        (folder / "pages" / f"page-{number}.json").write_text(json.dumps(page))
    (folder / "array.json").write_text(json.dumps([span for page in own for span in page["data"]]))
    lines = [json.dumps(span) for page in otlp for span in page["data"]]
    (folder / "otlpv1.jsonl").write_text("\n".join(lines))
    return truths, folder


@pytest.mark.parametrize("saved", ["pages", "array.json", "otlpv1.jsonl"])
def test_phoenix_spans_read_back_from_its_api_measure_what_the_provider_served(exported, saved, tmp_path):
    truths, folder = exported
    with Store(tmp_path / "store.duckdb") as store:
        summary = ingest(store, [folder / saved])
        assert summary.ok and summary.formats == {"phoenix": summary.files}, summary.problems
        results = sorted(task_results(store), key=lambda r: r.start_ns)
        (with_prompt,) = store.con.execute(
            "SELECT count(*) FROM spans WHERE attributes LIKE ?", [f"%{SEQUENTIAL_PROMPT}%"]
        ).fetchone()
    assert with_prompt == 0
    assert [result.name for result in results] == ["support_task"] * len(truths)
    for truth, result in zip(truths[1:], results[1:]):  # the first warms the process up
        served = [s for s in truth["served"] if s["status"] == 200]
        model_ms = sum(s["end_ns"] - s["arrival_ns"] for s in truth["served"]) / 1e6
        tools_ms = sum(truth["tools"].values())
        figures = (
            f"{saved} {truth['shape']}: model {Measured.model_ms(result):.0f} / {model_ms:.0f} ms, "
            f"tools {Measured.tools_ms(result):.0f} / {tools_ms:.0f} ms, decode "
            f"{result.components[C.KEY_INDEX[C.DECODE]] / 1e6:.0f} ms"
        )
        print(figures)
        assert_model_time(Measured.model_ms(result), model_ms, len(truth["served"]), figures)
        assert Measured.tools_ms(result) == pytest.approx(tools_ms, rel=0.10), figures
        assert result.llm_calls == len(served), figures
        if truth["shape"] == "streamed":  # a stream that does not ask for usage reports no tokens
            assert result.components[C.KEY_INDEX[C.DECODE]] > 0, figures
        else:
            assert result.input_tokens == sum(s["input_tokens"] for s in served), figures
            assert result.output_tokens == sum(s["output_tokens"] for s in served), figures
