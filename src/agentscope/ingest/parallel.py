"""Large OTLP JSON lines files are parsed by one worker process per core.

The file is cut into byte ranges at line boundaries; each worker reads its
ranges with the same reader as the single-process path and sends back Arrow
batches (cheap to pass between processes) with the line numbers they came from.
This process writes the batches in file order, so problems keep their true
line numbers and the store sees the same batches either way.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from agentscope.ingest.batching import Batcher, Problem
from agentscope.ingest.otlp import read_json_lines
from agentscope.store.schema import rows_to_table

if TYPE_CHECKING:
    from agentscope.ingest.loader import IngestSummary

MIN_BYTES = 64 * 1024 * 1024
"""Smaller files are parsed in this process: starting workers costs about a second."""
CHUNKS_PER_WORKER = 4


def worth_it(path: Path) -> bool:
    """Whether ``path`` is a plain (not gzip) file big enough to parse in parallel on this machine."""
    try:
        with path.open("rb") as probe:
            plain = probe.read(2) != b"\x1f\x8b"
        return plain and (os.cpu_count() or 1) > 1 and path.stat().st_size >= MIN_BYTES
    except OSError:
        return False


def ranges(path: Path, parts: int) -> list[tuple[int, int]]:
    """Byte ranges covering the file, each starting at the beginning of a line."""
    size = path.stat().st_size
    bounds = [0]
    with path.open("rb") as handle:
        for k in range(1, parts):
            handle.seek(max(bounds[-1], size * k // parts))
            handle.readline()
            bounds.append(min(handle.tell(), size))
    bounds.append(size)
    return [(a, b) for a, b in itertools.pairwise(bounds) if b > a]


class _Lines:
    """The lines of one byte range, counted as they are read."""

    def __init__(self, path: Path, start: int, end: int) -> None:
        self.path, self.start, self.end = path, start, end
        self.count = 0

    def __iter__(self) -> Iterator[bytes]:
        with self.path.open("rb") as handle:
            handle.seek(self.start)
            position = self.start
            while position < self.end:
                line = handle.readline()
                if not line:
                    return
                position += len(line)
                self.count += 1
                yield line


@dataclass
class ChunkResult:
    """One range, parsed: its batches, problems (line numbers counted from the range's start)."""

    lines: int = 0
    spans_read: int = 0
    repeats: int = 0
    batches: list[tuple[pa.Table, list[int]]] = field(default_factory=list)
    problems: list[tuple[int, str, bool]] = field(default_factory=list)


def parse_range(path: str, start: int, end: int) -> ChunkResult:
    """Runs in a worker process: parse one range of an OTLP JSON lines file."""
    result = ChunkResult()
    batcher = Batcher(path)
    source = _Lines(Path(path), start, end)
    for record in read_json_lines(source):
        if record.row is not None:
            result.spans_read += 1
            if batcher.add(record.row, record.line):
                rows, lines = batcher.take()
                result.batches.append((rows_to_table(rows), lines))
        if record.problem is not None:
            result.problems.append((record.line, record.problem, record.row is None))
    rows, lines = batcher.take()
    if rows:
        result.batches.append((rows_to_table(rows), lines))
    result.repeats = batcher.repeats
    result.problems += [(p.line, p.reason, True) for p in batcher.problems]
    result.lines = source.count
    return result


class WorkersUnavailable(Exception):
    """Worker processes could not run (e.g. ``__main__`` cannot be re-imported); parse in-process."""


def ingest_lines(path: Path, name: str, writer: Any, summary: IngestSummary) -> None:
    """Parse ``path`` in worker processes and write its batches in order.

    Raises :class:`WorkersUnavailable` if the pool breaks before anything was written.
    """
    workers = os.cpu_count() or 1
    chunks = ranges(path, workers * CHUNKS_PER_WORKER)
    context = multiprocessing.get_context("spawn")
    offset = 0
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        pending: list[Future[ChunkResult]] = []
        queue = list(chunks)
        while queue or pending:
            while queue and len(pending) < workers + 1:
                start, end = queue.pop(0)
                pending.append(pool.submit(parse_range, str(path), start, end))
            try:
                result = pending.pop(0).result()
            except BrokenProcessPool as exc:
                if offset == 0:
                    raise WorkersUnavailable(str(exc)) from exc
                raise
            for table, lines in result.batches:
                writer.write(table, [line + offset for line in lines])
            for line, reason, skipped in result.problems:
                summary.add_problem(Problem(name, line + offset, reason), skipped=skipped)
            summary.spans_read += result.spans_read
            summary.already_stored += result.repeats
            offset += result.lines
