"""Run a command and measure it whole: wall time from start to exit, peak RSS of its process tree."""

from __future__ import annotations

import os
import subprocess
import threading
import time


def tree_rss(root: int) -> int:
    """Resident bytes of ``root`` and all its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(entry), int(fields[1])
        children.setdefault(ppid, []).append(pid)
        rss[pid] = int(fields[21]) * page
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total


def measure(argv: list[str], env: dict[str, str] | None = None) -> tuple[str, float, float]:
    """(stdout, wall seconds from start to exit, peak RSS of the process tree in MB), sampled every 100 ms."""
    start = time.perf_counter()
    process = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env={**os.environ, **(env or {})}
    )
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss(process.pid))
            done.wait(0.1)

    sampler = threading.Thread(target=sample)
    sampler.start()
    out, _ = process.communicate(timeout=3600)
    elapsed = time.perf_counter() - start
    done.set()
    sampler.join()
    if process.returncode != 0:
        raise SystemExit(f"{argv[:3]} failed ({process.returncode})")
    return out, elapsed, peak / 1e6
