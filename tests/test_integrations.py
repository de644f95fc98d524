"""HTTP clients, real databases and retries, each driven for real and instrumented by ags.instrument()."""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import aiohttp
import httpx
import openai
import pytest
import requests
import tenacity
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import agentscope as ags
from agentscope import attributes as A
from agentscope.analysis.pipeline import blame_store
from agentscope.sim import Profile, SimServer
from agentscope.store import Store

LIBRARIES = ("httpx", "requests", "aiohttp", "sqlite3", "psycopg", "redis", "tenacity")
"""Patched by the fixture; duckdb, sqlalchemy and backoff are tested on their own below."""
POSTGRES = "host=127.0.0.1 port=5432 dbname=test user=postgres connect_timeout=3"


def service_or_skip(name: str, check) -> None:
    try:
        check()
    except Exception as exc:
        if os.environ.get("AGENTSCOPE_REQUIRE_SERVICES") == "1":
            pytest.fail(f"{name} is required in CI and is not reachable: {exc}")
        pytest.skip(f"{name} is not reachable here: {exc}")


@pytest.fixture
def postgres():
    psycopg = pytest.importorskip("psycopg")
    service_or_skip("PostgreSQL on 127.0.0.1:5432", lambda: psycopg.connect(POSTGRES).close())
    return psycopg


@pytest.fixture
def redis_client():
    redis = pytest.importorskip("redis")
    client = redis.Redis(host="127.0.0.1", port=6379, socket_timeout=3)
    service_or_skip("Redis on 127.0.0.1:6379", client.ping)
    return client


