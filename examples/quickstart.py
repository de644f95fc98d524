"""The smallest instrumented agent: decorate, run, and find the spans in the store.

    python examples/quickstart.py [--tasks N] [--store PATH]

Each task plans, looks a customer up, searches a knowledge base, waits for a
rate limiter, asks a (simulated) model and sometimes retries.  The spans land in
a DuckDB file; the script prints how many of each kind were stored.
"""

from __future__ import annotations

import argparse
import random
import time

import duckdb

import agentscope as ags


@ags.db(system="sqlite", operation="SELECT")
def load_customer(customer_id: int) -> dict:
    time.sleep(0.002)
    return {"id": customer_id, "plan": "pro"}


@ags.tool("search_kb")
def search_kb(query: str) -> list[str]:
    time.sleep(random.uniform(0.005, 0.02))
    return [f"article about {query}"]


@ags.llm(model="gpt-oss-120b", provider="simulated")
def draft_reply(context: list[str]):
    call = ags.current_llm()
    time.sleep(0.01)
    call.server_timing(queue_ms=2.0, prefill_ms=7.0, decode_ms=14.0)
    for word in ["Thanks", "for", "waiting,", "here", "is", "your", "answer."]:
        time.sleep(0.002)
        yield word
    call.usage(input_tokens=50 * len(context), output_tokens=7)


@ags.step
def plan(customer: dict) -> str:
    return f"help {customer['plan']} customer"


@ags.task("resolve_ticket")
def resolve_ticket(customer_id: int) -> str:
    customer = load_customer(customer_id)
    goal = plan(customer)
    with ags.queue("rate_limiter"):
        time.sleep(random.uniform(0, 0.005))
    articles = search_kb(goal)
    if random.random() < 0.2:
        with ags.backoff(planned_s=0.01, attempt=1):
            time.sleep(0.01)
        articles = search_kb(goal)
    return " ".join(draft_reply(articles))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--store", default="agentscope.duckdb")
    args = parser.parse_args()

    ags.init(service_name="quickstart", store=args.store)
    for customer_id in range(args.tasks):
        resolve_ticket(customer_id)
    ags.shutdown()

    with duckdb.connect(args.store, read_only=True) as con:
        rows = con.execute("SELECT kind, count(*) FROM spans GROUP BY kind ORDER BY 2 DESC, 1").fetchall()
    print(f"{args.store}: {sum(n for _, n in rows)} spans")
    for kind, count in rows:
        print(f"  {kind:<8} {count}")


if __name__ == "__main__":
    main()
