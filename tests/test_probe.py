"""``agentscope probe`` through the CLI against simulated providers: consent, keys, 429s, its own spans."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from tracebuild import llm_task_store

from agentscope.analysis.probing import ProbeCall, choose_sizes, fit_profile
from agentscope.sim import Profile, SimServer
from agentscope.store import Store

SECRET = "sk-probe-secret-1234"


@pytest.fixture
def recorded(tmp_path):
    """A store of LLM calls of assorted sizes."""
    return llm_task_store(tmp_path / "recorded.duckdb", [(100 + 150 * k, 5 + 3 * k) for k in range(12)])


def probe(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "agentscope.cli", "probe", *args],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "160", **(env or {})},
    )


def test_probe_honours_429s_keeps_the_key_secret_and_stores_its_calls_apart(recorded, tmp_path):
    server = SimServer(
        Profile(queue_ms=1, prefill_ms=5, tokens_per_s=2_000, rate_limit_first=True, retry_after_ms=20)
    )
    server.start()
    try:
        out = tmp_path / "p.toml"
        args = ["--base-url", server.base_url, "--model", "m", "--store", str(recorded), "--calls", "6"]
        result = probe(
            *args, "--api-key-env", "PROBE_KEY", "--yes", "--output", str(out), env={"PROBE_KEY": SECRET}
        )
    finally:
        server.stop()
    assert result.returncode == 0, result.stderr
    assert SECRET not in result.stdout + result.stderr + out.read_text()
    assert any(h.get("authorization") == f"Bearer {SECRET}" for h in server.seen_headers)
    assert {s.status for s in server.served} == {200, 429}  # every call was refused once, then retried
    with Store(recorded, read_only=True) as store:
        assert (
            store.scalar("SELECT count(*) FROM spans WHERE service = 'agentscope-probe' AND kind = 'llm'")
            == 8
        )
        stored = "".join(a for (a,) in store.con.execute("SELECT attributes FROM spans").fetchall())
        assert SECRET not in stored
    blame = subprocess.run(
        [sys.executable, "-m", "agentscope.cli", "blame", "--store", str(recorded), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert json.loads(blame.stdout)["tasks"]["count"] == 12  # the probe's calls are not the app's tasks


def test_probe_asks_before_spending_and_names_missing_things(recorded, tmp_path):
    args = ["--base-url", "http://127.0.0.1:9/v1", "--model", "gpt-oss-120b", "--store", str(recorded)]
    unasked = probe(*args)
    assert unasked.returncode == 2 and "pass --yes" in unasked.stderr
    assert "input and" in unasked.stderr and "list price" in unasked.stderr  # volume and price said first
    no_key = probe(*args, "--api-key-env", "NOT_SET_ANYWHERE", "--yes")
    assert no_key.returncode == 2 and "NOT_SET_ANYWHERE" in no_key.stderr
    empty = tmp_path / "empty.duckdb"
    Store(empty).close()
    nothing = probe("--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--store", str(empty), "--yes")
    assert nothing.returncode == 2 and "no LLM call with input and output token counts" in nothing.stderr
    assert "Traceback" not in unasked.stderr + no_key.stderr + nothing.stderr


def test_sizes_cover_the_spread_and_the_fit_recovers_known_rates():
    recorded = [(i * 10, i) for i in range(1, 101)]
    sizes = choose_sizes(recorded, 5)
    assert sizes[0] == (10, 1) and sizes[-1] == (1000, 100) and len(sizes) == 5
    calls = [
        ProbeCall(i, o, ttft_ms=30 + i / 5_000 * 1000, total_ms=30 + i / 5_000 * 1000 + o / 400 * 1000)
        for i, o in sizes
    ]
    fitted = fit_profile("x", "m", calls, "http://127.0.0.1")
    assert fitted.value("ttft_base_ms") == pytest.approx(30)
    assert fitted.value("prefill_tokens_per_s") == pytest.approx(5_000)
    assert fitted.value("decode_tokens_per_s") == pytest.approx(400)
    assert max(abs(r) for r in fitted.residuals_ms) < 1e-6
