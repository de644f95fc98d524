"""``agentscope compare``: two selections side by side, on stores and on windows of one store."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from clirun import cli
from tracebuild import varied_store

from agentscope.analysis.compare import compare, summary
from agentscope.store import Store

SCHEMA = json.loads((Path(__file__).parent.parent / "docs/schemas/compare.v1.schema.json").read_text())
DAY_MS = 86_400_000


@pytest.fixture(scope="module")
def trial(tmp_path_factory):
    """The same 200 tasks before and after a provider twice as fast, as two stores and as two days of one."""
    folder = tmp_path_factory.mktemp("trial")
    before = varied_store(folder / "before.duckdb", 200)
    after = varied_store(folder / "after.duckdb", 200, llm_scale=0.5)
    both = varied_store(folder / "both.duckdb", 200)
    with Store(both) as opened:
        opened.con.execute(
            f"ATTACH '{varied_store(folder / 'next.duckdb', 200, llm_scale=0.5, start_ms=DAY_MS)}' AS n"
        )
        moved = "SELECT * REPLACE ('next-' || trace_id AS trace_id) FROM n.spans"  # new ids, same tasks
        opened.con.execute(f"INSERT INTO spans {moved}").fetchall()
    return before, after, both


def test_a_faster_provider_shows_as_less_inference_and_nothing_else(trial):
    before, after, _ = trial
    result = cli("compare", str(before), str(after), "--format", "json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    jsonschema.validate(doc, SCHEMA)
    assert doc["baseline"]["tasks"] == doc["candidate"]["tasks"] == 200
    p95 = doc["latency_ms"]["p95"]
    assert p95["candidate_ms"] < p95["baseline_ms"] and p95["change"] < -0.1
    budget = {row["category"]: row for row in doc["budget"]}
    assert budget["inference"]["change"] < -0.3
    for category in ("tool", "db", "retry"):  # untouched by the provider; the p95 task may be another one
        assert abs(budget[category]["change_ms"]) < abs(budget["inference"]["change_ms"]) / 3
    assert doc["operations"][0]["category"] == "inference"
    assert doc["summary"].startswith("p95 −") and ": inference −" in doc["summary"]


def test_two_windows_of_one_store_compare_like_two_stores(trial):
    before, after, both = trial
    stores = json.loads(cli("compare", str(before), str(after), "--format", "json").stdout)
    windows = cli(
        "compare", "--store", str(both), "..2023-11-15T12:00Z", "2023-11-15T12:00Z..", "--format", "json"
    )
    assert windows.returncode == 0, windows.stderr
    doc = json.loads(windows.stdout)
    assert doc["latency_ms"] == stores["latency_ms"] and doc["budget"] == stores["budget"]
    assert doc["baseline"]["label"] == "..2023-11-15T12:00Z"


def test_dot_dot_is_the_whole_store_not_the_parent_folder(trial, tmp_path):
    _, _, both = trial
    (tmp_path / "notes.txt").write_text("not a trace\n")
    (tmp_path / "here").mkdir()
    args = ("compare", "--store", str(both), "..", "2023-11-15T12:00Z..", "--format", "json")
    whole = cli(*args, cwd=tmp_path / "here")
    assert whole.returncode == 0, whole.stderr
    doc = json.loads(whole.stdout)
    assert doc["baseline"]["label"] == ".." and doc["baseline"]["tasks"] == 400
    assert doc["candidate"]["tasks"] == 200


def test_table_and_markdown_carry_the_summary(trial):
    before, after, _ = trial
    doc = json.loads(cli("compare", str(before), str(after), "--format", "json").stdout)
    table = cli("compare", str(before), str(after))
    markdown = cli("compare", str(before), str(after), "--format", "markdown")
    assert table.returncode == markdown.returncode == 0
    assert doc["summary"] in " ".join(table.stdout.split())
    assert f"**{doc['summary']}**" in markdown.stdout and "| inference |" in markdown.stdout


def test_a_side_that_is_neither_file_nor_window_is_a_usage_error(trial):
    result = cli("compare", str(trial[0]), "no-such-store.duckdb")
    assert result.returncode == 2
    assert "candidate 'no-such-store.duckdb' is neither a file nor a window" in " ".join(
        result.stderr.split()
    )
    empty = cli("compare", "--store", str(trial[2]), "..2000-01-01", "7d..")
    assert empty.returncode == 1 and "no tasks until 2000-01-01T00:00:00Z in the baseline" in empty.stderr


def test_summary_names_the_categories_that_moved_most():
    latency = {
        "p95": {"baseline_ms": 10_000.0, "candidate_ms": 6_900.0, "change_ms": -3_100.0, "change": -0.31}
    }
    budget = [
        {"category": "inference", "change_ms": -1_200.0},
        {"category": "queue", "change_ms": 300.0},
        {"category": "tool", "change_ms": -20.0},
    ]
    assert summary(95, latency, budget) == "p95 −31%: inference −1.2 s, queue +300 ms."
    report = {
        "percentile": 95,
        "tasks": {"count": 1, "accepted": 1, "names": ["t"]},
        "latency_ms": dict.fromkeys(("p50", "p90", "p95", "p99", "mean", "max"), 1.0),
        "budget": [{"category": "inference", "ms": 1.0}],
        "operations": [],
    }
    with pytest.raises(ValueError, match="different percentiles"):
        compare(report, {**report, "percentile": 90})
