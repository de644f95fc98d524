"""The ``agentscope`` command: parse arguments, call the core, render with rich.

The Typer app is ``agentscope.cli.app.app``.  This package imports none of it
until ``main`` runs: ``blame``'s worker processes, started from the console
script, import this package to find ``main`` and need none of the CLI.
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    """The console script (``agentscope.cli.app.main``); without the ``cli`` extra, a one-line message."""
    from agentscope.cli.extras import missing_extra

    message = missing_extra("cli", "the agentscope command")
    if message is not None:
        sys.stderr.write(f"error: {message}\n")
        raise SystemExit(2)
    from agentscope.cli.app import main as run

    run()
