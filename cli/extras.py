"""Which optional extra a command needs, and the message that says how to install it.

The base install records spans (what a production image needs); the command line and each of its
heavier commands come with an extra (docs/install.md).  A command whose extra is missing says so in
one line instead of failing on an import.
"""

from __future__ import annotations

import importlib.util

EXTRAS: dict[str, tuple[str, ...]] = {
    "cli": ("typer", "rich", "numpy"),
    "ui": ("starlette", "uvicorn", "plotly"),
    "serve": ("starlette", "uvicorn"),
    "probe": ("openai",),
    "demo": ("openai", "tenacity", "starlette", "uvicorn"),
}
"""Each extra of pyproject.toml, by the modules that tell it is installed."""


def missing_extra(extra: str, what: str) -> str | None:
    """A message naming the extra ``what`` needs and how to install it, or None when it is installed."""
    missing = [module for module in EXTRAS[extra] if importlib.util.find_spec(module) is None]
    if not missing:
        return None
    return (
        f"{what} needs agentscope's {extra!r} extra (missing: {', '.join(missing)}): "
        f"pip install 'agentscope[{extra}]'"
    )
