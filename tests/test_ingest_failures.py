"""The ways a compressed or unreadable input can fail: named by file and line, good lines kept, exit 2."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys

import pytest
from clirun import cli
from orjson import dumps
from traces_fixtures import agent_trace_otlp

from agentscope.store import Store

LINES = b"".join(dumps(agent_trace_otlp(f"{n + 1:032x}")) + b"\n" for n in range(3000))


def ingest(*paths, store) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "agentscope.cli", "ingest", *map(str, paths), "--store", str(store)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )


def spans_in(store) -> int:
    with Store(store, read_only=True) as opened:
        return opened.span_count()


def test_a_truncated_gzip_keeps_the_lines_before_the_cut_and_says_where(tmp_path):
    packed = gzip.compress(LINES)
    path = tmp_path / "export.jsonl.gz"
    path.write_bytes(packed[: len(packed) * 2 // 3])
    store = tmp_path / "s.duckdb"
    result = ingest(path, store=store)
    assert result.returncode == 2, result.stderr
    assert "Aborted" not in result.stdout + result.stderr and "Traceback" not in result.stderr
    kept = spans_in(store)
    assert kept > 0 and kept % 3 == 0  # whole lines only (three spans a line)
    lines = kept // 3
    assert (
        f"{path}:{lines + 2}: the file is cut short (its gzip stream ends early) after line {lines + 1:,}"
        in (result.stderr)
    )
    assert f"{path}:{lines + 1}: invalid JSON" in result.stderr  # the line the cut went through


def test_a_gzip_cut_before_its_first_line_is_named(tmp_path):
    path = tmp_path / "tiny.jsonl.gz"
    path.write_bytes(gzip.compress(LINES)[:200])
    result = ingest(path, store=tmp_path / "s.duckdb")
    assert result.returncode == 2
    assert f"{path}: cannot read: the file is cut short" in result.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "cannot read: the file is empty"),
        (b"\x1f\x8b" + b"not really gzip" * 10, "cannot read: the gzip data is broken"),
    ],
    ids=["empty", "gzip magic, broken data"],
)
def test_empty_and_broken_files_are_named(tmp_path, content, message):
    path = tmp_path / "export.jsonl.gz"
    path.write_bytes(content)
    good = tmp_path / "good.jsonl"
    good.write_bytes(LINES[: LINES.index(b"\n") + 1])
    store = tmp_path / "s.duckdb"
    result = ingest(path, good, store=store)
    assert result.returncode == 2 and f"{path}: {message}" in result.stderr
    assert spans_in(store) == 3  # the good file beside it is kept


def test_a_file_named_gz_that_is_not_gzip_is_read_by_its_content(tmp_path):
    path = tmp_path / "export.jsonl.gz"
    path.write_bytes(LINES[:50_000].rsplit(b"\n", 1)[0] + b"\n")
    store = tmp_path / "s.duckdb"
    result = ingest(path, store=store)
    assert result.returncode == 0, result.stderr
    assert spans_in(store) == LINES[:50_000].rsplit(b"\n", 1)[0].count(b"\n") * 3 + 3


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every folder whatever its permissions")
def test_a_folder_that_cannot_be_listed_is_named(tmp_path):
    folder = tmp_path / "traces" / "locked"
    folder.mkdir(parents=True)
    (tmp_path / "traces" / "ok.jsonl").write_bytes(LINES[: LINES.index(b"\n") + 1])
    folder.chmod(0)
    try:
        result = ingest(tmp_path / "traces", store=tmp_path / "s.duckdb")
    finally:
        folder.chmod(0o755)
    assert result.returncode == 2 and f"{folder}: cannot read the folder" in result.stderr


def test_a_folder_with_nothing_to_read_is_named_and_the_other_paths_are_read(tmp_path):
    (tmp_path / "empty" / ".cache").mkdir(parents=True)
    (tmp_path / "empty" / ".cache" / "hidden.jsonl").write_bytes(LINES[: LINES.index(b"\n") + 1])
    (tmp_path / "ok.jsonl").write_bytes(LINES[: LINES.index(b"\n") + 1])
    store = tmp_path / "s.duckdb"
    result = ingest(tmp_path / "empty", tmp_path / "ok.jsonl", store=store)
    assert result.returncode == 2, result.stderr
    assert f"{tmp_path / 'empty'}: a folder with no files (hidden ones skipped)" in result.stderr
    assert spans_in(store) == 3


def test_a_folder_that_holds_its_store_and_another_is_ingested_again_without_problems(tmp_path):
    """``agentscope ingest .`` where the default store lives: its own files are not inputs, and a second
    store in the folder is merged without its lock files, WAL or spool read as traces."""
    (tmp_path / "spans.jsonl").write_bytes(LINES[: LINES.index(b"\n") + 1])
    other = tmp_path / "team" / "other.duckdb"
    other.parent.mkdir()
    other_lines = tmp_path / "other-input.jsonl"
    other_lines.write_bytes(dumps(agent_trace_otlp("f" * 32)) + b"\n")
    assert ingest(other_lines, store=other).returncode == 0
    other_lines.unlink()
    for sidecar in (".lock", ".lock.queue", ".wal"):
        other.with_name(other.name + sidecar).touch()
    (other.with_name(other.name + ".spool") / "batch.arrow.tmp").parent.mkdir()
    (other.with_name(other.name + ".spool") / "batch.arrow.tmp").write_bytes(b"")
    store = tmp_path / "agentscope.duckdb"
    first = ingest(tmp_path, store=store)
    assert first.returncode == 0, first.stderr
    again = ingest(tmp_path, store=store)
    assert again.returncode == 0, again.stderr
    assert "problem" not in again.stderr and "skipped: the store being written" in again.stdout + again.stderr
    assert spans_in(store) == 6
    itself = ingest(store, store=store)
    assert itself.returncode == 0 and "skipped: the store being written" in itself.stdout + itself.stderr


def test_agentscope_exports_among_trace_files_are_named_with_the_command_that_reads_them(tmp_path):
    """A folder of traces that also holds ``agentscope export`` output: the traces are read, and each
    export (spans or task table) is named once with its reader, its Parquet not read as protobuf."""
    traces, source = tmp_path / "traces", tmp_path / "source.duckdb"
    traces.mkdir()
    (traces / "ok.jsonl").write_bytes(LINES[: LINES.index(b"\n") + 1])
    assert ingest(traces / "ok.jsonl", store=source).returncode == 0
    for kind, flags in (("spans", []), ("tasks", ["--tasks"])):
        exported = cli("export", "--store", str(source), "--out", str(traces / kind), *flags)
        assert exported.returncode == 0, exported.stderr
    store = tmp_path / "s.duckdb"
    result = ingest(traces, store=store)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    flat = " ".join(result.stderr.split())
    assert "2 problem(s)" in flat and "protobuf" not in flat
    assert f"{traces / 'spans'}: spans agentscope exported as Parquet: analyse them with" in flat
    assert f"`agentscope blame --tasks {traces / 'tasks'}`" in flat
    assert spans_in(store) == 3
    alone = ingest(traces / "tasks" / "tasks.parquet", store=store)
    assert "cannot read: a Parquet file: agentscope reads Parquet only as a folder it exported" in " ".join(
        alone.stderr.split()
    )
