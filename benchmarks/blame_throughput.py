"""Blame throughput: a store of agent-shaped traces, analysed end to end with the default scenarios.

    python benchmarks/blame_throughput.py [--traces 50000] [--shapes rich minimal]
        [--baseline-python /path/to/venv/bin/python --repeat 5]

Each trace is one task of 20 spans.  ``rich`` (the default) is ``shapes.py``'s
attribute-rich agent trace (LLM calls with model, provider, tokens and finish
reasons, tools with call ids, DB and HTTP spans with their conventions' keys; a
failed HTTP attempt, two tools in parallel), written as OTLP JSON and loaded with
``agentscope ingest``.  ``minimal`` is generated with DuckDB SQL: LLM calls with
server timings, tools, DB and HTTP calls, a failed attempt and its backoff, few
and short attributes.  For each, a fresh process runs ``agentscope blame --store
--format json`` from start to the JSON printed (the whole-process figure), and
another the same loop with timers around the SQL fetch, the analysis and the
aggregation; peak RSS is of the process tree.  The whole-process figure runs the
``agentscope`` console script installed beside the interpreter, as a user does.

With ``--baseline-python`` (the interpreter of another checkout's install, e.g.
``git worktree add /tmp/before REV && python -m venv /tmp/venv-before &&
/tmp/venv-before/bin/pip install -e /tmp/before``), the whole-process figure is
taken ``--repeat`` times for each, alternating on the same store, and a table
gives the medians, their ratio and whether the two printed the same JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import proctree
from shapes import write_file

from agentscope.ingest import ingest
from agentscope.store import Store
from agentscope.store.schema import COLUMN_NAMES

BLAME_SHAPES = ("rich", "minimal")
"""The shapes this benchmark builds stores of (``shapes.py``'s ``peers`` differs from ``rich`` only in what
the ingest reads)."""
CHILDREN = (
    # (kind, name, start ms, end ms, status, attributes JSON)
    (
        "db",
        "SELECT postgresql",
        1,
        6,
        "UNSET",
        '{"db.system.name":"postgresql","db.operation.name":"SELECT"}',
    ),
    (
        "llm",
        "chat gpt-oss-120b",
        6,
        40,
        "UNSET",
        '{"gen_ai.operation.name":"chat","gen_ai.request.model":"gpt-oss-120b","agentscope.llm.server.queue_ms":2,'
        '"agentscope.llm.server.prefill_ms":8,"agentscope.llm.server.decode_ms":20,"gen_ai.usage.input_tokens":900,'
        '"gen_ai.usage.output_tokens":120}',
    ),
    (
        "tool",
        "execute_tool search_kb",
        40,
        55,
        "UNSET",
        '{"gen_ai.operation.name":"execute_tool","gen_ai.tool.name":"search_kb"}',
    ),
    (
        "tool",
        "execute_tool search_web",
        41,
        60,
        "UNSET",
        '{"gen_ai.operation.name":"execute_tool","gen_ai.tool.name":"search_web"}',
    ),
    ("http", "GET", 60, 70, "ERROR", '{"http.request.method":"GET","server.address":"billing.internal"}'),
    ("backoff", "backoff", 70, 80, "UNSET", '{"agentscope.backoff.planned_s":0.01}'),
    ("http", "GET", 80, 95, "UNSET", '{"http.request.method":"GET","server.address":"billing.internal"}'),
    (
        "llm",
        "chat gpt-oss-120b",
        95,
        150,
        "UNSET",
        '{"gen_ai.operation.name":"chat","gen_ai.request.model":"gpt-oss-120b","gen_ai.response.time_to_first_chunk":0.012}',
    ),
    ("queue", "queue rate_limiter", 150, 153, "UNSET", '{"agentscope.queue.name":"rate_limiter"}'),
    (
        "tool",
        "execute_tool read_file",
        153,
        158,
        "UNSET",
        '{"gen_ai.operation.name":"execute_tool","gen_ai.tool.name":"read_file"}',
    ),
    (
        "llm",
        "chat gpt-oss-120b",
        158,
        190,
        "UNSET",
        '{"gen_ai.operation.name":"chat","gen_ai.request.model":"gpt-oss-120b","agentscope.llm.server.total_ms":25}',
    ),
    (
        "db",
        "INSERT postgresql",
        190,
        194,
        "UNSET",
        '{"db.system.name":"postgresql","db.operation.name":"INSERT"}',
    ),
    ("step", "plan", 194, 200, "UNSET", '{"agentscope.step.name":"plan"}'),
    (
        "tool",
        "execute_tool run",
        200,
        230,
        "UNSET",
        '{"gen_ai.operation.name":"execute_tool","gen_ai.tool.name":"run"}',
    ),
    (
        "llm",
        "chat gpt-oss-120b",
        230,
        260,
        "UNSET",
        '{"gen_ai.operation.name":"chat","gen_ai.request.model":"gpt-oss-120b","agentscope.llm.server.prefill_ms":5,'
        '"agentscope.llm.server.decode_ms":22}',
    ),
    ("db", "GET redis", 260, 261, "UNSET", '{"db.system.name":"redis","db.operation.name":"GET"}'),
    (
        "tool",
        "execute_tool search_kb",
        261,
        280,
        "UNSET",
        '{"gen_ai.operation.name":"execute_tool","gen_ai.tool.name":"search_kb"}',
    ),
    (
        "llm",
        "chat gpt-oss-120b",
        280,
        320,
        "UNSET",
        '{"gen_ai.operation.name":"chat","gen_ai.request.model":"gpt-oss-120b","agentscope.llm.server.prefill_ms":6,'
        '"agentscope.llm.server.decode_ms":30}',
    ),
    ("step", "finish", 320, 325, "UNSET", '{"agentscope.step.name":"finish"}'),
)


def build_rich_store(path: Path, traces: int) -> int:
    """``traces`` rich tasks (OTLP JSON lines) loaded with ``agentscope.ingest``; returns the span count."""
    source = path.with_suffix(".jsonl")
    write_file(source, "rich", traces * 20)
    with Store(path) as store:
        ingest(store, [source])
        count = store.span_count()
    source.unlink()
    return count


def build_store(path: Path, traces: int) -> int:
    """Write ``traces`` tasks of 20 spans into a new store; returns the span count."""
    values = ", ".join(
        f"({j + 1}, '{kind}', '{name}', {start}, {end}, '{status}', '{attrs}')"
        for j, (kind, name, start, end, status, attrs) in enumerate(CHILDREN)
    )
    with Store(path) as store:
        rows = store.con.sql(
            f"""
            WITH children(j, kind, name, s, e, status, attrs) AS (VALUES {values}),
            tasks AS (SELECT i, printf('%032x', i) AS trace_id, i * 1000000000 AS base,
                             (i % 97) * 500000 AS jitter FROM range({traces}) t(i))
            SELECT trace_id, printf('%016x', i * 32), NULL, 'resolve_ticket', 'task', 'INTERNAL',
                   base, base + 330000000 + jitter * 4, 'UNSET', NULL, 'bench', 'agentscope', 1, 2000000,
                   '{{"agentscope.task.name":"resolve_ticket","agentscope.task.accepted":true}}'
            FROM tasks
            UNION ALL
            SELECT trace_id, printf('%016x', i * 32 + j), printf('%016x', i * 32), name, kind, 'INTERNAL',
                   base + s * 1000000 + (CASE WHEN j > 4 THEN jitter * 4 ELSE 0 END),
                   base + e * 1000000 + (CASE WHEN j > 3 THEN jitter * 4 ELSE 0 END),
                   status, NULL, 'bench', 'agentscope', 1, 100000, attrs
            FROM tasks, children
            """
        ).to_arrow_table()
        store.insert(rows.rename_columns(COLUMN_NAMES))  # the store adds the typed columns
        return store.span_count()


MEASURE = """
import json, os, resource, sys, threading, time
import proctree
from agentscope.analysis import report
from agentscope.analysis.pipeline import task_results
from agentscope.store import Store
from agentscope.store.query import span_batches

