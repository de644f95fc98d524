"""Timing tests' guard against the test session's own heap."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def session_heap_frozen() -> Iterator[None]:
    """Keep the objects earlier tests left behind out of the garbage collector's passes.

    Late in a full run the pytest process holds some 650,000 objects, and a full collection of them
    takes 0.4 s on the reference machine.  One landing inside a measured task is a stall that no
    stopwatch, provider or span edge accounts for (it once pushed a peer's model time past its ±10%
    bar).  Frozen, they are skipped; what the measured code allocates is still collected as usual.
    """
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
