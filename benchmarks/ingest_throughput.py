"""Ingest throughput: agentscope ingest of OTLP JSON lines next to DuckDB's own read_json.

    python benchmarks/ingest_throughput.py [--sizes 200000 1000000] [--shapes rich minimal]
                                           [--spans-per-line N] [--baseline-python PATH] [--repeat N]

Generates OTLP JSON lines of agent traces in each shape of ``shapes.py`` — ``rich``
(the default: attributes as real SDKs write them, 200 spans a line) and
``minimal`` (few short attributes, 50 traces a line); ``--spans-per-line 1``
writes a request per span instead, as some exporters do — then in one run, each
in a fresh child process:

- agentscope: ``ingest()`` into a new store (parse, classify, normalise, insert), once into a store
  the process holds and once into a shared store as ``agentscope ingest`` does (each batch one
  short hold of the file: open, insert, close);
- DuckDB ``read_json`` with an explicit schema and ``records=true``, spans
  unnested into a flat table: the practical ceiling on this machine.

Prints spans/s and peak RSS for both, the ratio, and the store's size (the baseline's in brackets);
with ``--repeat N`` every reader runs N times, in turn, and each figure is its median run's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from shapes import SHAPES, write_file

AGENTSCOPE = """
import json, os, resource, sys, time
from pathlib import Path
from agentscope.ingest import ingest
from agentscope.store import Store
from agentscope.store.shared import SharedStore
t0 = time.perf_counter()
if sys.argv[3] == "shared":  # as `agentscope ingest` does: one short hold of the file a batch
    summary = ingest(SharedStore(sys.argv[2]), [Path(sys.argv[1])])
    with Store(sys.argv[2], read_only=True) as store:
        stored = store.span_count()
else:
    with Store(sys.argv[2]) as store:
        summary = ingest(store, [Path(sys.argv[1])])
        stored = store.span_count()
print(json.dumps({"seconds": time.perf_counter() - t0, "stored": stored, "ok": summary.ok,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "store_mb": os.path.getsize(sys.argv[2]) / 1e6}))
"""

DUCKDB = """
import json, resource, sys, time
import duckdb
value = ("STRUCT(stringValue VARCHAR, intValue VARCHAR, doubleValue DOUBLE, boolValue BOOLEAN, "
         "arrayValue STRUCT(values STRUCT(stringValue VARCHAR)[]))")
kv = f"STRUCT(key VARCHAR, value {value})[]"
span = ("STRUCT(traceId VARCHAR, spanId VARCHAR, parentSpanId VARCHAR, name VARCHAR, kind INTEGER, "
        f"startTimeUnixNano VARCHAR, endTimeUnixNano VARCHAR, attributes {kv})")
resource_spans = f"STRUCT(resource STRUCT(attributes {kv}), scopeSpans STRUCT(spans {span}[])[])[]"
columns = {"resourceSpans": resource_spans}
t0 = time.perf_counter()
con = duckdb.connect(sys.argv[2])
con.execute("SET enable_progress_bar = false")
con.execute(f'''
    CREATE TABLE flat AS
    SELECT s.traceId AS trace_id, s.spanId AS span_id, s.parentSpanId AS parent_id, s.name,
           s.kind, CAST(s.startTimeUnixNano AS BIGINT) AS start_ns,
           CAST(s.endTimeUnixNano AS BIGINT) AS end_ns, s.attributes
    FROM (SELECT unnest(ss.spans) AS s
          FROM (SELECT unnest(rs.scopeSpans) AS ss
                FROM (SELECT unnest(resourceSpans) AS rs
                      FROM read_json('{sys.argv[1]}', columns = {columns!r}, records = true,
                                     format = 'newline_delimited', maximum_object_size = 1000000000))))
''')
stored = con.execute("SELECT count(*) FROM flat").fetchall()[0][0]
con.close()
print(json.dumps({"seconds": time.perf_counter() - t0, "stored": stored, "ok": True,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run(code: str, *args: str, python: str = sys.executable) -> dict:
    out = subprocess.run(
        [python, "-c", textwrap.dedent(code), *args], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def median_run(runs: list[dict]) -> dict:
    """The run of median time among ``runs`` (their peak RSS and store size come with it)."""
    return sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[200_000, 1_000_000])
    parser.add_argument("--shapes", nargs="+", choices=SHAPES, default=list(SHAPES))
    parser.add_argument("--spans-per-line", type=int, default=None, help="default: the shape's")
    parser.add_argument(
        "--baseline-python",
        help="also ingest into a held store with another checkout's interpreter, in the same run",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run every reader this many times, in turn, and report each one's median",
    )
    args = parser.parse_args()
    before = " | baseline ingest spans/s | ratio" if args.baseline_python else ""
    print(
        "| shape | spans | file (MB) | DuckDB read_json spans/s | agentscope ingest spans/s | ratio | "
        f"shared store (the CLI) spans/s | ratio{before} | RSS read_json (MB) | RSS ingest (MB) "
        "| store (MB) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if before else "") + "---:|---:|---:|")
    for shape, size in ((shape, size) for shape in args.shapes for size in args.sizes):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "spans.jsonl"
            spans = write_file(path, shape, size, args.spans_per_line)
            mb = path.stat().st_size / 1e6
            readers = {
                "duck": (DUCKDB, "flat", (), sys.executable),
                "ours": (AGENTSCOPE, "store", ("held",), sys.executable),
                "shared": (AGENTSCOPE, "shared", ("shared",), sys.executable),
            }
            if args.baseline_python:
                readers["baseline"] = (AGENTSCOPE, "before", ("held",), args.baseline_python)
            runs: dict[str, list[dict]] = {name: [] for name in readers}
            for _ in range(args.repeat):  # in turn, so that a slow spell of the machine hits them all
                for name, (code, store, extra, python) in readers.items():
                    target = os.path.join(tmp, f"{store}.duckdb")
                    result = run(code, str(path), target, *extra, python=python)
                    assert result["stored"] == spans and result["ok"], (name, result)
                    runs[name].append(result)
                    for leftover in Path(tmp).glob(f"{store}.duckdb*"):  # the file, its lock files
                        leftover.unlink()
            duck, ours, shared = (median_run(runs[name]) for name in ("duck", "ours", "shared"))
            duck_rate, our_rate = spans / duck["seconds"], spans / ours["seconds"]
            shared_rate = spans / shared["seconds"]
            cells = [shape, f"{spans:,}", f"{mb:,.0f}", f"{duck_rate:,.0f}", f"{our_rate:,.0f}"]
            cells += [f"{our_rate / duck_rate:.2f}", f"{shared_rate:,.0f}", f"{shared_rate / duck_rate:.2f}"]
            if args.baseline_python:
                baseline = median_run(runs["baseline"])
                cells += [
                    f"{spans / baseline['seconds']:,.0f}",
                    f"{spans / baseline['seconds'] / duck_rate:.2f}",
                ]
            cells += [f"{duck['rss_mb']:.0f}", f"{ours['rss_mb']:.0f}", f"{ours['store_mb']:.0f}"]
            if args.baseline_python:
                cells[-1] += f" ({baseline['store_mb']:.0f})"
            print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
