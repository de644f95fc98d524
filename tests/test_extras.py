"""A command whose extra is not installed says which one to install, in one line, with no traceback.

The package is made absent the way Python itself sees a missing module: ``sys.modules[name] = None``
makes ``import name`` fail and ``importlib.util.find_spec(name)`` return None. (.ci/run also runs the
base install, where they are really absent.)
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from agentscope.cli.extras import EXTRAS, missing_extra


def _run_without(module: str, *argv: str) -> subprocess.CompletedProcess:
    code = (
        f"import sys\nsys.modules[{module!r}] = None\nsys.argv = ['agentscope', *{list(argv)!r}]\n"
        "from agentscope.cli import main\nmain()\n"
    )
    env = {**os.environ, "COLUMNS": "200"}  # the message on one line, as on a wide terminal
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.parametrize(
    ("missing", "argv", "extra"),
    [
        ("typer", ["--help"], "cli"),
        ("plotly", ["ui", "--port", "0"], "ui"),
        ("uvicorn", ["serve", "--port", "0"], "serve"),
        ("openai", ["probe", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--yes"], "probe"),
        ("tenacity", ["demo", "--tasks", "1"], "demo"),
    ],
)
def test_a_command_without_its_extra_names_the_extra(missing, argv, extra, tmp_path):
    store = [] if argv == ["--help"] else ["--store", str(tmp_path / "s.duckdb")]
    done = _run_without(missing, *argv, *store)
    assert done.returncode == 2, done.stderr
    assert f"pip install 'agentscope[{extra}]'" in done.stderr
    assert missing in done.stderr and "Traceback" not in done.stderr


def test_every_extra_of_the_test_environment_is_found():
    assert all(missing_extra(extra, extra) is None for extra in EXTRAS)


def test_the_extras_named_in_cli_match_pyproject():
    """cli/extras.py names each extra pyproject.toml declares for a command (and nothing more)."""
    from pathlib import Path

    import tomllib

    declared = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    extras = declared["project"]["optional-dependencies"]
    assert set(EXTRAS) <= set(extras)
    for extra, modules in EXTRAS.items():
        requirements = " ".join(extras[extra]).lower()
        for module in modules:
            assert module in requirements, (extra, module)
