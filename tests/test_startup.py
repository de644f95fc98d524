"""What starting the CLI, or a blame worker, loads: only what the command needs, so start-up stays short."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from agentscope.ingest import FORMATS, IngestSummary, Problem, detect, ingest


def _loaded_after(statement: str) -> set[str]:
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(done.stdout))


@pytest.mark.parametrize(
    ("statement", "absent"),
    [
        # The CLI: the trace readers, the OTLP receiver's web stack and the SDK load with their commands.
        (
            "import agentscope.cli.app",
            {
                "agentscope.ingest.loader",
                "agentscope.ingest.receiver",
                "starlette",
                "opentelemetry.sdk.trace",
            },
        ),
        # A blame worker process imports the analysis, and nothing of the SDK or the readers.
        (
            "import agentscope.analysis.tasks",
            {"agentscope.sdk", "opentelemetry.sdk.trace", "agentscope.ingest.loader", "typer"},
        ),
    ],
)
def test_start_up_loads_only_what_is_used(statement, absent):
    loaded = _loaded_after(statement)
    assert statement.split()[-1] in loaded
    assert not absent & loaded


def test_the_packages_names_load_on_first_use():
    import agentscope

    assert callable(ingest) and callable(detect) and "otlp-json-lines" in FORMATS
    assert IngestSummary.__name__ == "IngestSummary" and Problem.__name__ == "Problem"
    assert callable(agentscope.task) and agentscope.Instrumentor.__name__ == "Instrumentor"
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        agentscope.ingest.nothing  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        agentscope.nothing  # noqa: B018
