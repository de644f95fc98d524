"""Open a trace file, whatever it is: gzip or not, and which format, judged by content.

File names are not trusted: ``spans.json`` may be OTLP lines, Jaeger or Zipkin.
"""

from __future__ import annotations

import codecs
import gzip
import io
import os
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from agentscope.ingest import jaeger, langfuse, langsmith, otlp, phoenix, sniff, zipkin
from agentscope.ingest.records import Record
from agentscope.ingest.sniff import UnknownFormat
from agentscope.store.paths import MANIFEST, export_reader

GZIP_MAGIC = b"\x1f\x8b"
UTF8_BOM = codecs.BOM_UTF8
# Byte-order marks of the wide encodings, UTF-32's first (its little-endian mark begins with UTF-16's).
WIDE_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
HEAD = 1 << 16
FIRST_RECORD_MAX = 64 << 20  # bytes read at most to find a file's first whole record

FORMATS = (
    "otlp-json-lines",
    "otlp-json",
    "otlp-json-array",
    "otlp-proto",
    "otlp-proto-delimited",
    "jaeger",
    "zipkin",
    "langsmith",
    "langfuse",
    "phoenix",
    "store",
)


STORE_SIDECARS = (".lock", ".lock.queue", ".wal", ".spool")
"""What a store keeps beside itself: its lock files, DuckDB's write-ahead log, its spool folder."""


def _sidecars(folder: str, names: list[str]) -> set[str]:
    """The names in ``folder`` that are a store's own files beside it (the store is read; they are not)."""
    found = set()
    for name in names:
        for suffix in STORE_SIDECARS:
            base = name.removesuffix(suffix)
            if base != name and base in names and _is_store(Path(folder) / base):
                found.add(name)
    return found


def _is_store(path: Path) -> bool:
    try:
        with path.open("rb") as file:
            return file.read(12)[8:12] == sniff.DUCKDB_MAGIC
    except OSError:
        return False


def expand(paths: list[Path], skipped: list[tuple[Path, str]] | None = None) -> Iterator[Path]:
    """Files under ``paths`` (folders recursively, sorted), skipping hidden files and the files a store
    keeps beside itself (:data:`STORE_SIDECARS`).

    A folder that is not read is not skipped silently: one that cannot be listed, or that holds an
    agentscope export (Parquet, read by other commands), is added to ``skipped`` with the reason (the
    caller reports it).
    """
    for path in paths:
        if not path.is_dir():
            yield path
            continue
        found: list[Path] = []

        def note(error: OSError, top: Path = path) -> None:
            if skipped is not None:
                reason = error.strerror or str(error)
                skipped.append((Path(error.filename or top), f"cannot read the folder: {reason}"))

        for folder, folders, files in os.walk(path, onerror=note):
            export = export_reader(Path(folder)) if MANIFEST in files else None
            if export is not None:
                folders.clear()
                if skipped is not None:
                    skipped.append((Path(folder), export))
                continue
            sidecars = _sidecars(folder, [*files, *folders])
            folders[:] = sorted(name for name in folders if not name.startswith(".") and name not in sidecars)
            found += [
                Path(folder) / name for name in files if not name.startswith(".") and name not in sidecars
            ]
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
    """The format of an (uncompressed) stream, read from where it is as far as its first record needs."""
    return _read_first_record(stream)[0]


def _read_first_record(stream: IO[bytes]) -> tuple[str, bytes]:
    """The stream's format and the bytes read to tell it: its first whole record, at most
    :data:`FIRST_RECORD_MAX` bytes (see :mod:`agentscope.ingest.sniff`)."""
    data = b""
    want = HEAD
    while True:
        data += _read_up_to(stream, want - len(data))
        eof = len(data) < want
        try:
            return sniff.judge(data, eof), data
        except sniff.Incomplete:
            if want >= FIRST_RECORD_MAX:
                raise UnknownFormat(
                    f"its first record is larger than {FIRST_RECORD_MAX >> 20} MiB, the most read "
                    "to tell a file's format"
                ) from None
            want = min(want * 4, FIRST_RECORD_MAX)


def _read_up_to(stream: IO[bytes], size: int) -> bytes:
    """``size`` bytes, fewer only at the end of the stream (a raw stream may return less a read)."""
    parts = []
    while size > 0:
        part = stream.read(size)
        if not part:
            break
        parts.append(part)
        size -= len(part)
    return b"".join(parts)


class _Replay(io.RawIOBase):
    """The bytes read to tell a stream's format, then the rest of that stream."""

    def __init__(self, head: bytes, rest: IO[bytes]) -> None:
        self._head = memoryview(head)
        self._rest = rest

    @property
    def problem(self) -> str | None:
        """Why the stream underneath ended early (see :func:`stream_problem`)."""
        return getattr(self._rest, "problem", None)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if not self._head:
            return self._rest.readinto(buffer)  # type: ignore[attr-defined]
        taken = min(len(buffer), len(self._head))
        buffer[:taken] = self._head[:taken]
        self._head = self._head[taken:]
        return taken

    def close(self) -> None:
        self._rest.close()
        super().close()


