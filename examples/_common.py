"""What the example agents share: running N tasks with some concurrency, against a provider."""

from __future__ import annotations

import argparse
import contextlib
import contextvars
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import agentscope as ags
from agentscope.sim import Profile, SimServer


def run_tasks(task: Callable[[int], object], tasks: int, concurrency: int) -> None:
    """Run ``task(i)`` for i in range(tasks), ``concurrency`` at a time, each in its own context copy."""
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        futures = [pool.submit(contextvars.copy_context().run, task, i) for i in range(tasks)]
        for future in futures:
            future.result()


def in_context(fn: Callable[..., object]) -> Callable[..., object]:
    """``fn`` bound to a copy of the caller's context, so spans it makes in a pool thread nest right."""
    context = contextvars.copy_context()
    return lambda *args: context.run(fn, *args)


@contextlib.contextmanager
def provider(base_url: str | None, profile: Profile) -> Iterator[str]:
    """The given OpenAI-compatible base URL, or a simulated provider with ``profile`` for the block."""
    if base_url:
        yield base_url
        return
    server = SimServer(profile).start()
    try:
        yield server.base_url
    finally:
        server.stop()


def parser(description: str, tasks: int, concurrency: int) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--tasks", type=int, default=tasks, help="how many tasks to run")
    p.add_argument("--concurrency", type=int, default=concurrency, help="tasks in flight at once")
    p.add_argument("--store", default="agentscope.duckdb", help="where the spans go")
    p.add_argument("--base-url", default=None, help="an OpenAI-compatible API (default: a simulated one)")
    return p


def main_for(run: Callable[..., None], description: str, tasks: int, concurrency: int) -> None:
    args = parser(description, tasks, concurrency).parse_args()
    ags.init(service_name=run.__module__.rsplit(".", 1)[-1], store=args.store)
    try:
        run(tasks=args.tasks, concurrency=args.concurrency, base_url=args.base_url)
    finally:
        ags.shutdown()
    print(f"{args.tasks} tasks written to {args.store}; now run: agentscope blame --store {args.store}")