@pytest.fixture
def instrumented(captured):
    assert set(ags.instrument(*LIBRARIES)) == set(LIBRARIES)
    yield captured
    ags.uninstrument(*LIBRARIES)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        if "slow" in self.path:  # the headers at once, then six chunks 50 ms apart
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for _ in range(6):
                time.sleep(0.05)
                self.wfile.write(b"a\r\n0123456789\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            return
        self.send_response(404 if "missing" in self.path else 200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


@pytest.fixture
def http_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def by_kind(captured, kind):
    return [s for s in captured.spans if captured.kind(s) == kind]


def test_httpx_and_requests_make_http_spans(instrumented, http_server):
    httpx.get(f"{http_server}/a")
    httpx.get(f"{http_server}/missing")
    requests.get(f"{http_server}/b", timeout=5)

    async def main():
        async with httpx.AsyncClient() as client:
            await client.get(f"{http_server}/c")

    asyncio.run(main())
    spans = by_kind(instrumented, "http")
    assert len(spans) == 4
    assert {s.attributes[A.SERVER_ADDRESS] for s in spans} == {"127.0.0.1"}
    codes = sorted(s.attributes[A.HTTP_RESPONSE_STATUS_CODE] for s in spans)
    assert codes == [200, 200, 200, 404]
    assert [s.status.status_code.name for s in spans if s.attributes[A.HTTP_RESPONSE_STATUS_CODE] == 404] == [
        "ERROR"
    ]


def test_a_streamed_response_is_timed_until_its_body_ends(instrumented, http_server, tmp_path):
    """``client.stream()`` and ``stream=True`` return at the headers; the body (300 ms here) is still the
    request's time: its span ends when the body is read to its end, closed, or dropped unread."""
    url = f"{http_server}/slow"
    with httpx.stream("GET", url) as response:
        assert b"".join(response.iter_bytes()) == b"0123456789" * 6
    response = requests.get(url, stream=True, timeout=5)
    assert len(b"".join(response.iter_content(7))) == 60
    with requests.get(url, stream=True, timeout=5) as response, (tmp_path / "body").open("wb") as file:
        shutil.copyfileobj(response.raw, file)

    async def main():
        async with httpx.AsyncClient() as client, client.stream("GET", url) as response:
            assert len([chunk async for chunk in response.aiter_raw()]) >= 1

    asyncio.run(main())
    whole = by_kind(instrumented, "http")
    assert len(whole) == 4
    for span in whole:
        assert (span.end_time - span.start_time) / 1e6 >= 280, span.name
        assert span.attributes[A.HTTP_RESPONSE_STATUS_CODE] == 200 and span.status.status_code.name != "ERROR"
    with httpx.stream("GET", url) as response:
        next(response.iter_bytes())  # the first chunk, then the block closes the response
    requests.get(url, stream=True, timeout=5)  # never read: dropped at once
    early, unread = by_kind(instrumented, "http")[4:]
    assert (early.end_time - early.start_time) / 1e6 < 200 and early.status.status_code.name != "ERROR"
    assert unread.end_time is not None and (unread.end_time - unread.start_time) / 1e6 < 200


def test_aiohttp_requests_are_timed_until_their_body_is_in(instrumented, http_server):
    """aiohttp returns at the headers whatever the call; the span holds the body however it is read, and
    ends at once for one never read (released on leaving its block) or broken off."""
    slow = f"{http_server}/slow"

    async def main():
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{http_server}/a") as response:
                assert await response.text() == "ok"
            async with session.get(f"{http_server}/missing") as response:
                assert response.status == 404
            response = await session.get(slow)  # no block: read() is where the body ends
            assert len(await response.read()) == 60
            async with session.get(slow) as response:
                assert len(b"".join([chunk async for chunk in response.content.iter_chunked(7)])) == 60
            async with session.get(slow) as response:
                await response.content.readany()  # the first chunk only; leaving the block releases it
        async with (
            aiohttp.ClientSession(base_url=http_server) as session,
            session.post("/b", data=b"x") as response,
        ):
            assert response.status == 501  # the test server answers GET only

    asyncio.run(main())
    spans = by_kind(instrumented, "http")
    assert [s.name for s in spans] == ["GET 127.0.0.1"] * 5 + ["POST 127.0.0.1"]
    ms = [(s.end_time - s.start_time) / 1e6 for s in spans]
    codes = [s.attributes[A.HTTP_RESPONSE_STATUS_CODE] for s in spans]
    assert codes[:5] == [200, 404, 200, 200, 200]
    assert [s.status.status_code.name == "ERROR" for s in spans[:5]] == [False, True, False, False, False]
    assert ms[2] >= 280 and ms[3] >= 280, ms  # six chunks 50 ms apart
    assert ms[4] < 200, ms


def test_aiohttp_websocket_handshake_and_refused_connection(instrumented):
    """A WebSocket's span is its handshake, not the socket's life; a refused connection is an error."""
    from aiohttp import web

    async def echo(request):
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for message in ws:
            await ws.send_str(message.data)
        return ws

    async def main():
        app = web.Application()
        app.router.add_get("/ws", echo)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        try:
            async with aiohttp.ClientSession() as session:
                async with session.ws_connect(f"http://127.0.0.1:{port}/ws") as ws:
                    await ws.send_str("hi")
                    assert (await ws.receive()).data == "hi"
                    await asyncio.sleep(0.3)
                with pytest.raises(aiohttp.ClientConnectionError):
                    await session.get(f"http://127.0.0.1:{_closed_port()}/")
        finally:
            await runner.cleanup()

    asyncio.run(main())
    handshake, refused = by_kind(instrumented, "http")
    assert handshake.attributes[A.HTTP_RESPONSE_STATUS_CODE] == 101
    assert (handshake.end_time - handshake.start_time) / 1e6 < 250
    assert refused.status.status_code.name == "ERROR" and refused.end_time is not None


def test_aiohttp_uninstrument_restores_the_client():
    from aiohttp.client import ClientSession
    from aiohttp.client_reqrep import ClientResponse

    originals = [ClientSession.__dict__["_request"], ClientResponse.__dict__["close"]]
    assert ags.instrument("aiohttp") == ["aiohttp"]
    assert ClientSession.__dict__["_request"] is not originals[0]
    ags.uninstrument("aiohttp")
    assert [ClientSession.__dict__["_request"], ClientResponse.__dict__["close"]] == originals


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_sqlite3_statements_without_query_text(instrumented, tmp_path):
    with sqlite3.connect(tmp_path / "x.db") as con:
        con.execute("CREATE TABLE t (x)")
        con.executemany("INSERT INTO t VALUES (?)", [(1,), (2,)])
        cursor = con.cursor()
        rows = cursor.execute("SELECT x FROM t ORDER BY x").fetchall()
    assert rows == [(1,), (2,)]
    ops = [s.attributes[A.DB_OPERATION_NAME] for s in by_kind(instrumented, "db")]
    assert ops == ["CREATE", "INSERT", "SELECT"]
    assert next(con.execute("SELECT count(*) FROM t")) == (2,)  # a traced cursor is an iterator too
    cursor = con.cursor()
    cursor.executescript("INSERT INTO t VALUES (3); DELETE FROM t WHERE x = 3;")
    assert next(cursor.execute("SELECT max(x) FROM t")) == (2,)
    ops = [s.attributes[A.DB_OPERATION_NAME] for s in by_kind(instrumented, "db")]
    assert ops[3:] == ["SELECT", "INSERT", "SELECT"]  # a script is named by its first statement
    copy = sqlite3.connect(":memory:")
    con.backup(copy)  # both traced: the C method takes real connections only
    assert copy.execute("SELECT count(*) FROM t").fetchone() == (2,)
    assert all(A.DB_QUERY_TEXT not in s.attributes for s in instrumented.spans)


def test_psycopg_against_postgresql(postgres, instrumented):
    with postgres.connect(POSTGRES) as con:
        con.execute("SELECT pg_sleep(0.02)")
        with con.cursor() as cursor:
            cursor.execute("SELECT %s::int", (7,))
            assert cursor.fetchone() == (7,)

    async def main():
        async with await postgres.AsyncConnection.connect(POSTGRES) as con:
            cursor = await con.execute("SELECT 1")
            return await cursor.fetchone()

    assert asyncio.run(main()) == (1,)
    spans = by_kind(instrumented, "db")
    assert [s.attributes[A.DB_SYSTEM_NAME] for s in spans] == ["postgresql"] * 3
    assert (spans[0].end_time - spans[0].start_time) >= 20_000_000


def test_a_psycopg_sql_composition_is_named_by_its_statement(postgres, instrumented):
    """``sql.SQL(...).format(...)`` (how psycopg composes identifiers) is rendered as psycopg sends it: its
    ``str()`` is a repr, which once named the span ``COMPOSED([SQL('INSERT``."""
    from psycopg import sql

    exporter = InMemorySpanExporter()  # with the query text, which is content
    processor = SimpleSpanProcessor(exporter)
    ags.init(store=None, instrument=False, capture_content=True, span_processors=[processor])
    query = sql.SQL("SELECT {} FROM {} LIMIT 1").format(sql.Identifier("relname"), sql.Identifier("pg_class"))
    with postgres.connect(POSTGRES) as con:
        con.execute(query).fetchall()
        con.execute(b"SELECT 2").fetchall()
    composed, raw = [s for s in exporter.get_finished_spans() if A.DB_SYSTEM_NAME in s.attributes]
    assert composed.name == "SELECT postgresql" and raw.name == "SELECT postgresql"
    assert composed.attributes[A.DB_QUERY_TEXT] == 'SELECT "relname" FROM "pg_class" LIMIT 1'


def test_a_server_side_cursor_times_its_fetches(postgres, instrumented):
    """A named cursor's ``execute`` only declares it: the query runs as rows are fetched."""
    slow = "SELECT pg_sleep(0.05) FROM generate_series(1, 4)"
    with postgres.connect(POSTGRES) as con, con.cursor(name="rows") as cursor:
        cursor.execute(slow)
        assert cursor.fetchone() is not None and len(cursor.fetchmany(2)) == 2 and len(cursor.fetchall()) == 1

    async def main():
        async with await postgres.AsyncConnection.connect(POSTGRES) as con, con.cursor(name="rows") as cursor:
            await cursor.execute(slow)
            return await cursor.fetchall()

    assert len(asyncio.run(main())) == 4
    spans = by_kind(instrumented, "db")
    ops = [s.attributes[A.DB_OPERATION_NAME] for s in spans]
    assert ops == ["SELECT", "FETCH", "FETCH", "FETCH", "SELECT", "FETCH"]
    ms = [(s.end_time - s.start_time) / 1e6 for s in spans]
    assert ms[1] >= 45 and ms[2] >= 95 and ms[3] >= 45 and ms[5] >= 190  # 50 ms a row, as fetched


def test_redis_commands_and_pipeline(redis_client, instrumented):
    redis_client.set("agentscope:test", "1")
    assert redis_client.get("agentscope:test") == b"1"
    with redis_client.pipeline() as pipe:
        pipe.incr("agentscope:n").incr("agentscope:n").execute()
    ops = [s.attributes[A.DB_OPERATION_NAME] for s in by_kind(instrumented, "db")]
    assert ops == ["SET", "GET", "PIPELINE"]

    async def main():
        import redis.asyncio

        client = redis.asyncio.Redis(host="127.0.0.1", port=6379, socket_timeout=3)
        async with client.pipeline() as pipe:
            await pipe.incr("agentscope:n").incr("agentscope:n").execute()
        await client.aclose()

    asyncio.run(main())
    ops = [s.attributes[A.DB_OPERATION_NAME] for s in by_kind(instrumented, "db")]
    assert ops == ["SET", "GET", "PIPELINE", "PIPELINE"]


def test_tenacity_attempts_and_backoff(instrumented):
    calls = []

    @tenacity.retry(wait=tenacity.wait_fixed(0.02), stop=tenacity.stop_after_attempt(5))
    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("try again")
        return "ok"

    assert flaky() == "ok"
    attempts = [s for s in instrumented.spans if s.name.startswith("attempt ")]
    assert [s.attributes[A.ATTEMPT] for s in attempts] == [1, 2, 3]
    assert [s.status.status_code.name for s in attempts] == ["ERROR", "ERROR", "UNSET"]
    backoffs = by_kind(instrumented, "backoff")
    assert len(backoffs) == 2 and all(
        s.attributes[A.BACKOFF_PLANNED_S] == pytest.approx(0.02) for s in backoffs
    )

    @tenacity.retry(wait=tenacity.wait_fixed(0.01), stop=tenacity.stop_after_attempt(2))
    async def flaky_async():
        calls.append(1)
        if len(calls) < 5:
            raise ConnectionError("again")
        return "ok"

    assert asyncio.run(flaky_async()) == "ok"
    assert len(by_kind(instrumented, "backoff")) == 3


def test_tenacity_iterator_style_attempts_and_backoff(instrumented):
    failures = iter([ConnectionError("1"), ConnectionError("2")])

    for attempt in tenacity.Retrying(wait=tenacity.wait_fixed(0.02), stop=tenacity.stop_after_attempt(4)):
        with attempt:
            error = next(failures, None)
            if error is not None:
                raise error
    attempts = [s for s in instrumented.spans if s.name == "attempt"]
    assert [s.attributes[A.ATTEMPT] for s in attempts] == [1, 2, 3]
    assert [s.status.status_code.name for s in attempts] == ["ERROR", "ERROR", "UNSET"]
    backoffs = by_kind(instrumented, "backoff")
    assert [s.attributes[A.ATTEMPT] for s in backoffs] == [1, 2]
    assert all(s.end_time - s.start_time >= 20e6 for s in backoffs)

    async def run() -> None:
        failures = iter([ConnectionError("3")])
        retrying = tenacity.AsyncRetrying(wait=tenacity.wait_fixed(0.01), stop=tenacity.stop_after_attempt(3))
        own_sleep = retrying.sleep
        async for attempt in retrying:
            with attempt:
                error = next(failures, None)
                if error is not None:
                    raise error
        assert retrying.sleep is own_sleep and not hasattr(retrying, "_agentscope_sleep")

    asyncio.run(run())
    assert len([s for s in instrumented.spans if s.name == "attempt"]) == 5
    assert len(by_kind(instrumented, "backoff")) == 3


def test_uninstrument_restores_every_library(captured, tmp_path):
    originals = (httpx.Client.send, requests.Session.send, sqlite3.connect, tenacity.Retrying.__call__)
    ags.instrument(*LIBRARIES)
    assert httpx.Client.send is not originals[0]
    ags.uninstrument(*LIBRARIES)
    assert (
        httpx.Client.send,
        requests.Session.send,
        sqlite3.connect,
        tenacity.Retrying.__call__,
    ) == originals
    sqlite3.connect(tmp_path / "y.db").execute("SELECT 1")
    assert captured.spans == []


def test_an_agent_with_only_init_and_instrument_gets_a_complete_trace(tmp_path, postgres, redis_client):
    """openai + httpx + psycopg + redis + tenacity, with nothing but ags.init() and ags.instrument()."""
    server = SimServer(
        Profile(
            queue_ms=15,
            prefill_ms=40,
            tokens_per_s=400,
            output_tokens=20,
            rate_limit_rate=0.3,
            retry_after_ms=30,
            seed=11,
        )
    ).start()
    store = tmp_path / "agent.duckdb"
    ags.init(store=store)  # instrument=True: every installed integration
    try:
        llm = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=8)
        web = httpx.Client()
        failures = []

        @tenacity.retry(wait=tenacity.wait_fixed(0.03), stop=tenacity.stop_after_attempt(3))
        def lookup(customer: int) -> str:
            if len(failures) % 2 == 0:
                failures.append(customer)
                raise TimeoutError("lookup timed out")
            failures.append(customer)
            return redis_client.get(f"agentscope:customer:{customer}") or b""

        def ticket(n: int) -> str:
            with postgres.connect(POSTGRES) as con:
                con.execute("SELECT pg_sleep(0.01)")
            redis_client.set(f"agentscope:customer:{n}", "pro")
            lookup(n)
            web.get(server.base_url.replace("/v1", "/health"))
            reply = llm.chat.completions.create(
                model="gpt-oss-120b", messages=[{"role": "user", "content": "hi"}]
            )
            return reply.choices[0].message.content

        for n in range(6):
            with ags.span("ticket", kind="task"):
                ticket(n)
    finally:
        ags.shutdown()
        ags.uninstrument()
        server.stop()
    with Store(store, read_only=True) as opened:
        kinds = dict(opened.con.execute("SELECT kind, count(*) FROM spans GROUP BY kind").fetchall())
        report = blame_store(opened)
    assert kinds["task"] == 6 and kinds["llm"] == 6 and kinds["db"] >= 18 and kinds["backoff"] >= 6
    mean = {row["category"]: row for row in report["mean"]}
    assert mean["queue"]["components"]["provider"] == pytest.approx(15, rel=0.1)
    assert mean["inference"]["components"]["prefill"] == pytest.approx(40, rel=0.1)
    assert mean["inference"]["components"]["decode"] > 0
    assert mean["network"]["ms"] > 0 and mean["db"]["ms"] >= 10
    assert mean["retry"]["components"]["failed"] > 0 and mean["retry"]["components"]["backoff"] >= 30


def test_duckdb_sqlalchemy_and_backoff(captured, tmp_path):
    import backoff
    import duckdb
    import sqlalchemy

    ags.instrument("duckdb", "sqlalchemy", "backoff")
    try:
        con = duckdb.connect(str(tmp_path / "d.duckdb"))
        con.execute("CREATE TABLE t (x INTEGER)")
        assert con.execute("SELECT 42").fetchall() == [(42,)]
        # the module's functions type-check the connection they are given: each gets the real one
        assert duckdb.execute("SELECT count(*) FROM t", connection=con).fetchall() == [(0,)]
        duckdb.register("v", con.sql("SELECT 1 AS a UNION ALL SELECT 2"), connection=con)
        assert con.execute("SELECT sum(a) FROM v").fetchall() == [(3,)]
        duckdb.set_default_connection(con)
        assert duckdb.sql("SELECT count(*) FROM t").fetchall() == [(0,)]
        duckdb.set_default_connection(duckdb.connect())
        engine = sqlalchemy.create_engine("sqlite://")
        with engine.connect() as connection:
            assert connection.execute(sqlalchemy.text("SELECT 7")).scalar() == 7
        calls = []

        @backoff.on_exception(backoff.constant, ValueError, interval=0.02, max_tries=4, jitter=None)
        def flaky():
            calls.append(1)
            if len(calls) < 3:
                raise ValueError("again")
            return "ok"

        assert flaky() == "ok"
    finally:
        ags.uninstrument("duckdb", "sqlalchemy", "backoff")
    db = [
        (s.attributes[A.DB_SYSTEM_NAME], s.attributes[A.DB_OPERATION_NAME]) for s in by_kind(captured, "db")
    ]
    assert ("duckdb", "CREATE") in db and ("duckdb", "SELECT") in db and ("sqlite", "SELECT") in db
    attempts = [s for s in captured.spans if s.name.startswith("attempt ")]
    assert [s.status.status_code.name for s in attempts] == ["ERROR", "ERROR", "UNSET"]
    waits = by_kind(captured, "backoff")
    assert len(waits) == 2 and all(s.end_time - s.start_time >= 15_000_000 for s in waits)
