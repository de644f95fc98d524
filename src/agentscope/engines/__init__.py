"""Distributed engines that run the analysis core past one machine (DESIGN §10).

Each module is optional: ``agentscope.engines.spark`` needs ``pip install 'agentscope[spark]'``.
"""
