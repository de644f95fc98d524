"""The two readers of OTLP JSON lines side by side: DuckDB's (``ingest.otlp_duckdb``) and Python's."""

from __future__ import annotations

import json

from agentscope.ingest import otlp_duckdb
from agentscope.ingest.otlp import read_json_lines
from agentscope.store.rows import without_content
from agentscope.store.schema import COLUMN_NAMES


def rows_by_key(rows: list[tuple], decoded: bool = True) -> dict:
    """Rows by (trace, span); with ``decoded`` the attributes as what their JSON decodes to."""
    out = {}
    for row in rows:
        named = dict(zip(COLUMN_NAMES, row))
        if decoded:
            named["attributes"] = json.loads(named["attributes"])
        out[(named["trace_id"], named["span_id"])] = named
    return out


def both_readers(
    lines: list[str], decoded: bool = True, keep_content: bool = False
) -> tuple[dict, dict, list[int]]:
    """The DuckDB reader's rows and the Python reader's (content dropped as the loader drops it)."""
    block = [(line + "\n").encode() for line in lines]
    con = otlp_duckdb.connect_parser()
    try:
        (parsed,) = otlp_duckdb.parse_blocks(con, [(1, block)], keep_content)
    finally:
        con.close()
    fast = rows_by_key([tuple(r.values()) for r in parsed.table.to_pylist()], decoded)
    taken = [r.row for r in read_json_lines(iter(block)) if r.row is not None]
    python = rows_by_key(taken if keep_content else [without_content(row) for row in taken], decoded)
    return fast, python, parsed.routed
