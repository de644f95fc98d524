"""``python -m agentscope.cli`` runs the ``agentscope`` command."""

from agentscope.cli.app import main

main()
