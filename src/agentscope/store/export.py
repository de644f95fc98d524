"""Write a store's spans as the analyzer's columns in Parquet, for engines past one machine (DESIGN §10).

The folder is hive-partitioned by ``bucket``, a hash of the trace id that any
engine can recompute (``int(md5(trace_id).hexdigest()[:16], 16) % buckets``), so
every trace lies whole in one bucket and a cluster can analyse bucket by bucket
without a shuffle.  The spans stream from DuckDB to Parquet in record batches:
memory is bounded by the batch and the open row groups, not by the store.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from agentscope.store.paths import MANIFEST, TASKS_SCHEMA
from agentscope.store.query import ANALYSIS_SELECT, APP_SPANS
from agentscope.store.schema import TASK_ROWS
from agentscope.store.store import Store, quoted_path

MANIFEST_SCHEMA = "agentscope.export/v1"
SPANS_PER_BUCKET = 250_000
"""The default bucket size: a Spark task of this many spans takes seconds and well under 1 GB."""
READ_BATCH = 64_000
ROW_GROUP = (8_192, 65_536)
"""Min and max rows of a Parquet row group: large enough to scan fast, small enough to buffer per bucket."""

DUCKDB_MEMORY = "64MB"
"""DuckDB's memory while exporting: the query streams, so this bounds the cache of pages read."""

BUCKET_SQL = "CAST(('0x' || left(md5(trace_id), 16)) AS UBIGINT) % {buckets}"
"""``bucket`` in SQL: the first 64 bits of the trace id's MD5, modulo the bucket count."""


def bucket_of(trace_id: str, buckets: int) -> int:
    """The bucket a trace lands in; the same on every machine and in every run."""
    return int(hashlib.md5(trace_id.encode()).hexdigest()[:16], 16) % buckets


@dataclass(frozen=True)
class Manifest:
    """What an export wrote; saved beside the Parquet files as ``_agentscope_manifest.json``."""

    spans: int
    traces: int
    buckets: int
    files: int
    bytes: int
    columns: list[str]
    bucket_rule: str
    schema: str = MANIFEST_SCHEMA


def default_buckets(spans: int) -> int:
    """Enough buckets to keep each near ``SPANS_PER_BUCKET`` spans."""
    return max(1, math.ceil(spans / SPANS_PER_BUCKET))


class ExportError(Exception):
    """The target folder cannot be written (it holds something other than an earlier export, or the
    file system refuses)."""


def _prepare(out: Path) -> None:
    """An empty folder at ``out``; an earlier export there is replaced, anything else is refused."""
    earlier = out.exists()
    if earlier:
        if not out.is_dir():
            raise ExportError(f"{out} exists and is not a folder")
        entries = list(out.iterdir())
        if entries and not (out / MANIFEST).exists():
            raise ExportError(f"{out} is not empty and holds no agentscope export; pick a new folder")
    try:
        if earlier:
            shutil.rmtree(out)
        out.mkdir(parents=True)
    except OSError as exc:
        raise ExportError(f"cannot write {exc.filename or out}: {exc.strerror or exc}") from None


TASKS_FILE = "tasks.parquet"


def export_tasks(store: Store, out: Path) -> int:
    """Write the store's task table to ``out/tasks.parquet`` (zstd; ``blame --tasks`` reads it, as it
    reads a Spark run's); returns the tasks written.  The table must be current: read it first."""
    _prepare(out)
    store.con.execute(
        f"COPY (SELECT {TASK_ROWS} FROM tasks ORDER BY start_ns) TO '{quoted_path(out / TASKS_FILE)}' "
        "(FORMAT parquet, COMPRESSION zstd)"
    )
    count = int(store.scalar("SELECT count(*) FROM tasks"))
    (out / MANIFEST).write_text(json.dumps({"schema": TASKS_SCHEMA, "tasks": count}, indent=2) + "\n")
    return count


def export_parquet(
    store: Store,
    out: str | Path,
    buckets: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Manifest:
    """Write the store's app spans to ``out`` as zstd Parquet in ``bucket=K/`` folders.

    ``progress`` is called with the spans written since its last call and the spans to write in all.
    """
    out = Path(out)
    # DuckDB would keep the pages it reads cached, so its memory would grow with the store: cap it.
    store.con.execute(f"SET memory_limit = '{DUCKDB_MEMORY}'")
    store.con.execute("SET preserve_insertion_order = false")  # else the stream buffers to keep order
    spans = store.con.execute(f"SELECT count(*) FROM spans WHERE {APP_SPANS}").fetchall()[0][0]
    buckets = default_buckets(spans) if buckets is None else buckets
    if buckets < 1:
        raise ValueError("buckets must be at least 1")
    _prepare(out)
    query = (
        f"SELECT *, CAST({BUCKET_SQL.format(buckets=buckets)} AS INTEGER) AS bucket "
        f"FROM ({ANALYSIS_SELECT.format(where=APP_SPANS)})"
    )
    reader = store.con.sql(query).to_arrow_reader(READ_BATCH)

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in reader:
            yield batch
            if progress is not None:
                progress(batch.num_rows, spans)

    ds.write_dataset(
        batches(),
        out,
        schema=reader.schema,
        format="parquet",
        partitioning=ds.partitioning(pa.schema([("bucket", pa.int32())]), flavor="hive"),
        file_options=ds.ParquetFileFormat().make_write_options(compression="zstd"),
        basename_template="part-{i}.parquet",
        min_rows_per_group=ROW_GROUP[0],
        max_rows_per_group=ROW_GROUP[1],
        max_open_files=max(buckets, 1024),
        existing_data_behavior="overwrite_or_ignore",
    )
    files = sorted(out.rglob("*.parquet"))
    traces = store.con.execute(f"SELECT count(DISTINCT trace_id) FROM spans WHERE {APP_SPANS}").fetchall()[0][
        0
    ]
    manifest = Manifest(
        spans=sum(pq.ParquetFile(f).metadata.num_rows for f in files),
        traces=traces,
        buckets=buckets,
        files=len(files),
        bytes=sum(f.stat().st_size for f in files),
        columns=[name for name in reader.schema.names if name != "bucket"],
        bucket_rule=f"int(md5(trace_id).hexdigest()[:16], 16) % {buckets}",
    )
    (out / MANIFEST).write_text(json.dumps(asdict(manifest), indent=2) + "\n")
    return manifest
