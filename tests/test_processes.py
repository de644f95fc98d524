"""agentscope in an app that forks and spawns workers (``processes.py``, a process per scenario):
multiprocessing pools and executors run decorated functions, a forked worker's spans reach the store
while it runs, a child's last spans are kept, and a fork never inherits a write half done."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb

RUNNER = Path(__file__).with_name("processes.py")


def _run(scenario: str, store: Path) -> dict:
    result = subprocess.run(
        [sys.executable, str(RUNNER), scenario, str(store)], capture_output=True, text=True, timeout=240
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert "agentscope" not in result.stderr, result.stderr[-4000:]  # nothing reported, nothing raised
    return json.loads(result.stdout.splitlines()[-1])


def _tasks(store: Path) -> dict[str, int]:
    with duckdb.connect(str(store), read_only=True) as con:
        rows = con.execute("SELECT name, count(*) FROM spans WHERE kind = 'task' GROUP BY name").fetchall()
    return dict(rows)


def test_pools_and_executors_run_decorated_functions_and_methods_and_keep_their_spans(tmp_path):
    store = tmp_path / "s.duckdb"
    outcome = _run("pool", store)
    assert outcome["results"] == [0, 2, 4, 6, 8, 10, 0, 2, 4, 6]
    assert _tasks(store) == {"resolve": 6, "answer": 4}


def test_pools_left_by_their_with_block_keep_their_workers_spans(tmp_path):
    """Leaving ``with Pool(...)`` terminates the workers (SIGTERM, whose default kills at once): each
    writes its spans first, fork and spawn alike.  Before, none of the twelve tasks reached the store."""
    store = tmp_path / "s.duckdb"
    assert _run("pool_left", store)["results"] == [0, 2, 4, 6, 8, 10] * 2
    assert _tasks(store) == {"resolve": 12}


def test_spawned_executor_children_set_up_as_the_app_does_and_record(tmp_path):
    store = tmp_path / "s.duckdb"
    assert _run("spawned", store)["results"] == [0, 2, 4, 6]
    assert _tasks(store) == {"resolve": 4}


def test_a_forked_process_that_ends_at_once_keeps_its_spans(tmp_path):
    store = tmp_path / "s.duckdb"
    assert _run("process", store) == {"exitcode": 0}
    assert _tasks(store) == {"resolve": 1}


def test_a_long_lived_forked_worker_writes_while_it_runs(tmp_path):
    store = tmp_path / "s.duckdb"
    seen_after = _run("worker", store)["seen_after_s"]
    assert seen_after is not None and seen_after < 5
    assert _tasks(store) == {"resolve": 1}


def test_forks_during_writes_lose_nothing_and_leave_the_store_whole(tmp_path):
    store = tmp_path / "s.duckdb"
    outcome = _run("busy", store)
    assert outcome["exits"] == [0] * 20
    assert _tasks(store) == {"resolve": outcome["produced"], "answer": 20}
    with duckdb.connect(str(store), read_only=True) as con:
        spans = con.execute("SELECT count(*), count(DISTINCT span_id) FROM spans").fetchone()
    assert spans == (2 * (outcome["produced"] + 20),) * 2
