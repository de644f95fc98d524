"""A simulated LLM provider on loopback: OpenAI-compatible chat completions with known latency.

Tests, examples and the demo point the real ``openai`` SDK at it (``base_url``)
and get responses whose queue, prefill and decode times are set by a
:class:`Profile`, optionally reported back Groq-style in ``usage`` — so the
whole pipeline can be checked against a ground truth with no network.

    with serve(Profile(prefill_ms=80, tokens_per_s=400)) as base_url:
        client = openai.OpenAI(base_url=base_url, api_key="sim")
"""

from typing import TYPE_CHECKING

from agentscope.sim.profile import Profile

if TYPE_CHECKING:
    from agentscope.sim.server import SimServer, app_for, serve

__all__ = ["Profile", "SimServer", "app_for", "serve"]


def __getattr__(name: str) -> object:
    """The server's names load on first use: they need the ``demo`` extra's web stack, ``Profile`` not."""
    if name in ("SimServer", "app_for", "serve"):
        from agentscope.sim import server

        return getattr(server, name)
    raise AttributeError(f"module 'agentscope.sim' has no attribute {name!r}")
