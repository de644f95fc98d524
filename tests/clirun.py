"""The ``agentscope`` command as a user runs it: a process of its own, its output captured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest


def cli(
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 300,
    columns: int = 120,
    cwd: str | os.PathLike[str] | None = None,
) -> subprocess.CompletedProcess:
    """Run ``agentscope ARGS`` on a terminal ``columns`` wide, with ``env`` added to the environment,
    in ``cwd`` (default: the tests' own)."""
    return subprocess.run(
        [sys.executable, "-m", "agentscope.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": str(columns), **(env or {})},
        cwd=cwd,
    )


def cli_json(*args: str, env: dict[str, str] | None = None) -> dict:
    """``agentscope ARGS --format json``, which must succeed, as the document it printed."""
    result = cli(*args, "--format", "json", env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def serving(
    *args: str, ready: str, env: dict[str, str] | None = None, wait_s: float = 60
) -> subprocess.Popen:
    """Start ``agentscope ARGS`` (a server) in its own process; return it once ``ready`` answers any
    HTTP status, or fail the test with the server's stderr if it does not within ``wait_s``."""
    process = subprocess.Popen(
        [sys.executable, "-m", "agentscope.cli", *args],
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(ready, timeout=1).close()
            return process
        except urllib.error.HTTPError:  # it answers
            return process
        except OSError:
            time.sleep(0.1)
    process.kill()
    pytest.fail(f"agentscope {args[0]} did not start: {process.communicate()[1]}")
