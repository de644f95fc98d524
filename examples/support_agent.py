"""A customer-support agent: mostly waiting on systems, not on the model.

Each ticket reads the customer from SQLite, searches a knowledge base, calls a
slow billing API that sometimes answers 429 (retried with tenacity, backing
off), and drafts the reply with one LLM call through the openai SDK, which
``ags.init()`` instruments automatically.  Its p95 is tools, database and
retries: a faster inference chip helps it little.

    python -m agentscope.examples.support_agent --tasks 30 --concurrency 4
"""

from __future__ import annotations

import random
import sqlite3
import tempfile
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import openai
import tenacity
from agentscope.examples._common import main_for, provider, run_tasks

import agentscope as ags
from agentscope.sim import Profile

PROFILE = Profile(queue_ms=15, prefill_ms=40, tokens_per_s=900, output_tokens=60, jitter=0.3)
ARTICLES = [
    f"article {n}: how to handle {topic}"
    for n, topic in enumerate(
        ["refunds", "late delivery", "double charge", "password reset", "plan upgrade", "invoice copy"] * 40
    )
]


class RateLimited(Exception):
    """The billing API answered 429."""


class _Billing(BaseHTTPRequestHandler):
    """A slow billing service that rate-limits one request in five."""

    def do_GET(self) -> None:
        time.sleep(random.uniform(0.08, 0.25))
        if random.random() < 0.2:
            self.send_response(429)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"balance": 42.0, "last_payment": "2026-11-01"}')

    def log_message(self, *args: object) -> None:
        pass


@ags.db(system="sqlite", operation="SELECT")
def load_customer(db: Path, customer_id: int) -> tuple:
    with sqlite3.connect(db) as con:
        time.sleep(0.01)  # a remote database would take longer than a local file
        return con.execute("SELECT id, name, plan FROM customers WHERE id = ?", (customer_id,)).fetchone()


@ags.tool("search_kb")
def search_kb(question: str) -> list[str]:
    words = set(question.split())
    scored = sorted(ARTICLES, key=lambda a: -len(words & set(a.split())))  # real CPU work
    time.sleep(random.uniform(0.05, 0.15))  # the vector index's own latency
    return scored[:3]


def billing_status(base: str, customer_id: int) -> bytes:
    """GET the customer's balance, retrying 429s with exponential backoff (tenacity)."""
    attempt = 0

    @tenacity.retry(
        retry=tenacity.retry_if_exception_type(RateLimited),
        wait=tenacity.wait_exponential(multiplier=0.1, max=1.0),
        stop=tenacity.stop_after_attempt(6),
        sleep=_sleep_as_backoff,
    )
    def call() -> bytes:
        nonlocal attempt
        attempt += 1
        http = {"http.request.method": "GET", "server.address": "billing", "agentscope.attempt": attempt}
        with ags.span("GET billing", kind="http", **http) as span:
            try:
                with urllib.request.urlopen(f"{base}/balance/{customer_id}", timeout=5) as response:
                    span.set_attribute("http.response.status_code", response.status)
                    return response.read()
            except urllib.error.HTTPError as error:
                span.set_attribute("http.response.status_code", error.code)
                if error.code == 429:
                    raise RateLimited() from None
                raise

    return call()


def _sleep_as_backoff(seconds: float) -> None:
    with ags.backoff(planned_s=seconds):
        time.sleep(seconds)


def run(tasks: int = 30, concurrency: int = 4, base_url: str | None = None) -> None:
    """Resolve ``tasks`` tickets."""
    billing = ThreadingHTTPServer(("127.0.0.1", 0), _Billing)
    threading.Thread(target=billing.serve_forever, daemon=True).start()
    billing_url = f"http://127.0.0.1:{billing.server_port}"
    with tempfile.TemporaryDirectory() as tmp, provider(base_url, PROFILE) as llm_url:
        db = Path(tmp) / "crm.sqlite"
        with sqlite3.connect(db) as con:
            con.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, plan TEXT)")
            con.executemany(
                "INSERT INTO customers VALUES (?, ?, ?)",
                [(i, f"customer {i}", random.choice(["free", "pro"])) for i in range(100)],
            )
        client = openai.OpenAI(base_url=llm_url, api_key="sim")

        @ags.task("resolve_ticket")
        def resolve_ticket(i: int) -> str:
            customer = load_customer(db, i % 100)
            question = random.choice(["refund for double charge", "late delivery", "invoice copy please"])
            articles = search_kb(question)
            balance = billing_status(billing_url, customer[0])
            reply = client.chat.completions.create(
                model="gpt-oss-20b",
                messages=[
                    {"role": "system", "content": "\n".join(articles)},
                    {"role": "user", "content": f"{question}; balance {balance.decode()}"},
                ],
            )
            ags.accept(bool(reply.choices[0].message.content))
            return reply.choices[0].message.content

        try:
            run_tasks(resolve_ticket, tasks, concurrency)
        finally:
            billing.shutdown()


if __name__ == "__main__":
    main_for(run, __doc__.splitlines()[0], tasks=30, concurrency=4)
