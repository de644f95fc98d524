"""The task table: blame from kept rows against a full recompute, on a store of attribute-rich spans.

    python benchmarks/incremental.py [--traces 50000] [--new-traces 500] [--repeat 3]

A store of ``--traces`` rich agent tasks of 20 spans (``shapes.py``, loaded with
``agentscope ingest``) is asked the same question, ``agentscope blame --store
--format json``, each time in a fresh process from start to the JSON printed:

- **full recompute**: a snapshot of the store with every span analysed, which is
  what every question cost before the task table (the baseline);
- **first read**: the task table empty, every trace analysed and its rows kept;
- **unchanged**: the store as the first read left it;
- **after new spans**: ``--new-traces`` more tasks (20 spans each) ingested, then
  one read, which analyses only them.

Each case runs ``--repeat`` times in turn with the others where it can (the first
read needs a store without rows: a copy is made for each run); medians.  Every
answer is checked against the full recompute of the same spans.  Then the size of
the task table (its rows as Parquet) beside the store's.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import duckdb
from blame_throughput import build_rich_store, console_script
from shapes import write_file

from agentscope.ingest import ingest
from agentscope.store.shared import SharedStore

FULL = """
import json, sys
from agentscope.analysis.pipeline import blame_store
from agentscope.store.shared import SharedStore
with SharedStore(sys.argv[1]).reading() as snapshot:
    print(json.dumps(blame_store(snapshot)))
"""


def timed(command: list[str]) -> tuple[float, dict]:
    """Seconds from process start to exit, and the JSON it printed."""
    import time

    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return time.perf_counter() - started, json.loads(done.stdout)


def blame(path: Path) -> tuple[float, dict]:
    return timed([console_script(sys.executable), "blame", "--store", str(path), "--format", "json"])


def full(path: Path) -> tuple[float, dict]:
    return timed([sys.executable, "-c", textwrap.dedent(FULL), str(path)])


def add_traces(path: Path, after: int, count: int) -> int:
    """``count`` more rich tasks (traces numbered from ``after + 1``) ingested through the shared store,
    as ``agentscope ingest`` writes them."""
    source = path.with_name("new.jsonl")
    written = write_file(source, "rich", count * 20, after_trace=after)
    ingest(SharedStore(path), [source])
    source.unlink()
    return written


def table_mb(path: Path) -> tuple[float, float]:
    """MB of the task table's three tables written as Parquet (how large their rows are, compressed as
    DuckDB compresses columns), and MB of the store file."""
    con = duckdb.connect(str(path), read_only=True)
    size = 0
    try:
        for table in ("tasks", "task_traces", "trace_writes"):
            out = path.with_name(f"{table}.parquet")
            con.execute(f"COPY {table} TO '{out}' (FORMAT parquet)")
            size += out.stat().st_size
            out.unlink()
    finally:
        con.close()
    return size / 1e6, path.stat().st_size / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=50_000)
    parser.add_argument("--new-traces", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base.duckdb"
        spans = build_rich_store(base, args.traces)
        print(f"a store of {spans:,} rich spans ({args.traces:,} tasks)", flush=True)
        times: dict[str, list[float]] = {"full": [], "first": [], "unchanged": [], "after": []}
        new_spans = 0
        for r in range(args.repeat):
            path = Path(tmp) / f"run-{r}.duckdb"
            shutil.copyfile(base, path)
            seconds, expected = full(path)
            times["full"].append(seconds)
            seconds, answer = blame(path)
            times["first"].append(seconds)
            assert answer == expected, "first read differs from the full recompute"
            seconds, answer = blame(path)
            times["unchanged"].append(seconds)
            assert answer == expected, "unchanged read differs from the full recompute"
            new_spans = add_traces(path, args.traces + r * args.new_traces, args.new_traces)
            seconds, answer = blame(path)
            times["after"].append(seconds)
            assert answer == full(path)[1], "read after new spans differs from the full recompute"
            rows_mb, file_mb = table_mb(path)
            if r < args.repeat - 1:
                path.unlink()
        print(f"\n`agentscope blame --store --format json`, process start to JSON, medians of {args.repeat}")
        print("| case | seconds | spans analysed | spans/s analysed | × full recompute |")
        print("|---|---:|---:|---:|---:|")
        whole = statistics.median(times["full"])
        for name, label, analysed in (
            ("full", "full recompute (snapshot, every span: the baseline)", spans),
            ("first", "first read (every trace analysed, rows kept)", spans),
            ("unchanged", "unchanged store", 0),
            ("after", f"after {new_spans:,} new spans", new_spans),
        ):
            seconds = statistics.median(times[name])
            rate = f"{analysed / seconds:,.0f}" if analysed else "—"
            print(f"| {label} | {seconds:.2f} | {analysed:,} | {rate} | {seconds / whole:.3f} |")
        print(f"\ntask table {rows_mb:.1f} MB of a {file_mb:.0f} MB store ({rows_mb / file_mb:.1%})")


if __name__ == "__main__":
    main()
