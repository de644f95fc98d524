"""Where the ingest's parse query spends its time: the whole query against itself with one part taken out.

    python benchmarks/parse_query_parts.py [--shape rich] [--spans 20000] [--spans-per-line N] [--repeat 7]

Writes ``--spans`` spans of a ``shapes.py`` shape as OTLP JSON lines, hands them to
the parse query of ``agentscope.ingest.otlp_duckdb`` as one block (the way an
ingest does), and times the query on one DuckDB thread, so that a part's cost is
CPU, not how well it spreads over cores.  Then the same query with one part
replaced by a constant or a simpler expression: what the whole loses is that
part's cost (the rows it gives are wrong; only the time counts).  Medians of
``--repeat`` runs, each variant in turn with the others.

The parts are found in the query's text through the helpers that write them, so a change to the
query that moves or rewrites a part stops this script with the part's name, rather than timing a
variant that no longer differs from the whole.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from shapes import SHAPES, write_file

from agentscope.classify import LANGFUSE_FIRST_TOKEN, LANGFUSE_USAGE, aliases_sql, kind_sql
from agentscope.ingest import otlp_duckdb as od


def variants(query: str) -> dict[str, str]:
    """The query, and the query less each part (each a textual replacement that must match once)."""
    entries = od._entries_sql("s.attributes")
    simple_entries = (
        "list_transform(coalesce(s.attributes, []), "
        "lambda a: {k: a.key ->> '$', v: to_json(a.value.stringValue), s: a.value.stringValue})"
    )
    kept_from = query.index("    CASE WHEN list_has_any(keys, [")
    kept_to = query.index(" AS kept", kept_from)
    parts = {
        "the stored attributes JSON": (
            f"CASE WHEN entries_ok THEN {od._json_object_sql('kept', 'aliases', od._PEER_ENTRIES)} END",
            "NULL",
        ),
        "the kind": (kind_sql(od._value_of_sql("{key}"), "all_keys", "span_kind", "name"), "NULL"),
        "the attributes' checks and value kinds": (entries, simple_entries),
        "the content and secrets filter": (query[kept_from:kept_to], "entries"),
        "the aliases": (aliases_sql("kept", "keys"), "[]::STRUCT(p INTEGER, t INTEGER, k VARCHAR, v JSON)[]"),
        "the repeated-key check": ("len(list_distinct(keys)) = len(keys)", "true"),
        "the first-token events (less their parse)": (
            od._MARKS,
            "NULL::STRUCT(name VARCHAR, timeUnixNano VARCHAR)[]",
        ),
        "Langfuse's fields": (
            f"list_has_any(keys, ['{LANGFUSE_USAGE}', '{LANGFUSE_FIRST_TOKEN}'])",
            "false",
        ),
        "the resource's attributes": (
            od._resource_sql("rs.resource.attributes"),
            "true AS resource_ok, 'x' AS service",
        ),
    }
    out = {"whole query": query}
    for name, (part, replacement) in parts.items():
        assert query.count(part) == 1, name
        out[f"less {name}"] = query.replace(part, replacement)
    parsed = f"SELECT line, from_json(text, '{od.STRUCTURE}') AS r FROM lines"
    out["from_json and the unnests alone"] = (
        "SELECT unnest(ss.spans) AS s FROM (SELECT unnest(rs.scopeSpans) AS ss FROM "
        f"(SELECT unnest(r.resourceSpans) AS rs FROM ({parsed})))"
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=SHAPES, default="rich")
    parser.add_argument("--spans", type=int, default=20_000)
    parser.add_argument("--spans-per-line", type=int, default=None, help="default: the shape's")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "spans.jsonl"
        spans = write_file(path, args.shape, args.spans, args.spans_per_line)
        block = path.read_bytes().splitlines(keepends=True)
    _, lines = od._prepared(1, block)
    con = od.connect_parser()
    con.register("lines", lines)
    con.execute("SET threads = 1")
    sqls = variants(od.query(keep_content=False))
    times: dict[str, list[float]] = {name: [] for name in sqls}
    for _ in range(args.repeat):
        for name, sql in sqls.items():
            t0 = time.perf_counter()
            con.execute(f"CREATE OR REPLACE TEMP TABLE parsed AS {sql}")
            times[name].append(time.perf_counter() - t0)
    whole = statistics.median(times["whole query"])
    lines_read = f"{spans:,} {args.shape} spans on {len(block):,} lines"
    print(f"{lines_read}, one DuckDB thread, medians of {args.repeat}\n")
    print("| query | ms | µs a span | the part's share of the whole |")
    print("|---|---:|---:|---:|")
    for name, runs in times.items():
        ms = statistics.median(runs) * 1000
        share = "" if name == "whole query" else f"{1 - statistics.median(runs) / whole:.0%}"
        if name.startswith("from_json"):
            share = f"{statistics.median(runs) / whole:.0%}"
        print(f"| {name} | {ms:.1f} | {ms * 1000 / spans:.2f} | {share} |")


if __name__ == "__main__":
    main()
