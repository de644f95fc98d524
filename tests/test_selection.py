"""Selections (DESIGN §8): --task, --service, --since/--until, pushed into the store query."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from pathlib import Path

import jsonschema
import pytest
from clirun import cli, cli_json
from tracebuild import varied_store

from agentscope.store import Store
from agentscope.store.query import span_batches
from agentscope.store.selection import Selection, SelectionError, parse_duration, parse_time

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
START = 1_700_000_000_000_000_000  # varied_store's first trace, ns; one trace a minute


def test_times_are_iso_or_relative_to_now():
    assert parse_time("2026-12-01T12:00:00Z", NOW) == parse_time("2026-12-01 12:00", NOW)
    assert parse_time("24h", NOW) == parse_time("2026-11-30T12:00:00+00:00", NOW)
    assert parse_time("7d", NOW) == parse_time("2026-11-24T12:00Z", NOW)
    assert parse_time("90s", NOW) == parse_time("2026-12-01T11:58:30Z", NOW)
    assert parse_time("2026-12-01T13:00+01:00", NOW) == parse_time("2026-12-01T12:00Z", NOW)
    with pytest.raises(SelectionError, match=r"--since 'yesterday': give an ISO time"):
        Selection.parse(since="yesterday", now=NOW)
    with pytest.raises(SelectionError, match="is not before --until"):
        Selection.parse(since="1h", until="2h", now=NOW)


def test_spans_of_time_past_the_calendar_are_refused_by_name():
    assert parse_duration("999999999d", "--retain") == 999_999_999 * 86_400 * 10**9
    with pytest.raises(SelectionError, match=r"--retain '1000000000d': too long a span"):
        parse_duration("1000000000d", "--retain")
    with pytest.raises(SelectionError, match=r"--before '99999999999w': too long a span"):
        parse_time("99999999999w", NOW, "--before")
    with pytest.raises(SelectionError, match=r"--since '800000d': reaches back before the year 1"):
        Selection.parse(since="800000d", now=NOW)
    assert parse_time("700000d", NOW) < 0  # before the epoch, as an ISO time of year 110 would be


def test_a_retention_of_zero_is_refused_not_taken_as_keep_nothing():
    assert parse_duration("0.5s", "--retain") == 500_000_000
    for text in ("0d", "0s", "0.0w", "0.0000000001s"):
        with pytest.raises(SelectionError, match=r"--retain '.*': would keep nothing; .* leave --retain out"):
            parse_duration(text, "--retain")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """400 traces, two task names; the traces of the last 100 minutes belong to service ``billing``."""
    path = varied_store(tmp_path_factory.mktemp("sel") / "all.duckdb", 400)
    with Store(path) as opened:
        opened.con.execute(
            "UPDATE spans SET service = 'billing' WHERE trace_id IN "
            "(SELECT trace_id FROM spans WHERE parent_id IS NULL AND start_ns >= ?)",
            [START + 300 * 60 * 10**9],
        ).fetchall()
    return path


def _subset(store, tmp_path, keep_sql: str, params: list) -> str:
    """A copy of the store holding only the traces ``keep_sql`` picks (by their root span)."""
    copy = tmp_path / "subset.duckdb"
    shutil.copy(store, copy)
    with Store(copy) as opened:
        roots = f"SELECT trace_id FROM spans WHERE parent_id IS NULL AND {keep_sql}"
        opened.con.execute(f"DELETE FROM spans WHERE trace_id NOT IN ({roots})", params).fetchall()
    return str(copy)


def iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, timezone.utc).isoformat()


@pytest.mark.parametrize(
    ("options", "keep_sql", "params"),
    [
        (["--task", "triage"], "name = ?", ["triage"]),
        (["--service", "billing"], "service = ?", ["billing"]),
        (
            ["--since", iso(START + 100 * 60 * 10**9), "--until", iso(START + 200 * 60 * 10**9)],
            "start_ns >= ? AND start_ns < ?",
            [START + 100 * 60 * 10**9, START + 200 * 60 * 10**9],
        ),
        (
            ["--task", "resolve_ticket", "--service", "svc", "--since", iso(START + 250 * 60 * 10**9)],
            "name = ? AND service = ? AND start_ns >= ?",
            ["resolve_ticket", "svc", START + 250 * 60 * 10**9],
        ),
    ],
)
def test_a_selection_blames_exactly_the_tasks_it_picks(store, tmp_path, options, keep_sql, params):
    selected = cli_json("blame", "--store", str(store), *options)
    alone = cli_json("blame", "--store", _subset(store, tmp_path, keep_sql, params))
    assert selected == alone
    assert selected["tasks"]["count"] < 400


def test_the_selection_is_pushed_into_the_query(store):
    with Store(store, read_only=True) as opened:
        everything = sum(b.num_rows for b in span_batches(opened))
        billing = sum(b.num_rows for b in span_batches(opened, Selection(service="billing")))
        window = Selection(since_ns=START + 390 * 60 * 10**9)
        last = sum(b.num_rows for b in span_batches(opened, window))
        expected = opened.con.execute(
            "SELECT count(*) FROM spans WHERE trace_id IN "
            "(SELECT trace_id FROM spans WHERE parent_id IS NULL AND start_ns >= ?)",
            [window.since_ns],
        ).fetchall()[0][0]
    assert 0 < billing < everything
    assert last == expected  # only the last ten traces' spans were read


def test_a_selection_that_picks_nothing_says_so(store):
    result = cli("blame", "--store", str(store), "--service", "nope")
    assert result.returncode == 1
    flat = " ".join(result.stderr.split())
    assert f"no tasks of service 'nope' in {store}:" in flat  # the store, not the snapshot read


def test_show_picks_the_task_the_selection_admits(store):
    with Store(store, read_only=True) as opened:
        trace_id, name = opened.con.execute(
            "SELECT trace_id, name FROM spans WHERE parent_id IS NULL ORDER BY start_ns LIMIT 1"
        ).fetchall()[0]
    other = "triage" if name == "resolve_ticket" else "resolve_ticket"

    def show(*options):
        return cli("show", trace_id, "--store", str(store), "--format", "json", *options)

    assert json.loads(show("--task", name).stdout)["task"]["name"] == name
    missing = show("--task", other)
    assert missing.returncode == 1
    assert f"no trace {trace_id} with a task named '{other}'" in " ".join(missing.stderr.split())


def test_budget_has_a_section_per_task_type_unless_one_is_picked(store):
    def budget(*options):
        return cli_json("budget", "--store", str(store), *options)

    total = budget("--tasks-per-month", "1000")
    sections = total["task_types"]
    assert [s["scope"]["task_names"] for s in sections] == [["resolve_ticket"], ["triage"]]
    assert sum(s["scope"]["tasks"] for s in sections) == total["scope"]["tasks"] == 400
    assert sum(s["projection"]["tasks_per_month"] for s in sections) == pytest.approx(1000)
    schema = json.loads((Path(__file__).parent.parent / "docs/schemas/budget.v1.schema.json").read_text())
    jsonschema.validate(total, schema)
    picked = budget("--tasks-per-month", "1000", "--task", "triage")
    assert "task_types" not in picked
    assert picked["latency"] == sections[1]["latency"]


def test_budget_documents_show_each_task_type(store, tmp_path):
    for fmt, heading in (("markdown", "## Task type: triage"), ("html", "<h2>Task type: triage</h2>")):
        out = tmp_path / f"budget.{fmt}"
        result = cli("budget", "--store", str(store), "--format", fmt, "--output", str(out))
        assert result.returncode == 0, result.stderr
        text = out.read_text()
        assert heading in text and heading.replace("triage", "resolve_ticket") in text
