"""agentscope blame and show: output formats, schemas, exit codes, and no tracebacks."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from agentscope.cli.app import app
from tracebuild import store_row
from traces_fixtures import jaeger_document
from typer.testing import CliRunner

from agentscope import attributes as A
from agentscope.store import Store
from agentscope.store.schema import rows_to_table

SCHEMAS = Path(__file__).resolve().parent.parent / "docs" / "schemas"
MS = 1_000_000
runner = CliRunner()


@pytest.fixture
def store_path(tmp_path) -> Path:
    """20 tasks: task k lasts 100+k ms: a 40 ms LLM call (server timings) then a 30+k ms tool."""
    rows = []
    for k in range(20):
        trace = f"{k:032x}"
        rows += [
            store_row(trace, f"{k:015x}a", None, "task", 0, 100 + k, "ticket", **{A.TASK_NAME: "ticket"}),
            store_row(
                trace,
                f"{k:015x}b",
                f"{k:015x}a",
                "llm",
                10,
                50,
                "chat m",
                **{
                    A.GEN_AI_REQUEST_MODEL: "gpt-oss-120b",
                    A.SERVER_QUEUE_MS: 5,
                    A.SERVER_PREFILL_MS: 10,
                    A.SERVER_DECODE_MS: 20,
                    A.GEN_AI_USAGE_INPUT_TOKENS: 100,
                },
            ),
            store_row(
                trace,
                f"{k:015x}c",
                f"{k:015x}a",
                "tool",
                60,
                90 + k,
                "execute_tool search_kb",
                **{A.GEN_AI_TOOL_NAME: "search_kb"},
            ),
        ]
    path = tmp_path / "cli.duckdb"
    with Store(path) as store:
        store.insert(rows_to_table(rows))
    return path


def blame_json(*args) -> dict:
    result = runner.invoke(app, ["blame", *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_blame_json_validates_and_has_the_expected_numbers(store_path):
    report = blame_json("--store", str(store_path))
    jsonschema.validate(report, json.loads((SCHEMAS / "blame.v1.schema.json").read_text()))
    assert report["tasks"] == {"count": 20, "accepted": 20, "names": ["ticket"]}
    assert report["latency_ms"]["p95"] == pytest.approx(118)  # nearest rank: the 19th of 100..119
    assert report["latency_ms"]["p50"] == pytest.approx(109)
    budget = {r["category"]: r for r in report["budget"]}
    # window: ranks ⌈18.5⌉..⌈19.5⌉ = 19..20 (118 and 119 ms), averaged, scaled to 118 ms.
    assert budget["inference"]["components"] == {
        "prefill": pytest.approx(10 * 118 / 118.5),
        "decode": pytest.approx(20 * 118 / 118.5),
        "unsplit": 0.0,
    }
    assert sum(r["ms"] for r in report["budget"]) == pytest.approx(118)
    ops = {op["name"]: op for op in report["operations"]}
    assert ops["search_kb"]["calls_per_task"] == 1 and ops["gpt-oss-120b"]["category"] == "inference"
    whatif = {w["scenario"]: w for w in report["whatif"]}
    assert whatif["inference x∞"]["p95_ms"] == pytest.approx(118 - 30)
    assert whatif["inference x∞"]["p95_change"] == pytest.approx(-30 / 118)
    assert report["verdict"].startswith("A 3.6× faster inference chip would cut p95 from 118 ms to")


def test_speedups_chip_task_and_percentile(store_path):
    report = blame_json(
        "--store",
        str(store_path),
        "--speedup",
        "tool=2",
        "--speedup",
        "inference.decode=4,queue=2",
        "--chip",
        "jalapeno-deepseek-r1",
        "--percentile",
        "50",
        "--task",
        "ticket",
    )
    names = [w["scenario"] for w in report["whatif"]]
    assert names[-3:] == ["tool x2", "inference.decode x4, queue x2", "chip jalapeno-deepseek-r1"]
    assert report["percentile"] == 50
    assert report["verdict"].startswith("The jalapeno-deepseek-r1 preset would cut p50")
    tool = next(w for w in report["whatif"] if w["scenario"] == "tool x2")
    assert tool["p95_ms"] == pytest.approx(85 + 18 / 2)  # task k: 100 + k − (30 + k) / 2; 19th of 20


def test_markdown_and_table_carry_the_same_numbers(store_path, tmp_path):
    report = blame_json("--store", str(store_path))
    markdown = runner.invoke(app, ["blame", "--store", str(store_path), "--format", "markdown"]).stdout
    assert report["verdict"] in markdown
    assert f"| tool | {next(r['ms'] for r in report['budget'] if r['category'] == 'tool'):.1f} |" in markdown
    out = tmp_path / "report.txt"
    result = runner.invoke(app, ["blame", "--store", str(store_path), "--output", str(out)])
    assert result.exit_code == 0
    text = out.read_text()
    assert "What a p95 task is made of" in text and "search_kb" in text and "verdict" in text


def _table_widths(markdown: str) -> list[set[int]]:
    """Per Markdown table, the numbers of cells its rows have (unescaped pipes)."""
    tables: list[list[str]] = []
    previous = ""
    for line in markdown.splitlines():
        if line.startswith("|"):
            if not previous.startswith("|"):
                tables.append([])
            tables[-1].append(line)
        previous = line
    return [{len(re.findall(r"(?<!\\)\|", row)) for row in table} for table in tables]


def test_names_with_pipes_and_line_breaks_keep_every_markdown_table_whole(tmp_path):
    """Tool, task and model names come from traces: a pipe or a line break in one must not split a row."""
    rows = []
    for k in range(5):
        trace, task, tool = f"{k:032x}", f"{k:015x}a", f"{k:015x}b"
        rows += [
            store_row(
                trace, task, None, "task", 0, 100 + k, "triage|ticket", **{A.TASK_NAME: "triage|ticket"}
            ),
            store_row(
                trace, tool, task, "tool", 10, 90, "lookup", **{A.GEN_AI_TOOL_NAME: "search|filter\nv2"}
            ),
        ]
    path = tmp_path / "s.duckdb"
    with Store(path) as store:
        store.insert(rows_to_table(rows))
    outputs = [
        runner.invoke(app, ["blame", "--store", str(path), "--format", "markdown"]).stdout,
        runner.invoke(app, ["budget", "--store", str(path), "--format", "markdown"]).stdout,
        runner.invoke(app, ["compare", str(path), str(path), "--format", "markdown"]).stdout,
    ]
    assert all(r"| search\|filter v2 | tool |" in outputs[n] for n in (0, 2))  # budget names no operation
    for markdown in outputs:
        widths = _table_widths(markdown)
        assert widths and all(len(width) == 1 for width in widths), widths


def _langsmith_run(run_id: str, run_type: str, parent: str | None, start: str, end: str) -> dict:
    return {
        "id": run_id,
        "trace_id": LANGSMITH_TRACE,
        "parent_run_id": parent,
        "name": run_type,
        "run_type": run_type,
        "start_time": f"2026-12-01T08:00:{start}Z",
        "end_time": f"2026-12-01T08:00:{end}Z",
    }


LANGSMITH_TRACE = "01A230A8-9BA7-710F-9F16-BEB5C64F98C5"  # as LangSmith's page shows it, in capitals


def test_show_finds_a_trace_by_the_id_the_tool_it_came_from_shows(tmp_path):
    """A LangSmith UUID with its dashes, a Langfuse id that is free text, Jaeger's 16 digits, and our
    own hex in capitals with spaces around it all name the trace they were stored as."""
    runs = [
        _langsmith_run("01a230a8-9bbf-7685-b1c1-c7275dcd7623", "chain", None, "00.0", "02.0"),
        _langsmith_run(
            "01a230a8-9bd0-7c33-8a51-0f3b1d3e4a7b",
            "llm",
            "01a230a8-9bbf-7685-b1c1-c7275dcd7623",
            "00.1",
            "01.9",
        ),
    ]
    observations = [
        {
            "id": "root-obs",
            "traceId": "support-ticket-42",
            "type": "AGENT",
            "name": "support",
            "startTime": "2026-12-01T09:00:00Z",
            "endTime": "2026-12-01T09:00:02Z",
        },
        {
            "id": "chat-obs",
            "traceId": "support-ticket-42",
            "type": "GENERATION",
            "name": "chat",
            "parentObservationId": "root-obs",
            "model": "gpt-oss-120b",
            "startTime": "2026-12-01T09:00:00.5Z",
            "endTime": "2026-12-01T09:00:01.5Z",
        },
    ]
    jaeger = jaeger_document()
    for span in jaeger["data"][0]["spans"]:
        span["traceID"] = "0123456789abcdef"
    jaeger["data"][0]["traceID"] = "0123456789abcdef"
    (tmp_path / "runs.jsonl").write_text("".join(json.dumps(run) + "\n" for run in runs))
    (tmp_path / "observations.json").write_text(json.dumps({"data": observations}))
    (tmp_path / "jaeger.json").write_text(json.dumps(jaeger))
    store = tmp_path / "s.duckdb"
    assert runner.invoke(app, ["ingest", str(tmp_path), "--store", str(store)]).exit_code == 0
    for given, task in [
        (LANGSMITH_TRACE, "chain"),
        ("support-ticket-42", "support"),
        ("0123456789ABCDEF", "agent.run"),
        (f"  {LANGSMITH_TRACE.replace('-', '')}  ", "chain"),
    ]:
        shown = runner.invoke(app, ["show", given, "--store", str(store), "--format", "json"])
        assert shown.exit_code == 0, (given, shown.output)
        assert json.loads(shown.stdout)["task"]["name"] == task
    empty = runner.invoke(app, ["show", " ", "--store", str(store)])
    assert empty.exit_code == 2 and "TRACE_ID is empty" in empty.output


def test_store_given_as_path(store_path):
    assert blame_json(str(store_path))["tasks"]["count"] == 20


def test_show_json_and_waterfall(store_path):
    trace_id = f"{3:032x}"
    result = runner.invoke(app, ["show", trace_id, "--store", str(store_path), "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    jsonschema.validate(data, json.loads((SCHEMAS / "trace.v1.schema.json").read_text()))
    assert data["task"]["duration_ms"] == pytest.approx(103)
    path = data["critical_path"]
    assert path[0]["start_ms"] == 0 and path[-1]["end_ms"] == pytest.approx(103)
    assert [p["component"] for p in path if p["category"] in ("inference", "queue")] == [
        "provider",
        "prefill",
        "decode",
    ]
    assert data["attribution"]["tool"] == pytest.approx(33)
    table = runner.invoke(app, ["show", trace_id, "--store", str(store_path)])
    assert table.exit_code == 0 and "search_kb" in table.stdout and "●" in table.stdout


def test_show_of_a_trace_without_a_task_explains_its_root_and_says_so(tmp_path):
    trace = "e" * 32
    rows = [
        store_row(trace, "1" * 16, None, "step", 0, 50, "nightly_sync"),
        store_row(
            trace, "2" * 16, "1" * 16, "db", 5, 45, "SELECT orders", **{A.DB_SYSTEM_NAME: "postgresql"}
        ),
    ]
    path = tmp_path / "no-task.duckdb"
    with Store(path) as store:
        store.insert(rows_to_table(rows))
    env = {**os.environ, "COLUMNS": "120"}
    result = subprocess.run(
        [sys.executable, "-m", "agentscope.cli", "show", trace, "--store", str(path), "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "holds no task" in result.stderr and "nightly_sync" in result.stderr
    data = json.loads(result.stdout)
    jsonschema.validate(data, json.loads((SCHEMAS / "trace.v1.schema.json").read_text()))
    assert data["explained"] == "root" and data["attribution"]["db"] == pytest.approx(40)
    table = runner.invoke(app, ["show", trace, "--store", str(path)], env={"COLUMNS": "160"})
    assert table.exit_code == 0 and "no task in this trace" in table.stdout


def test_no_repair_changes_what_blame_sees_on_an_enclosed_sibling(tmp_path):
    trace = "d" * 32
    rows = [
        store_row(trace, "a" * 16, None, "task", 0, 100, "graph"),
        store_row(trace, "b" * 16, "a" * 16, "step", 0, 100, "call_model"),
        store_row(trace, "c" * 16, "a" * 16, "llm", 1, 99, "ChatOpenAI"),
    ]
    path = tmp_path / "sibling.duckdb"
    with Store(path) as store:
        store.insert(rows_to_table(rows))
    repaired = blame_json(str(path))
    unrepaired = blame_json(str(path), "--no-repair")
    assert repaired["repaired_spans"] == 1 and unrepaired["repaired_spans"] == 0
    assert repaired["budget"][0]["ms"] == pytest.approx(98)
    assert unrepaired["budget"][0]["ms"] == 0
    shown = runner.invoke(app, ["show", trace, "--store", str(path), "--format", "json"])
    assert json.loads(shown.stdout)["repaired"][0]["new_parent_id"] == "b" * 16
    table = runner.invoke(app, ["show", trace, "--store", str(path)], env={"COLUMNS": "160"})
    assert "↳" in table.stdout and "--no-repair" in table.stdout


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["blame", "--store", "missing.duckdb"], 2, "does not exist"),
        (["blame", "--speedup", "gpu=2"], 2, "expected CATEGORY=FACTOR"),
        (["blame", "--speedup", "tool=fast"], 2, "is not a number"),
        (["blame", "--speedup", "tool=0"], 2, "must be positive"),
        (["blame", "--chip", "h100"], 2, "unknown --chip"),
        (["blame", "--format", "xml"], 2, "choose table, json or markdown"),
        (["blame", "--task", "nope"], 1, "no tasks named 'nope'"),
        (["show", "f" * 32], 1, "no trace ffffffff"),
        (["blame", "--percentile", "nan"], 2, "nan is not a finite number"),
        (["compare", "{store}", "{store}", "--percentile", "NaN"], 2, "nan is not a finite number"),
        (["budget", "--tasks-per-month", "nan"], 2, "nan is not a finite number"),
        (["budget", "--tasks-per-month", "inf"], 2, "inf is not a finite number"),
    ],
)
def test_errors_are_messages_with_exit_codes(store_path, args, code, message):
    env = {**os.environ, "AGENTSCOPE_STORE": str(store_path), "COLUMNS": "200"}
    args = [arg.replace("{store}", str(store_path)) for arg in args]
    result = subprocess.run(
        [sys.executable, "-m", "agentscope.cli", *args], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == code, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["blame", "--format", "json", "--output", "{missing}/b.json"], "cannot write {missing}/b.json"),
        (["blame", "--output", "{missing}/blame.txt"], "cannot write {missing}/blame.txt"),
        (["budget", "--format", "html", "--output", "{missing}/b.html"], "cannot write {missing}/b.html"),
        (["compare", "{store}", "{store}", "--output", "{tmp}"], f"cannot write {{tmp}}: {os.strerror(21)}"),
        (["export", "--out", "{file}/spans"], f"cannot write {{file}}/spans: {os.strerror(20)}"),
        (["export", "--tasks", "--out", "{file}/tasks"], f"cannot write {{file}}/tasks: {os.strerror(20)}"),
        (["ingest", "--store", "{missing}/s.duckdb", "{store}"], "the folder {missing} does not exist"),
        (["blame", "--tasks", "{tmp}/empty"], "{tmp}/empty holds no Parquet files"),
        (["blame", "--tasks", "{file}"], "cannot read task tables {file}: Invalid Input Error"),
        (["blame", "--tasks", "{tmp}/spans"], "{tmp}/spans is not a task table"),
    ],
)
def test_paths_that_cannot_be_written_or_read_are_named_in_one_line(store_path, tmp_path, args, message):
    """An output in a folder that is not there, Parquet that holds no task table: the path and the reason,
    exit 2, not an internal error nor the SQL agentscope ran."""
    where = {"missing": tmp_path / "nowhere", "store": store_path, "tmp": tmp_path}
    where["file"] = tmp_path / "a.txt"
    (tmp_path / "a.txt").write_text("not a trace, not Parquet\n")
    (tmp_path / "empty").mkdir()
    env = {**os.environ, "AGENTSCOPE_STORE": str(store_path), "COLUMNS": "400"}
    exported = runner.invoke(app, ["export", "--store", str(store_path), "--out", str(tmp_path / "spans")])
    assert exported.exit_code == 0, exported.output
    result = subprocess.run(
        [sys.executable, "-m", "agentscope.cli", *(arg.format(**where) for arg in args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: "), result.stderr
    assert message.format(**where) in result.stderr
    assert "Traceback" not in result.stderr and "LINE 1" not in result.stderr
    assert not (tmp_path / "nowhere").exists()


def test_a_file_that_is_no_trace_format_is_refused_plainly(tmp_path):
    bogus = tmp_path / "notes.txt"
    bogus.write_text("hello")
    result = runner.invoke(app, ["blame", str(bogus)])
    assert result.exit_code == 2
    assert "notes.txt" in result.output and "a text file that is not JSON" in result.output
    assert "no span could be read" in result.output


def test_empty_store_says_so(tmp_path):
    path = tmp_path / "empty.duckdb"
    Store(path).close()
    result = runner.invoke(app, ["blame", "--store", str(path)])
    assert result.exit_code == 1
    assert "no tasks" in result.output


def test_a_foreign_duckdb_file_is_refused_plainly(tmp_path):
    store = tmp_path / "broken.duckdb"
    import duckdb

    with duckdb.connect(str(store)) as con:  # a DuckDB file that is not an agentscope store
        con.execute("CREATE TABLE agentscope_meta (key VARCHAR, value VARCHAR)")
        con.execute("INSERT INTO agentscope_meta VALUES ('schema_version', 'one')")
    result = subprocess.run(
        [sys.executable, "-m", "agentscope.cli", "blame", "--store", str(store)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "unreadable schema version 'one'" in result.stderr and "Traceback" not in result.stderr


def test_a_duckdb_file_with_its_own_spans_table_is_left_as_it_was(tmp_path, store_path):
    import duckdb

    other = tmp_path / "analytics.duckdb"
    with duckdb.connect(str(other)) as con:
        con.execute("CREATE TABLE spans (id INTEGER, note VARCHAR)")
        con.execute("INSERT INTO spans VALUES (1, 'theirs')")
    result = subprocess.run(
        [sys.executable, "-m", "agentscope.cli", "ingest", "--store", str(other), str(store_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "300"},
    )
    assert result.returncode == 2, result.stderr
    assert f"{other} is a DuckDB file with its own table spans, not an agentscope store" in result.stderr
    assert "Traceback" not in result.stderr
    with duckdb.connect(str(other), read_only=True) as con:
        assert con.execute("SELECT table_name FROM duckdb_tables()").fetchall() == [("spans",)]
        assert con.execute("SELECT * FROM spans").fetchall() == [(1, "theirs")]
