"""OpenTelemetry's own HTTP-client and database instrumentations beside agentscope's, each order in a
process of its own (``contrib_beside.py``): each operation one call, each task's time in its
categories, against real PostgreSQL, Redis and loopback HTTP servers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from harness import Measured, assert_model_time, require

from agentscope.analysis import categories as C
from agentscope.analysis.pipeline import task_results
from agentscope.store import Store

RUNNER = Path(__file__).with_name("contrib_beside.py")
LIBRARIES = ("httpx", "psycopg", "redis", "requests")


@pytest.mark.parametrize("order", ["ags-first", "contrib-first"])
def test_each_operation_recorded_by_both_is_one_call(order, tmp_path):
    for library in LIBRARIES:
        require(f"opentelemetry.instrumentation.{library}")
    store = tmp_path / "store.duckdb"
    command = [sys.executable, str(RUNNER), str(store), "--order", order]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["said"] == []
    with Store(store, read_only=True) as opened:
        results = sorted(task_results(opened), key=lambda r: r.start_ns)
        scopes = {scope for (scope,) in opened.con.execute("SELECT DISTINCT scope FROM spans").fetchall()}
    assert {f"opentelemetry.instrumentation.{library}" for library in LIBRARIES} <= scopes
    assert len(results) == len(seen["tasks"])
    for truth, result in zip(seen["tasks"][1:], results[1:]):  # the first warms the process up
        (served,) = truth["served"]
        calls = {}
        for category, _, n in result.operations.values():
            calls[category] = calls.get(category, 0) + n
        row = f"{order}: {calls} {result.operations}"
        assert calls == {"tool": 1, "db": truth["db"], "network": truth["http"], "inference": 1}, row
        tokens = (served["input_tokens"], served["output_tokens"])
        assert result.llm_calls == 1 and (result.input_tokens, result.output_tokens) == tokens, row
        assert_model_time(Measured.model_ms(result), (served["end_ns"] - served["arrival_ns"]) / 1e6, 1, row)
        assert result.components[C.KEY_INDEX["db"]] / 1e6 >= 30 + 20, row  # the two pg_sleep
