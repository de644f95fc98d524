"""The ``agentscope`` command: parse arguments, call the core, render with rich.

The Typer app is ``agentscope.cli.app.app``.  This package imports none of it
until ``main`` runs: ``blame``'s worker processes, started from the console
script, import this package to find ``main`` and need none of the CLI.
"""

from __future__ import annotations

__all__ = ["main"]


def main() -> None:
    """The console script (``agentscope.cli.app.main``)."""
    from agentscope.cli.app import main as run

    run()
