"""The analyzer's columns as the store query reads them out of each span's attribute JSON."""

from __future__ import annotations

import itertools
import random
import subprocess
import sys

import pyarrow as pa
import pytest
from tracebuild import store_row

from agentscope.store import Store
from agentscope.store.query import trace_spans
from agentscope.store.schema import ATTRIBUTE_FIELDS, COLUMN_NAMES, rows_to_table

ODD_VALUES = [
    "2", 2, 2.5, -1, 0, 12345678901234567890, 1e-7, 1e3, 0.1, True, False, None, "", " 7 ", "x",
    "0.5", "true", "yes", [1, "2"], {"a": 1}, "é",
]  # fmt: skip
KINDS = ("llm", "tool", "db", "http", "task")


def _same_text(got: object, expected: object) -> bool:
    """Equal; or the same but for numbers in text written with an exponent (``1e-07`` where
    ``json_extract_string`` writes ``1e-7``: the one difference, documented in the query)."""
    if got == expected or not (isinstance(got, str) and isinstance(expected, str)):
        return got == expected
    words, others = got.split(" "), expected.split(" ")
    return len(words) == len(others) and all(map(_same_word, words, others))


def _same_word(word: str, other: str) -> bool:
    try:
        return word == other or float(word) == float(other)
    except ValueError:
        return False


LABEL_KEYS = {
    "tool_name": "gen_ai.tool.name",
    "request_model": "gen_ai.request.model",
    "response_model": "gen_ai.response.model",
    "db_system": "db.system.name",
    "db_system_old": "db.system",
    "db_operation": "db.operation.name",
    "server_address": "server.address",
    "peer_name": "net.peer.name",
}
"""The keys a label is made of, by the name ``_label`` gives them."""
EXTRACTED = [*ATTRIBUTE_FIELDS, *((name, key, "VARCHAR") for name, key in LABEL_KEYS.items())]


def _label(kind: str, name: str, text: dict[str, str | None]) -> str | None:
    """The label the analyzer's columns give, from each key's text (the query's CASE, restated)."""
    system = text["db_system"] if text["db_system"] is not None else text["db_system_old"]
    operation = text["db_operation"]
    by_kind = {
        "tool": [text["tool_name"]],
        "llm": [text["response_model"], text["request_model"]],
        "db": [f"{system} {operation}" if system is not None and operation is not None else None, system],
        "http": [text["server_address"], text["peer_name"]],
    }
    return next((v for v in by_kind.get(kind, []) if v is not None), name)


def test_every_extracted_key_reads_as_its_text_cast_to_its_type(tmp_path):
    """Each analysis key, given values of every JSON kind (numbers as text, text as numbers, arrays,
    objects, null), reads as ``TRY_CAST(json_extract_string(...))`` would: the text of the value,
    cast, or null where the cast fails; the label is made of the same texts; of a repeated key, the
    first counts."""
    values = itertools.cycle(ODD_VALUES)
    rows = []
    for k in range(len(ODD_VALUES) * len(KINDS)):
        attributes = {key: next(values) for _, key, _ in EXTRACTED}
        rows.append(store_row("t1", f"s{k:03d}", None, KINDS[k % len(KINDS)], k, k + 1, **attributes))
    twice = '{"agentscope.attempt": 3, "agentscope.attempt": 4, "gen_ai.request.model": "first"}'
    rows.append((*store_row("t1", "twice", None, "llm", 0, 1)[:-1], twice))  # a key written twice
    with Store(tmp_path / "odd.duckdb") as store:
        store.insert(rows_to_table(rows))
        table = trace_spans(store, "t1").sort_by("span_id")
        ordered = "FROM spans ORDER BY span_id"
        texts = {}
        for name, key, sql_type in EXTRACTED:
            path = [f'$."{key}"']
            (texts[name],) = zip(
                *store.con.execute(f"SELECT json_extract_string(attributes, ?) {ordered}", path).fetchall()
            )
            expected = store.con.execute(
                f"SELECT TRY_CAST(json_extract_string(attributes, ?) AS {sql_type}) {ordered}", path
            )
            if name in table.column_names:
                got = table.column(name).to_pylist()
                assert list(map(_same_text, got, [v for (v,) in expected.fetchall()])) == [True] * len(got), (
                    name
                )
    kinds, names = table.column("kind").to_pylist(), table.column("name").to_pylist()
    labels = [
        _label(kind, name, {key: column[row] for key, column in texts.items()})
        for row, (kind, name) in enumerate(zip(kinds, names, strict=True))
    ]
    assert list(map(_same_text, table.column("label").to_pylist(), labels)) == [True] * len(labels)
    twice = table.column("span_id").to_pylist().index("twice")
    assert table.column("attempt")[twice].as_py() == 3 and labels[twice] == "first"


