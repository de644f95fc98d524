"""``agentscope serve``: an OTLP/HTTP trace receiver that writes into a store.

Any OpenTelemetry SDK can export to it (``OTEL_EXPORTER_OTLP_ENDPOINT``).  It
accepts ``POST /v1/traces`` with protobuf or JSON bodies, gzip or not, and
answers like a collector: an ``ExportTraceServiceResponse`` in the request's
encoding, with ``partialSuccess`` when some spans were rejected.  Bodies over
the limit get 413, undecodable ones 400 with the reason; the server keeps going.

All writes go through one writer thread, many requests per write; each write
holds the store file only while it inserts (``agentscope.store.shared``), so
readers and other writers use the store while the receiver runs.  Metrics and
logs (``/v1/metrics``, ``/v1/logs``) are acknowledged and dropped: an SDK given
the generic ``OTEL_EXPORTER_OTLP_ENDPOINT`` sends every signal there, and a 404
would have it log an export failure every minute.  A request is
answered once its spans are committed — or, when the file stayed busy for
``STORE_WAIT_S``, spilled to the store's fsynced spool — so an exporter that got
200 can forget its spans.  With a token, every request must carry
``Authorization: Bearer <token>`` (401 otherwise).
"""

from __future__ import annotations

import asyncio
import hmac
import queue
import threading
import time
import zlib
from collections import Counter
from concurrent.futures import Future
from pathlib import Path

import orjson
import pyarrow as pa
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from agentscope.ingest import otlp
from agentscope.ingest.limits import DEFAULT_MAX_BODY
from agentscope.ingest.records import Record
from agentscope.sdk._safety import report
from agentscope.store.rows import without_content
from agentscope.store.schema import rows_to_table
from agentscope.store.shared import SharedStore, StoreBusy
from agentscope.store.store import Store

STORE_WAIT_S = 5.0
"""How long one write waits for the store file before its batch goes to the spool."""
PROTOBUF = "application/x-protobuf"
JSON = "application/json"


class BodyTooLarge(Exception):
    pass


def prune_every_s(retain_ns: int) -> float:
    """How often ``serve --retain`` prunes: a hundredth of the retention, between 1 s and 10 min (a
    prune scans every span's trace and end)."""
    return min(max(retain_ns / 1e9 / 100, 1.0), 600.0)


class StoreWriter:
    """The one thread that writes received rows into the store, many requests per insert; with
    ``retain_ns``, it also deletes the traces that ended longer ago than that (``serve --retain``)."""

    def __init__(self, store: Store | SharedStore, retain_ns: int | None = None) -> None:
        self.store = store
        self.spilled = 0
        self.retain_ns = retain_ns
        self.pruned_traces = 0
        self._next_prune = 0.0
        self._queue: queue.Queue[tuple[list[tuple], Future[int]] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="agentscope-receiver-writer", daemon=True)
        self._thread.start()

    def _prune_if_due(self) -> None:
        if self.retain_ns is None or time.monotonic() < self._next_prune:
            return
        self._next_prune = time.monotonic() + prune_every_s(self.retain_ns)
        before = time.time_ns() - self.retain_ns
        try:
            if isinstance(self.store, Store):
                traces, _ = self.store.prune(before)
            else:
                traces, _ = self.store.prune(before, timeout_s=STORE_WAIT_S)
        except StoreBusy:
            return  # next time
        except Exception as exc:
            report("pruning the store", exc, internal=False)
            return
        self.pruned_traces += traces

    def submit(self, rows: list[tuple]) -> Future[set[tuple[str, str]]]:
        """Queue one request's rows; the future gives those already stored with other content."""
        future: Future[set[tuple[str, str]]] = Future()
        self._queue.put((rows, future))
        return future

    def _run(self) -> None:
        while True:
            self._prune_if_due()
            try:
                item = self._queue.get(timeout=None if self.retain_ns is None else 1.0)
            except queue.Empty:
                continue
            if item is None:
                return
            batch = [item]
            while not self._queue.empty() and len(batch) < 64:
                more = self._queue.get()
                if more is None:
                    self._write(batch)
                    return
                batch.append(more)
            self._write(batch)

    def _write(self, batch: list[tuple[list[tuple], Future[set[tuple[str, str]]]]]) -> None:
        rows = [row for chunk, _ in batch for row in chunk]
        try:
            conflicts = self._insert(rows_to_table(rows)) if rows else frozenset()
        except Exception as exc:
            report("writing received spans", exc, internal=False)
            for _, future in batch:
                future.set_exception(exc)
            return
        for chunk, future in batch:
            future.set_result({(row[0], row[1]) for row in chunk} & conflicts if conflicts else set())

    def _insert(self, table: pa.Table) -> frozenset[tuple[str, str]]:
        """Insert, or spill to the spool when the shared file stays busy (conflicts are then unknown)."""
        if isinstance(self.store, Store):
            return self.store.insert(table).conflicts
        try:
            return self.store.insert(table, STORE_WAIT_S).conflicts
        except StoreBusy:
            self.store.spill(table)
            self.spilled += table.num_rows
            return frozenset()

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=30)


def decode(body: bytes, content_type: str) -> list[Record]:
    """Records of one export request body; ValueError with the reason if it cannot be decoded."""
    if content_type.startswith(JSON):
        try:
            request = otlp.loads(body)
        except ValueError as exc:
            raise ValueError(f"invalid JSON: {exc}") from None
        records = list(otlp.json_request_records(request, 1))
        if len(records) == 1 and records[0].row is None and "resourceSpans" in (records[0].problem or ""):
            raise ValueError(records[0].problem)
        return records
    try:
        request = ExportTraceServiceRequest.FromString(body)
    except DecodeError as exc:
        raise ValueError(f"invalid protobuf ExportTraceServiceRequest: {exc}") from None
    return list(otlp.proto_request_records(request, 1))


