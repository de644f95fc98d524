"""A store of spans as agentscope's own SDK writes them, copied up to a size: a second shape for the walk.

    python benchmarks/sdk_store.py --out STORE [--spans 1000000]

``rich`` (``shapes.py``) is what other SDKs' OTLP exports look like.  The spans ``agentscope demo``
records through the SDK differ from them where the walk's work lies: every task, agent and step span
carries its thread and CPU time (a cpu/other split a span), steps hold tools and model calls side
by side, model calls carry server timings, and some calls fail and are retried after a backoff.
This runs the demo (its three agents against the simulated providers, 20 tasks each: about 1,200
spans, 20 s) into a scratch store, then copies its spans with new trace and span ids, each copy
later in time than the one before, until the store holds ``--spans``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import duckdb

from agentscope.store import Store
from agentscope.store.schema import COLUMN_NAMES

COPIES_A_STATEMENT = 50


def _copied(column: str, width_ns: int) -> str:
    """SQL for ``column`` of copy ``k`` of a span: ids hashed with ``k``, times shifted by ``k`` widths."""
    if column in ("trace_id", "span_id", "parent_id"):
        digits = 32 if column == "trace_id" else 16
        return f"substr(md5({column} || k::VARCHAR), 1, {digits})"  # null stays null
    if column in ("start_ns", "end_ns"):
        return f"{column} + k * {width_ns}::BIGINT"
    return column


def build_sdk_store(path: Path, spans: int) -> int:
    """The demo's spans copied into a new store at ``path`` until it holds about ``spans``; the count."""
    with tempfile.TemporaryDirectory() as scratch:
        demo = Path(scratch) / "demo.duckdb"
        command = [sys.executable, "-m", "agentscope.cli", "demo", "--tasks", "20", "--store", str(demo)]
        subprocess.run(command, check=True, capture_output=True)
        with duckdb.connect(str(demo), read_only=True) as source, Store(path) as store:
            extent = "SELECT count(*), min(start_ns), max(end_ns) FROM spans"
            ((count, first, last),) = source.execute(extent).fetchall()
            width = last - first + 1_000_000_000
            columns = ", ".join(f"{_copied(name, width)} AS {name}" for name in COLUMN_NAMES)
            copies = max(1, spans // count)
            for at in range(0, copies, COPIES_A_STATEMENT):
                upto = min(copies, at + COPIES_A_STATEMENT)
                sql = f"SELECT {columns} FROM spans, range({at}, {upto}) r(k) ORDER BY k, rowid"
                store.insert(source.sql(sql).to_arrow_table())
            return store.span_count()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the store to write (must not exist)")
    parser.add_argument("--spans", type=int, default=1_000_000)
    args = parser.parse_args()
    if args.out.exists():
        parser.error(f"{args.out} exists")
    print(f"{build_sdk_store(args.out, args.spans):,} spans in {args.out}")


if __name__ == "__main__":
    main()