store = Store(sys.argv[1], read_only=True)
workers = int(sys.argv[2])
tree_peak, done = [0], threading.Event()

def sample():  # the workers are forked by a server, so RUSAGE_CHILDREN does not see them
    while not done.wait(0.1):
        tree_peak[0] = max(tree_peak[0], proctree.tree_rss(os.getpid()))

threading.Thread(target=sample, daemon=True).start()
variants = report.variants(report.DEFAULT_SCENARIOS)
start = time.perf_counter()
sql = 0.0
if workers == 1:
    for batch in span_batches(store):
        sql += time.perf_counter() - start
        break
t0 = time.perf_counter()
results = task_results(store, variants, workers=workers)
analysis = time.perf_counter() - t0
t0 = time.perf_counter()
blame = report.blame(results, report.DEFAULT_SCENARIOS)
aggregate = time.perf_counter() - t0
total = time.perf_counter() - start - sql
done.set()
print(json.dumps({"analysis": analysis, "aggregate": aggregate, "total": total,
                  "tasks": len(results),
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6,
                  "tree_rss_mb": tree_peak[0] / 1e6,
                  "p95": blame["latency_ms"]["p95"], "verdict": blame["verdict"]}))
"""

SQL_ONLY = """
import sys, time
from agentscope.store import Store
from agentscope.store.query import span_batches
store = Store(sys.argv[1], read_only=True)
t0 = time.perf_counter()
rows = sum(batch.num_rows for batch in span_batches(store))
print(time.perf_counter() - t0)
"""


def console_script(python: str) -> str:
    """The ``agentscope`` command installed beside ``python``: what a user runs (its worker processes
    import the script, where ``python -m agentscope.cli``'s do not)."""
    return str(Path(python).with_name("agentscope"))


def run(code: str, *args: str) -> str:
    """``code`` run in a fresh interpreter, from this folder (it imports ``proctree``)."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parent,
    ).stdout


def alternate(baseline_python: str, store: Path, repeat: int) -> tuple[float, float, bool]:
    """Median whole-process seconds of the baseline's blame and this one's, run in turn on ``store``;
    and whether every run printed the same JSON."""
    times: dict[str, list[float]] = {baseline_python: [], sys.executable: []}
    outputs = set()
    for _ in range(repeat):
        for python in times:
            out, whole, _ = proctree.measure(
                [console_script(python), "blame", "--store", str(store), "--format", "json"]
            )
            times[python].append(whole)
            outputs.add(out)
    before, after = (statistics.median(times[python]) for python in (baseline_python, sys.executable))
    return before, after, len(outputs) == 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=50_000)
    parser.add_argument("--shapes", nargs="+", choices=BLAME_SHAPES, default=list(BLAME_SHAPES))
    parser.add_argument("--baseline-python", help="an interpreter with the baseline installed")
    parser.add_argument("--repeat", type=int, default=5, help="whole-process runs each, with a baseline")
    args = parser.parse_args()
    rows = []
    against = []
    for shape in args.shapes:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "bench.duckdb"
            t0 = time.perf_counter()
            spans = (build_rich_store if shape == "rich" else build_store)(path, args.traces)
            built = time.perf_counter() - t0
            print(f"{shape}: a store of {spans:,} spans ({args.traces:,} tasks) in {built:.1f} s", flush=True)
            cli = [console_script(sys.executable), "blame", "--store", str(path), "--format", "json"]
            out, whole, tree_mb = proctree.measure(cli)
            sql = float(run(SQL_ONLY, str(path)))
            measured = {w: json.loads(run(MEASURE, str(path), str(w))) for w in (1, os.cpu_count() or 1)}
            rows.append((shape, spans, whole, tree_mb, json.loads(out)["verdict"], sql, measured))
            if args.baseline_python:
                against.append((shape, spans, *alternate(args.baseline_python, path, args.repeat)))
    print("\n`agentscope blame --store --format json`, process start to JSON printed (default scenarios)")
    print("| shape | spans | seconds | spans/s | peak RSS, process tree (MB) |")
    print("|---|---:|---:|---:|---:|")
    for shape, spans, whole, tree_mb, _, _, _ in rows:
        print(f"| {shape} | {spans:,} | {whole:.2f} | {spans / whole:,.0f} | {tree_mb:,.0f} |")
    print("\nthe same loop with timers, by workers")
    print(
        "| shape | workers | SQL fetch alone (s) | fetch + analysis (s) | aggregate (s) | total (s) "
        "| spans/s | peak RSS parent / process tree (MB) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for shape, spans, _, _, _, sql, measured in rows:
        for workers, m in measured.items():
            print(
                f"| {shape} | {workers} | {sql:.2f} | {m['analysis']:.2f} | {m['aggregate']:.2f} | "
                f"{m['total']:.2f} | {spans / m['total']:,.0f} | "
                f"{m['rss_mb']:.0f} / {m['tree_rss_mb']:.0f} |"
            )
    for shape, _, _, _, verdict, _, _ in rows:
        print(f"{shape}: {verdict}")
    if against:
        print(
            f"\nwhole process, {args.repeat} runs each alternating, medians: baseline {args.baseline_python}"
        )
        print(
            "| shape | spans | baseline (s) | this (s) | baseline spans/s | this spans/s "
            "| speedup | same JSON |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---|")
        for shape, spans, before, after, same in against:
            print(
                f"| {shape} | {spans:,} | {before:.2f} | {after:.2f} | {spans / before:,.0f} | "
                f"{spans / after:,.0f} | {before / after:.2f}× | {'yes' if same else 'NO'} |"
            )


if __name__ == "__main__":
    main()