class _Transcoded(io.RawIOBase):
    """Text in UTF-16 or UTF-32, read as UTF-8 without its byte-order mark.

    Windows PowerShell 5 writes a redirected command's output (``curl … > spans.json``)
    as UTF-16 with a mark; every reader here reads UTF-8. Text that breaks off inside a
    character ends the stream, and the reason is kept in ``problem`` as a cut gzip file's is.
    """

    def __init__(self, stream: IO[bytes], encoding: str) -> None:
        self._stream = stream
        self._encoding = encoding
        self._decoder = codecs.getincrementaldecoder(encoding)()
        self._pending = memoryview(b"")
        self._ended = False
        self._problem: str | None = None

    @property
    def problem(self) -> str | None:
        """Why the text ended early, here or in the stream underneath (see :func:`stream_problem`)."""
        return self._problem or getattr(self._stream, "problem", None)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while not self._pending and not self._ended:
            chunk = self._stream.read(HEAD)
            self._ended = not chunk
            try:
                text = self._decoder.decode(chunk, final=self._ended)
            except UnicodeDecodeError as exc:
                self._problem = f"the {self._encoding.upper()} text is broken ({exc.reason})"
                self._ended = True
                break
            self._pending = memoryview(text.encode())
        taken = min(len(buffer), len(self._pending))
        buffer[:taken] = self._pending[:taken]
        self._pending = self._pending[taken:]
        return taken

    def close(self) -> None:
        self._stream.close()
        super().close()


def _as_utf8(raw: IO[bytes]) -> IO[bytes]:
    """``raw`` from its first character on, as UTF-8: a UTF-8 byte-order mark skipped (Windows tools write
    one), UTF-16 and UTF-32 text transcoded. A seekable file stays seekable, at its first character.

    A mark counts only before JSON's first character (a bracket or a space): the same bytes can begin a
    length-delimited protobuf stream, whose first length is a varint."""
    lead = _read_up_to(raw, 8)
    for mark, encoding in WIDE_BOMS:
        if lead.startswith(mark) and _json_starts(lead, encoding):
            return _Transcoded(_Replay(lead, raw), encoding)
    start = len(UTF8_BOM) if lead.startswith(UTF8_BOM) and _json_starts(lead, "utf-8-sig") else 0
    if raw.seekable():
        raw.seek(start)
        return raw
    return _Replay(lead[start:], raw)


def _json_starts(lead: bytes, encoding: str) -> bool:
    """Whether ``lead``, a file's first bytes with a byte-order mark, goes on with what JSON begins with."""
    text = codecs.getincrementaldecoder(encoding)(errors="replace").decode(lead).lstrip(" \t\r\n")
    return text[:1] in ("", "{", "[")


def open_detected(path: Path) -> tuple[str, IO[bytes]]:
    """The format of ``path`` and its (decompressed, UTF-8) stream, positioned at its first character."""
    raw = open_binary(path)
    try:
        raw = _as_utf8(raw)
        start = raw.tell() if raw.seekable() else 0
        fmt, head = _read_first_record(raw)
    except UnknownFormat:
        problem = getattr(raw, "problem", None)
        raw.close()
        if problem is not None:  # "empty" or "not JSON" only because the gzip data stopped
            raise UnknownFormat(problem) from None
        raise
    except Exception:
        raw.close()
        raise
    if raw.seekable():
        raw.seek(start)
        return fmt, raw
    return fmt, io.BufferedReader(_Replay(head, raw), buffer_size=HEAD)


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
        elif fmt == "otlp-json-array":
            yield from otlp.read_json_array(io.TextIOWrapper(stream, encoding="utf-8"))
        elif fmt in ("jaeger", "jaeger-trace"):
            yield from jaeger.read(io.TextIOWrapper(stream, encoding="utf-8"), enveloped=fmt == "jaeger")
        elif fmt == "zipkin":
            yield from zipkin.read(io.TextIOWrapper(stream, encoding="utf-8"))
        elif fmt == "langsmith":
            yield from langsmith.read(stream)
        elif fmt == "langfuse":
            yield from langfuse.read(stream)
        elif fmt == "phoenix":
            yield from phoenix.read(stream)
        elif fmt == "otlp-proto-delimited":
            yield from otlp.read_proto_delimited(stream)
        elif fmt == "otlp-proto":
            request = otlp.parse_proto_message(stream.read())
            if request is None:
                yield Record(1, problem="not an OTLP protobuf ExportTraceServiceRequest")
            else:
                yield from otlp.proto_request_records(request, 1)
