"""OpenTelemetry's own instrumentations of HTTP clients and databases (the ones ``opentelemetry-instrument``
turns on) beside agentscope's, in one process, as a user runs them.

Run as a script, one order per process (instrumentors patch the process)::

    python contrib_beside.py STORE [--order ags-first|contrib-first]

Each task: a tool that runs a PostgreSQL query through psycopg and one through SQLAlchemy (over psycopg;
OpenTelemetry's SQLAlchemy instrumentation does not take SQLAlchemy 2.1), a Redis SET
and GET, a GET through httpx and one through requests (to a loopback server that answers 200), then
a model call against the simulated provider.  It prints one JSON line: per task the requests the
provider served and the operations run; what the ``agentscope`` logger said.  The test reads the
store beside it.
"""

from __future__ import annotations

import argparse
import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import agentscope as ags
from agentscope.sim import Profile, SimServer

PROFILE = Profile(queue_ms=5, prefill_ms=150, tokens_per_s=200, output_tokens=40, seed=3)
POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
ROUNDS = 3
MESSAGES = [{"role": "user", "content": "where is my order"}]


class _Ok(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


def _contrib() -> None:
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
    from opentelemetry.instrumentation.redis import RedisInstrumentor
    from opentelemetry.instrumentation.requests import RequestsInstrumentor

    for instrumentor in (HTTPXClientInstrumentor, PsycopgInstrumentor, RedisInstrumentor):
        instrumentor().instrument()
    RequestsInstrumentor().instrument()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("--order", choices=("ags-first", "contrib-first"), default="ags-first")
    args = parser.parse_args()

    said: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("agentscope").addHandler(handler)

    steps = [lambda: ags.init(service_name="support-agent", store=args.store), _contrib]
    for step in steps if args.order == "ags-first" else reversed(steps):
        step()

    import httpx
    import openai
    import psycopg
    import redis
    import requests
    import sqlalchemy

    server = SimServer(PROFILE).start()
    web = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{web.server_port}/status"
    client = openai.OpenAI(base_url=server.base_url, api_key="sim", max_retries=0)
    cache = redis.Redis(host="127.0.0.1", port=6379)
    engine = sqlalchemy.create_engine(POSTGRES.replace("postgresql://", "postgresql+psycopg://"))
    tasks = []
    try:
        with psycopg.connect(POSTGRES, autocommit=True) as conn:

            def task() -> None:
                with ags.span("lookup_order", kind="tool"):
                    conn.execute("SELECT pg_sleep(0.03)").fetchall()
                    with engine.connect() as orm:
                        orm.execute(sqlalchemy.text("SELECT pg_sleep(0.02)")).fetchall()
                    cache.set("agentscope:contrib", "1")
                    cache.get("agentscope:contrib")
                    httpx.get(url).raise_for_status()
                    requests.get(url, timeout=10).raise_for_status()
                client.chat.completions.create(model="gpt-oss-120b", messages=MESSAGES)

            for _ in range(ROUNDS):
                first = len(server.served)
                ags.task("support_task")(task)()
                tasks.append({"served": [s._asdict() for s in server.served[first:]], "db": 4, "http": 2})
    finally:
        ags.shutdown()
        server.stop()
        web.shutdown()
        engine.dispose()
    print(json.dumps({"tasks": tasks, "said": said}))


if __name__ == "__main__":
    main()
