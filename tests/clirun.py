"""The ``agentscope`` command as a user runs it: a process of its own, its output captured."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 300, columns: int = 120
) -> subprocess.CompletedProcess:
    """Run ``agentscope ARGS`` on a terminal ``columns`` wide, with ``env`` added to the environment."""
    return subprocess.run(
        [sys.executable, "-m", "agentscope.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": str(columns), **(env or {})},
    )


def cli_json(*args: str, env: dict[str, str] | None = None) -> dict:
    """``agentscope ARGS --format json``, which must succeed, as the document it printed."""
    result = cli(*args, "--format", "json", env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)
