"""An instrumented app that forks and spawns worker processes, as a user's app does (one scenario a run).

Run as a script::

    python processes.py SCENARIO STORE

It records its tasks into STORE (``ags.init`` at import, as an app module does, so spawned children
set up the same way), runs the scenario and prints one JSON line of what it did; the test reads the
store beside it.
"""

from __future__ import annotations

import concurrent.futures
import json
import multiprocessing
import os
import sys
import threading
import time
from pathlib import Path

import agentscope as ags

ags.init(service_name="workers", store=sys.argv[2], instrument=False)


@ags.tool("lookup")
def lookup(n: int) -> int:
    return n * 2


@ags.task("resolve")
def resolve(n: int) -> int:
    return lookup(n)


class Desk:
    @ags.task("answer")
    def answer(self, n: int) -> int:
        return lookup(n)


def _stored(name: str) -> int:
    """How many tasks named ``name`` the store holds now (read as any other process reads it)."""
    from agentscope.store.shared import SharedStore

    if not Path(sys.argv[2]).exists():
        return 0
    sql = "SELECT count(*) FROM spans WHERE name = ?"
    return SharedStore(sys.argv[2]).read(lambda store: store.con.execute(sql, [name]).fetchone()[0])


def pool() -> dict:
    """A fork pool and a fork executor, a function and a method, closed and joined."""
    with multiprocessing.get_context("fork").Pool(2) as workers:
        results = workers.map(resolve, range(6))
        workers.close()
        workers.join()
    context = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=context) as executor:
        results += list(executor.map(Desk().answer, range(4)))
    return {"results": results}


def pool_left() -> dict:
    """Pools left by their ``with`` block alone, which terminates the workers (kills them at once): fork
    and spawn."""
    results = []
    for method in ("fork", "spawn"):
        with multiprocessing.get_context(method).Pool(2) as workers:
            results += workers.map(resolve, range(6))
    return {"results": results}


def spawned() -> dict:
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=context) as executor:
        return {"results": list(executor.map(resolve, range(4)))}


def process() -> dict:
    """A forked Process whose target ends within the writer's interval: it leaves by ``os._exit``."""
    child = multiprocessing.get_context("fork").Process(target=resolve, args=(1,))
    child.start()
    child.join(timeout=60)
    return {"exitcode": child.exitcode}


def worker() -> dict:
    """A long-lived forked worker (gunicorn's, Celery's): its spans reach the store while it runs."""
    done = Path(sys.argv[2] + ".done")
    pid = os.fork()
    if pid == 0:
        resolve(1)
        deadline = time.monotonic() + 30
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        os._exit(0)
    started = time.monotonic()
    seen_after = None
    while time.monotonic() - started < 10:
        if _stored("resolve"):
            seen_after = time.monotonic() - started
            break
        time.sleep(0.1)
    done.touch()
    os.waitpid(pid, 0)
    return {"seen_after_s": seen_after}


def busy() -> dict:
    """Forks while another thread keeps recording, so forks land during the store's writes."""
    stop = threading.Event()
    produced = 0

    def produce() -> None:
        nonlocal produced
        while not stop.is_set() and produced < 100_000:
            resolve(produced)
            produced += 1

    producer = threading.Thread(target=produce)
    producer.start()
    exits = []
    try:
        for n in range(20):
            child = multiprocessing.get_context("fork").Process(target=Desk().answer, args=(n,))
            child.start()
            child.join(timeout=60)
            exits.append(child.exitcode)
            time.sleep(0.05)
    finally:
        stop.set()
        producer.join()
    return {"exits": exits, "produced": produced}


SCENARIOS = {
    "pool": pool,
    "pool_left": pool_left,
    "spawned": spawned,
    "process": process,
    "worker": worker,
    "busy": busy,
}

if __name__ == "__main__":
    outcome = SCENARIOS[sys.argv[1]]()
    ags.shutdown()
    print(json.dumps(outcome))
