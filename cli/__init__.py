"""The ``agentscope`` command: parse arguments, call the core, render with rich.

The Typer app is ``agentscope.cli.app.app``.  This package imports none of it
until ``main`` runs: ``blame``'s worker processes, started from the console
script, import this package to find ``main`` and need none of the CLI.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["main"]


def main() -> None:
    """The console script (``agentscope.cli.app.main``); without the ``cli`` extra, a one-line message."""
    from agentscope.cli.extras import missing_extra

    message = missing_extra("cli", "the agentscope command")
    if message is not None:
        sys.stderr.write(f"error: {message}\n")
        raise SystemExit(2)
    with _kept_from_the_collector():
        from agentscope.cli.app import main as run
    run()


@contextmanager
def _kept_from_the_collector() -> Iterator[None]:
    """Python's cyclic collector paused while the app is imported, which makes hundreds of thousands of
    objects that live as long as the process, then those frozen (``gc.freeze``): neither the command's
    collections nor the last one at exit walk them again.  A blame from the task table of 500,000
    tasks ended 45 ms sooner (the exit's collection), its imports about 20 ms."""
    gc.disable()
    try:
        yield
        gc.freeze()
    finally:
        gc.enable()
