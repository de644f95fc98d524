"""CPU accounting: each span reports the CPU its own code used, not its neighbours'."""

from __future__ import annotations

import asyncio
import threading
import time

import agentscope as ags
from agentscope import attributes as A


def burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_coroutine_cpu_is_its_own_beside_sleeping_coroutines(captured):
    @ags.step
    async def busy():
        for _ in range(10):
            burn(0.010)
            await asyncio.sleep(0.001)

    @ags.step
    async def sleeper():
        for _ in range(10):
            await asyncio.sleep(0.002)

    async def main():
        await asyncio.gather(busy(), *[sleeper() for _ in range(20)])

    asyncio.run(main())
    busy_ms = captured.one("busy").attributes[A.CPU_NS] / 1e6
    sleepers_ms = [s.attributes[A.CPU_NS] / 1e6 for s in captured.spans if s.name == "sleeper"]
    assert 80 <= busy_ms <= 120, busy_ms
    assert len(sleepers_ms) == 20
    assert max(sleepers_ms) < 5, sleepers_ms


def test_fifty_concurrent_coroutines_each_report_their_own_cpu(captured):
    @ags.step
    async def worker(ms: int):
        burn(ms / 1000)
        await asyncio.sleep(0)
        burn(ms / 1000)

    async def main():
        await asyncio.gather(*[worker(2 if i % 2 else 6) for i in range(50)])

    asyncio.run(main())
    cpu = sorted(s.attributes[A.CPU_NS] / 1e6 for s in captured.spans)
    assert all(3 <= c <= 7 for c in cpu[:25]), cpu[:25]
    assert all(11 <= c <= 16 for c in cpu[25:]), cpu[25:]


def test_sync_cpu_is_thread_time_and_excludes_sleep(captured):
    @ags.tool
    def work():
        burn(0.03)
        time.sleep(0.05)

    work()
    span = captured.one("execute_tool work")
    assert 25 <= span.attributes[A.CPU_NS] / 1e6 <= 40
    assert span.attributes[A.THREAD_ID] == threading.get_ident()


def test_cpu_is_inclusive_of_children_on_the_same_thread(captured):
    @ags.step
    def parent():
        burn(0.01)
        child()

    @ags.step
    def child():
        burn(0.02)

    parent()
    p, c = captured.one("parent"), captured.one("child")
    assert p.attributes[A.CPU_NS] >= c.attributes[A.CPU_NS] + 8_000_000
    assert p.attributes[A.THREAD_ID] == c.attributes[A.THREAD_ID]


def test_another_threads_cpu_is_not_counted(captured):
    @ags.step
    def waits_for_thread():
        worker = threading.Thread(target=burn, args=(0.05,))
        worker.start()
        worker.join()

    waits_for_thread()
    assert captured.one("waits_for_thread").attributes[A.CPU_NS] < 10_000_000
