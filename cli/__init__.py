"""The ``agentscope`` command: parse arguments, call the core, render with rich."""

from agentscope.cli.app import app, main

__all__ = ["app", "main"]
