"""The task table: blame from kept rows against a full recompute, on a store of attribute-rich spans.

    python benchmarks/incremental.py [--traces 50000] [--new-traces 500] [--repeat 3] [--work DIR]

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
the task table (as DuckDB keeps it, and as Parquet) beside the store's, and ``agentscope ui``'s
overview refreshed again and again for ``--ui-seconds`` while 1,000 spans a
second are ingested into the store.
"""

from __future__ import annotations

import argparse
import json
import os
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
from agentscope.store.store import Store

FULL = """
import json, sys
from agentscope.analysis.pipeline import blame_store
from agentscope.store.shared import SharedStore
from agentscope.store.store import Store
with SharedStore(sys.argv[1]).reading() as snapshot:
    print(json.dumps(blame_store(snapshot)))
"""


def timed(command: list[str]) -> tuple[float, dict]:
    """Seconds from process start to exit, and the JSON it printed.

    The process may write its bytecode, as an installed package's is written at install: where the
    environment sets PYTHONDONTWRITEBYTECODE, an editable install would compile every module of
    agentscope at every start (0.1 s)."""
    import time

    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
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


def ui_refreshes(path: Path, after: int, seconds: float) -> tuple[list[float], bool, int]:
    """``agentscope ui`` on the store while 50 tasks (1,000 spans) a second are ingested into it: the
    seconds of each overview refresh (blame, the what-if curve and the overview, asked in turn), whether
    every refresh counted at least the tasks written before it began, and the spans written."""
    import threading
    import time
    import urllib.request

    from agentscope.sim.server import free_port

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    ui = subprocess.Popen(
        [console_script(sys.executable), "ui", "--store", str(path), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def get(route: str) -> dict:
        with urllib.request.urlopen(base + route, timeout=120) as response:
            return json.loads(response.read())

    deadline = time.monotonic() + 60
    while True:
        try:
            before = get("/api/blame")["tasks"]["count"]
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    written, stop = [0], threading.Event()

    def writer() -> None:
        while not stop.is_set():
            started = time.monotonic()
            add_traces(path, after + written[0], 25)
            written[0] += 25
            stop.wait(max(0.0, 0.5 - (time.monotonic() - started)))

    thread = threading.Thread(target=writer)
    thread.start()
    times, current = [], True
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            flushed = written[0]
            started = time.perf_counter()
            count = get("/api/blame")["tasks"]["count"]
            get("/api/curve")
            get("/api/overview")
            times.append(time.perf_counter() - started)
            current = current and count >= before + flushed
    finally:
        stop.set()
        thread.join()
        ui.terminate()
        ui.wait(timeout=30)
    return times, current, written[0] * 20


def table_mb(path: Path) -> tuple[float, float, float]:
    """MB of the task table's three tables as DuckDB keeps them (copied alone into a file of their own),
    MB of the same tables written as Parquet (which earlier runs quoted), and MB of the store file.

    Parquet is no measure of the store's share: its dictionaries fold the benchmark's few distinct
    durations, and so its what-ifs, to almost nothing, where DuckDB stores each double."""
    alone = path.with_name("task-tables.duckdb")
    con = duckdb.connect(str(alone))
    parquet = 0
    try:
        con.execute(f"ATTACH '{path}' AS store (READ_ONLY)")
        for table in ("tasks", "task_traces", "trace_writes"):
            con.execute(f"CREATE TABLE {table} AS SELECT * FROM store.{table}")
            out = path.with_name(f"{table}.parquet")
            con.execute(f"COPY {table} TO '{out}' (FORMAT parquet)")
            parquet += out.stat().st_size
            out.unlink()
        con.execute("DETACH store")
        con.execute("CHECKPOINT")
    finally:
        con.close()
    size = alone.stat().st_size
    alone.unlink()
    return size / 1e6, parquet / 1e6, path.stat().st_size / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=50_000)
    parser.add_argument("--new-traces", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--ui-seconds", type=float, default=20, help="how long the UI is refreshed while written"
    )
    parser.add_argument(
        "--work", type=Path, help="keep the store built here and use it again (10M spans take minutes)"
    )
    args = parser.parse_args()
    if args.work is not None:
        args.work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        base = Path(tmp) / "base.duckdb"
        kept = args.work / f"rich-{args.traces}.duckdb" if args.work else None
        if kept is not None and kept.exists():
            shutil.copyfile(kept, base)
            with Store(base, read_only=True) as store:
                spans = store.span_count()
        else:
            spans = build_rich_store(base, args.traces)
            if kept is not None:
                shutil.copyfile(base, kept)
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
            rows_mb, parquet_mb, file_mb = table_mb(path)
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
        print(
            f"\ntask table {rows_mb:.1f} MB of a {file_mb:.0f} MB store ({rows_mb / file_mb:.1%}); "
            f"as Parquet {parquet_mb:.1f} MB ({parquet_mb / file_mb:.1%})"
        )
        if args.ui_seconds > 0:
            after = args.traces + args.repeat * args.new_traces
            times, current, written = ui_refreshes(path, after, args.ui_seconds)
            print(
                f"\nUI overview refresh while 1,000 spans/s are written ({written:,} spans in "
                f"{args.ui_seconds:g} s): {len(times)} refreshes, median {statistics.median(times):.2f} s, "
                f"max {max(times):.2f} s; every refresh current: {current}"
            )


if __name__ == "__main__":
    main()
