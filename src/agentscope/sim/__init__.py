"""A simulated LLM provider on loopback: OpenAI-compatible chat completions with known latency.

Tests, examples and the demo point the real ``openai`` SDK at it (``base_url``)
and get responses whose queue, prefill and decode times are set by a
:class:`Profile`, optionally reported back Groq-style in ``usage`` — so the
whole pipeline can be checked against a ground truth with no network.

    with serve(Profile(prefill_ms=80, tokens_per_s=400)) as base_url:
        client = openai.OpenAI(base_url=base_url, api_key="sim")
"""

from agentscope.sim.profile import Profile
from agentscope.sim.server import SimServer, app_for, serve

__all__ = ["Profile", "SimServer", "app_for", "serve"]
