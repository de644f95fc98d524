"""One module per third-party library, each an :class:`agentscope.Instrumentor`.

Integrations are registered in pyproject.toml under the ``agentscope.instrumentors``
entry-point group; ``agentscope.instrument()`` finds them there.
"""
