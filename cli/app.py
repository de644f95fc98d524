"""The Typer application behind the ``agentscope`` console script."""

from __future__ import annotations

import typer

from agentscope import __version__

app = typer.Typer(
    name="agentscope",
    help="Where does your agents' p95 go, and would a faster inference chip help?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"agentscope {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Instrument agents, store their traces, blame the tail latency, budget the hardware."""


def main() -> None:
    app()
