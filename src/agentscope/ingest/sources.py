"""Open a trace file, whatever it is: gzip or not, and which format, judged by content.

File names are not trusted: ``spans.json`` may be OTLP lines, Jaeger or Zipkin.
"""

from __future__ import annotations

import gzip
import io
import os
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import orjson

from agentscope.ingest import jaeger, langfuse, langsmith, otlp, zipkin
from agentscope.ingest.records import Record

GZIP_MAGIC = b"\x1f\x8b"
DUCKDB_MAGIC = b"DUCK"
HEAD = 1 << 16

FORMATS = (
    "otlp-json-lines",
    "otlp-json",
    "otlp-proto",
    "otlp-proto-delimited",
    "jaeger",
    "zipkin",
    "langsmith",
    "langfuse",
    "store",
)


class UnknownFormat(ValueError):
    """The file is none of the formats agentscope reads."""


def expand(paths: list[Path], unreadable: list[tuple[Path, str]] | None = None) -> Iterator[Path]:
    """Files under ``paths`` (folders recursively, sorted), skipping hidden files.

    A folder that cannot be listed is not skipped silently: it is added to
    ``unreadable`` with the reason (the caller reports it).
    """
    for path in paths:
        if not path.is_dir():
            yield path
            continue
        found: list[Path] = []

        def note(error: OSError, top: Path = path) -> None:
            if unreadable is not None:
                unreadable.append((Path(error.filename or top), error.strerror or str(error)))

        for folder, folders, files in os.walk(path, onerror=note):
            folders[:] = sorted(name for name in folders if not name.startswith("."))
            found += [Path(folder) / name for name in files if not name.startswith(".")]
        yield from sorted(found)


class _GzipUntilCut(io.RawIOBase):
    """A gzip file read up to where it is cut short or broken, which is kept in ``problem``.

    The gzip module raises at the end of a truncated file, losing whatever the
    reader had buffered; this stream ends there instead, so every whole line
    before the cut is read, and the loader reports the cut.
    """

    def __init__(self, path: Path) -> None:
        self._gzip = gzip.open(path, "rb")  # noqa: SIM115 - held for the stream's life, closed by close()
        self.problem: str | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if self.problem is not None:
            return 0
        try:
            data = self._gzip.read(len(buffer))
        except EOFError:
            self.problem = "the file is cut short (its gzip stream ends early)"
            return 0
        except (OSError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
            self.problem = f"the gzip data is broken: {exc}"
            return 0
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._gzip.close()
        super().close()


def open_binary(path: Path) -> IO[bytes]:
    """The file's bytes, decompressed when it is gzip (judged by its magic bytes, not its name)."""
    with path.open("rb") as probe:
        magic = probe.read(2)
    return _GzipUntilCut(path) if magic == GZIP_MAGIC else path.open("rb")


def stream_problem(stream: IO[bytes]) -> str | None:
    """Why a stream from :func:`open_detected` ended early (a cut or broken gzip file), if it did."""
    return getattr(getattr(stream, "raw", None), "problem", None)


def detect(stream: IO[bytes]) -> str:
    """The format of an (uncompressed) stream, from its first bytes; the stream must be peekable."""
    head = stream.peek(HEAD)[:HEAD] if hasattr(stream, "peek") else b""
    if head[8:12] == DUCKDB_MAGIC:
        return "store"
    text = head.lstrip()
    if text.startswith((b"{", b"[")) and b'"resourceSpans"' not in head and b'"resource_spans"' not in head:
        service = _tracing_service(head)
        if service is not None:
            return service
    if text.startswith(b"{"):
        if b'"resourceSpans"' in head or b'"resource_spans"' in head:
            first_line = head.split(b"\n", 1)[0]
            if b"\n" in head:
                try:
                    orjson.loads(first_line)
                    return "otlp-json-lines"
                except orjson.JSONDecodeError:
                    return "otlp-json"
            return "otlp-json-lines"
        if b'"data"' in head[:64]:
            return "jaeger"
        if b'"traceID"' in head or b'"spans"' in head:
            return "jaeger-trace"
        raise UnknownFormat("a JSON object that is neither OTLP (resourceSpans) nor Jaeger (data/spans)")
    if text.startswith(b"["):
        return "zipkin"
    if not head:
        raise UnknownFormat("the file is empty")
    if _looks_delimited(head) or otlp.parse_proto_message(head) is not None:
        return "otlp-proto"
    if all(32 <= b < 127 or b in (9, 10, 13) for b in head[:256]):
        raise UnknownFormat("a text file that is not JSON")
    return "otlp-proto"


def _tracing_service(head: bytes) -> str | None:
    """``langsmith`` or ``langfuse`` when the head looks like their runs or observations.

    LangSmith runs carry ``run_type`` and snake_case times; Langfuse observations
    camelCase ``traceId`` with ``startTime`` (Jaeger writes ``traceID``, Zipkin
    ``timestamp``, OTLP ``startTimeUnixNano``).
    """
    if b'"run_type"' in head and (b'"start_time"' in head or b'"parent_run_id"' in head):
        return "langsmith"
    if b'"traceId"' in head and b'"startTime"' in head:
        return "langfuse"
    return None


def open_detected(path: Path) -> tuple[str, IO[bytes]]:
    """The format of ``path`` and its (decompressed) stream, positioned at the start."""
    raw = open_binary(path)
    stream = io.BufferedReader(raw, buffer_size=HEAD) if not isinstance(raw, io.BufferedReader) else raw
    try:
        return detect(stream), stream
    except UnknownFormat:
        problem = stream_problem(stream)
        stream.close()
        if problem is not None:  # "empty" or "not JSON" only because the gzip data stopped
            raise UnknownFormat(problem) from None
        raise
    except Exception:
        stream.close()
        raise


def read(path: Path) -> tuple[str, Iterator[Record]]:
    """The format of ``path`` and an iterator over its records (the file stays open until exhausted)."""
    fmt, stream = open_detected(path)
    return fmt, records(fmt, stream)


def records(fmt: str, stream: IO[bytes]) -> Iterator[Record]:
    """The records of a stream in format ``fmt``, read by agentscope's Python readers (closes the stream)."""
    with stream:
        if fmt == "otlp-json-lines":
            yield from otlp.read_json_lines(stream)
        elif fmt == "otlp-json":
            yield from otlp.read_json_document(stream)
        elif fmt in ("jaeger", "jaeger-trace"):
            yield from jaeger.read(io.TextIOWrapper(stream, encoding="utf-8"), enveloped=fmt == "jaeger")
        elif fmt == "zipkin":
            yield from zipkin.read(io.TextIOWrapper(stream, encoding="utf-8"))
        elif fmt == "langsmith":
            yield from langsmith.read(stream)
        elif fmt == "langfuse":
            yield from langfuse.read(stream)
        elif fmt == "otlp-proto":
            if _looks_delimited(stream.peek(HEAD)[:HEAD]):
                yield from otlp.read_proto_delimited(stream)
                return
            request = otlp.parse_proto_message(stream.read())
            if request is None:
                yield Record(1, problem="not an OTLP protobuf ExportTraceServiceRequest")
            else:
                yield from otlp.proto_request_records(request, 1)


def _looks_delimited(head: bytes) -> bool:
    """Whether ``head`` starts with a varint length followed by a whole trace request."""
    size = shift = used = 0
    while used < min(10, len(head)):
        byte = head[used]
        used += 1
        size |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    else:
        return False
    message = head[used : used + size]
    return len(message) == size and otlp.parse_proto_message(message) is not None