DRAIN_LIMIT = 64 * 1024 * 1024
"""An oversized body is read and dropped up to this size, so the client gets its 413 instead of a reset."""


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > DRAIN_LIMIT:
        raise BodyTooLarge
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > DRAIN_LIMIT:
            break
        if size <= limit:
            chunks.append(chunk)
    if size > limit:
        raise BodyTooLarge
    body = b"".join(chunks)
    encoding = request.headers.get("content-encoding", "").lower()
    if encoding == "gzip":
        try:
            decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
            body = decompressor.decompress(body, limit + 1)
        except zlib.error as exc:
            raise ValueError(f"invalid gzip body: {exc}") from None
        if len(body) > limit:
            raise BodyTooLarge
    elif encoding not in ("", "identity"):
        raise ValueError(f"unsupported Content-Encoding {encoding!r}")
    return body


def _content_type(request: Request) -> str:
    """The body's encoding as the request names it; none named is protobuf, OTLP/HTTP's default."""
    return request.headers.get("content-type", PROTOBUF).lower()


def _response(content_type: str, rejected: int, message: str) -> Response:
    if content_type.startswith(JSON):
        body: dict = {}
        if rejected:
            body["partialSuccess"] = {"rejectedSpans": str(rejected), "errorMessage": message}
        return Response(orjson.dumps(body), media_type=JSON)
    response = ExportTraceServiceResponse()
    if rejected:
        response.partial_success.rejected_spans = rejected
        response.partial_success.error_message = message
    return Response(response.SerializeToString(), media_type=PROTOBUF)


class Receiver:
    """The receiver's Starlette app, bound to a store (``None``: an in-memory one, for tests)."""

    def __init__(
        self,
        store_path: str | Path | None,
        max_body: int = DEFAULT_MAX_BODY,
        token: str | None = None,
        keep_content: bool = False,
        retain_ns: int | None = None,
    ) -> None:
        if store_path is None:
            self.store: Store | SharedStore = Store(None)
        else:
            self.store = SharedStore(store_path)
            with self.store.writing(STORE_WAIT_S):  # create it now, and fail now if it cannot be written
                pass
        self.writer = StoreWriter(self.store, retain_ns)
        self.token = token
        self.max_body = max_body
        self.keep_content = keep_content
        """Keep prompts, completions and query text in the stored spans (``serve --keep-content``)."""
        self.received = 0
        self.dropped: Counter[str] = Counter()
        """Requests of other signals acknowledged and not kept, by signal (``metrics``, ``logs``)."""
        self.app = Starlette(
            routes=[
                Route("/v1/traces", self.traces, methods=["POST"]),
                Route("/v1/metrics", self.other_signal, methods=["POST"]),
                Route("/v1/logs", self.other_signal, methods=["POST"]),
                Route("/", self.health, methods=["GET"]),
            ]
        )

    async def health(self, request: Request) -> Response:
        dropped = "".join(f"; {n:,} {signal} requests dropped" for signal, n in sorted(self.dropped.items()))
        return PlainTextResponse(f"agentscope receiver: {self.received:,} spans received{dropped}\n")

    def _authorized(self, request: Request) -> bool:
        if self.token is None:
            return True
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), self.token.encode())

    def _refused(self, request: Request) -> Response | None:
        """The answer to a request that is not let in (no token, or an encoding OTLP does not have)."""
        if not self._authorized(request):
            return PlainTextResponse(
                "missing or wrong bearer token", status_code=401, headers={"WWW-Authenticate": "Bearer"}
            )
        content_type = _content_type(request)
        if not (content_type.startswith(PROTOBUF) or content_type.startswith(JSON)):
            return PlainTextResponse(f"unsupported Content-Type {content_type!r}", status_code=415)
        return None

    async def other_signal(self, request: Request) -> Response:
        """Metrics or logs: read, counted and answered with an empty (full) success, in the request's
        encoding; an empty message is the same bytes for every signal's response."""
        refused = self._refused(request)
        if refused is not None:
            return refused
        try:
            await _read_body(request, self.max_body)
        except BodyTooLarge:
            return PlainTextResponse(f"body larger than {self.max_body:,} bytes", status_code=413)
        except ValueError as exc:
            return PlainTextResponse(str(exc), status_code=400)
        self.dropped[request.url.path.rsplit("/", 1)[-1]] += 1
        return _response(_content_type(request), 0, "")

    async def traces(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        content_type = _content_type(request)
        try:
            body = await _read_body(request, self.max_body)
            records = decode(body, content_type)
        except BodyTooLarge:
            return PlainTextResponse(f"body larger than {self.max_body:,} bytes", status_code=413)
        except ValueError as exc:
            return PlainTextResponse(str(exc), status_code=400)
        rows = [r.row if self.keep_content else without_content(r.row) for r in records if r.row is not None]
        problems = [r.problem for r in records if r.row is None and r.problem]
        try:
            conflicts = await asyncio.wrap_future(self.writer.submit(rows))
        except Exception as exc:
            return PlainTextResponse(f"the store could not be written: {exc}", status_code=503)
        problems += [
            f"span {span_id} is already stored with different content; kept the stored one"
            for _, span_id in sorted(conflicts)
        ]
        self.received += len(rows) - len(conflicts)
        return _response(content_type, len(problems), "; ".join(problems[:5]))

    def close(self) -> None:
        self.writer.close()
        if isinstance(self.store, Store):
            self.store.close()