@pytest.mark.parametrize("order", ["in time order", "shuffled"])
def test_batches_hold_every_span_once_and_whole_traces(tmp_path, monkeypatch, order):
    """Read several buckets to a query, sorted and split, every span comes out once, in its bucket's
    batch, in the order it was stored, and no trace is split between batches; also from a store whose
    spans were written in no order of time, where each query's range of starts covers most of it."""
    from tracebuild import varied_store

    from agentscope.store import query

    path = varied_store(tmp_path / "varied.duckdb", 60)
    if order == "shuffled":
        with Store(path) as source:
            rows = source.con.execute(f"SELECT {', '.join(COLUMN_NAMES)} FROM spans").fetchall()
        random.Random(7).shuffle(rows)
        path = tmp_path / "shuffled.duckdb"
        with Store(path) as store:
            for first in range(0, len(rows), 37):
                store.insert(rows_to_table(rows[first : first + 37]))
    monkeypatch.setattr(query, "SPANS_PER_BUCKET", 50)
    monkeypatch.setattr(query, "SPANS_PER_QUERY", 150)
    with Store(path) as store:
        assert query.buckets_for(store) > query.SPANS_PER_QUERY // query.SPANS_PER_BUCKET
        batches = list(query.span_batches(store))
        every = store.con.execute("SELECT trace_id, span_id FROM spans ORDER BY rowid").fetchall()

    def keys(batch):
        return list(
            zip(batch.column("trace_id").to_pylist(), batch.column("span_id").to_pylist(), strict=True)
        )

    assert sorted(key for batch in batches for key in keys(batch)) == sorted(every)
    stored_at = {key: row for row, key in enumerate(every)}
    owners = {}
    for k, batch in enumerate(batches):
        assert "bucket" not in batch.column_names
        rows = [stored_at[key] for key in keys(batch)]
        assert rows == sorted(rows)
        for trace_id in set(batch.column("trace_id").to_pylist()):
            assert owners.setdefault(trace_id, k) == k


def test_a_selection_that_keeps_no_trace_reads_no_batch(tmp_path, monkeypatch):
    """Past one batch's spans, a read is planned from the selected traces; a selection that keeps none
    plans no query, and a blame on demand (``--no-repair``) finds no task, without an error."""
    from tracebuild import varied_store

    from agentscope.analysis.pipeline import blame_store
    from agentscope.store import query
    from agentscope.store.selection import Selection

    path = varied_store(tmp_path / "varied.duckdb", 20)
    monkeypatch.setattr(query, "SPANS_PER_BUCKET", 5)
    with Store(path) as store:
        assert query.buckets_for(store) > 1
        assert list(query.span_batches(store, Selection(task="no such task"))) == []
        assert blame_store(store, task_name="no such task", repair=False, workers=1) is None
        assert blame_store(store, repair=False, workers=1)["tasks"]["count"] == 20


def test_the_first_queries_are_small_so_the_workers_start_soon(monkeypatch):
    """A query hands back its rows only once it has sorted them all: the first holds one bucket, each
    next one twice as many, up to a query's worth, and every trace is in one group, in the order begun."""
    from agentscope.store import query

    monkeypatch.setattr(query, "SPANS_PER_BUCKET", 10)
    monkeypatch.setattr(query, "SPANS_PER_QUERY", 40)
    traces = pa.table(
        {
            "trace_id": [f"{n:032x}" for n in range(100)],
            "spans": [5] * 100,
            "first_ns": list(range(100)),
            "last_ns": [n + 1 for n in range(100)],
        }
    )
    groups = list(query._query_groups(traces))
    buckets = [len(set(group.column("bucket").to_pylist())) for group, _, _ in groups]
    assert buckets == [1, 2, *[4] * 11, 3]
    assert [t for group, _, _ in groups for t in group.column("trace_id").to_pylist()] == traces[
        "trace_id"
    ].to_pylist()
    assert [(first, last) for _, first, last in groups[:2]] == [(0, 2), (2, 6)]


