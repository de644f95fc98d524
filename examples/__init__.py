"""Example agents, each a small real program instrumented with agentscope.

Installed as ``agentscope.examples`` so that ``agentscope demo`` can run them;
each also runs on its own: ``python -m agentscope.examples.support_agent --help``.
"""
