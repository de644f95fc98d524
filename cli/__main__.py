"""``python -m agentscope.cli`` runs the ``agentscope`` command, started as the console script is."""

from agentscope.cli import main

main()