def test_a_store_draws_no_progress_bar_and_opens_beside_a_plain_connection(tmp_path):
    """In an interactive interpreter (a notebook, ``python -c``), DuckDB draws a progress bar on
    standard output for a query past two seconds, into a blame's JSON say: a store's connections have
    it off, by a setting, so a plain connection to the same file in the same process still opens."""
    path = tmp_path / "bar.duckdb"
    code = f"""
import duckdb
from agentscope.store import Store
plain = duckdb.connect({str(path)!r})
with Store({str(path)!r}) as store:
    print(store.con.execute("SELECT current_setting('enable_progress_bar')").fetchone()[0])
print(plain.execute("SELECT current_setting('enable_progress_bar')").fetchone()[0])
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True"]


def test_numeric_columns_read_through_their_buffers_match_their_values():
    import duckdb
    import numpy as np
    import pyarrow as pa
    import pytest

    from agentscope.store.arrays import int64_array, numbers

    con = duckdb.connect()
    part = "SELECT range::BIGINT * 7 AS a, range / 3 AS b FROM range({}, {})"
    table = pa.concat_tables(con.sql(part.format(*bounds)).to_arrow_table() for bounds in ((0, 9), (9, 20)))
    assert table.column("a").num_chunks > 1  # several chunks, combined
    assert numbers(table.column("a")).tolist() == table.column("a").to_pylist()
    sliced = table.column("b").combine_chunks().slice(12, 5)  # a view that starts part way
    assert numbers(sliced).tolist() == sliced.to_pylist()
    assert numbers(int64_array(np.arange(5, dtype=np.int64) * 3)).tolist() == [0, 3, 6, 9, 12]
    nulls = con.sql("SELECT CASE WHEN range = 3 THEN NULL ELSE range END AS c FROM range(5)").to_arrow_table()
    for column in (nulls.column("c"), pa.chunked_array([["x"]])):
        with pytest.raises(TypeError):
            numbers(column)


def test_a_column_as_one_array_whatever_its_chunks():
    """``whole``: no chunks (a query of no rows) an empty array of the column's type, one chunk that
    chunk, several their values in order."""
    import pyarrow as pa

    from agentscope.store.arrays import whole

    empty = whole(pa.chunked_array([], pa.string()))
    assert empty.type == pa.string() and len(empty) == 0
    one = pa.chunked_array([pa.array([1, 2])])
    assert whole(one).equals(one.chunk(0))
    several = pa.chunked_array([pa.array([1, 2]), pa.array([], pa.int64()), pa.array([3])])
    assert whole(several).to_pylist() == [1, 2, 3]
    assert whole(pa.array([4])).to_pylist() == [4]


def test_columns_built_from_buffers_equal_arrow_s_own():
    import pyarrow as pa

    from agentscope.store.columns import column

    cases = [
        ([3, -1, 2**40], pa.int64()),
        ([7, 0], pa.int32()),
        ([1.5, float("inf"), 0], pa.float64()),
        ([True, False, True] * 5, pa.bool_()),
        ([True, None, False], pa.bool_()),  # a null among booleans stays null, through pa.array
        ([False] * 8 + [True], pa.bool_()),  # the last flag alone in a second byte
        (["é", None, "", "trace"], pa.string()),
        ([[1.0, 2.5], [], [3]], pa.list_(pa.float64())),
        ([["checkout"], [], ["a", "b"]], pa.list_(pa.string())),
        ([], pa.string()),
        ([1, None], pa.int64()),  # null numbers, as the spans table's thread and CPU columns hold
        ([None, None, 2**62, None, -5, 0, 1, 2, 3], pa.int64()),  # past one byte of validity bits
        ([None, 2.5], pa.float64()),
        ([[1.0, None], [None]], pa.list_(pa.float64())),
        ([2**63], pa.uint64()),  # a type without a buffer path: through pa.array
    ]
    for values, arrow_type in cases:
        built = column(values, arrow_type)
        built.validate(full=True)
        assert built.equals(pa.array(values, type=arrow_type)), (values, arrow_type)


@pytest.mark.parametrize("sizes", [(4,), (3, 0, 5, 2), (0, 0, 6), (1, 1, 1, 1)])
def test_values_taken_chunk_by_chunk_come_in_the_order_asked(sizes):
    """A report's window of rows is taken from each chunk of a column without joining the chunks; the
    values come back in the order of the rows asked for, repeats included."""
    import numpy as np

    from agentscope.store.arrays import taken

    values = [f"ops-{i}" for i in range(sum(sizes))]
    starts = list(itertools.accumulate(sizes, initial=0))
    chunked = pa.chunked_array(
        [pa.array(values[a:b], pa.string()) for a, b in itertools.pairwise(starts)], pa.string()
    )
    rng = random.Random(len(sizes))
    for count in (0, 1, 7, 20):
        rows = np.array([rng.randrange(len(values)) for _ in range(count)], dtype=np.int64)
        assert taken(chunked, rows).to_pylist() == [values[r] for r in rows]
