"""Logfire configured before agentscope, in one process: both packages' spans in one trace, both
packages' exporters receiving all of them, and the user's service name still selectable (DESIGN §14).

Each scenario runs in a process of its own: Logfire and agentscope set the process's global tracer
provider, which OpenTelemetry lets be set once.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from harness import require

from agentscope.analysis.pipeline import blame_store
from agentscope.store import Store
from agentscope.store.selection import Selection

require("logfire")

SCENARIO = textwrap.dedent(
    """
    import json, logging, sys
    import logfire
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    theirs = InMemorySpanExporter()
    logfire.configure(send_to_logfire=False, console=False, service_name="web-app",
                      additional_span_processors=[SimpleSpanProcessor(theirs)], inspect_arguments=False)
    warnings = []
    logging.getLogger("agentscope").addHandler(logging.Handler())
    logging.getLogger("agentscope").handlers[-1].emit = lambda record: warnings.append(record.getMessage())

    import agentscope as ags
    ags.init(service_name="support-agent", store=sys.argv[1], instrument=False)

    @ags.tool("lookup")
    def lookup():
        with logfire.span("cache read"):
            return 1

    @ags.llm(model="gpt-oss-120b")
    def plan():
        ags.current_llm().usage(input_tokens=100, output_tokens=10)

    @ags.task("resolve_ticket")
    def resolve():
        plan()
        return lookup()

    with logfire.span("POST /tickets"):
        resolve()
    ags.shutdown()
    print(json.dumps({"theirs": sorted(span.name for span in theirs.get_finished_spans()),
                      "warnings": warnings}))
    """
)


def test_logfire_configured_first_is_joined_and_both_keep_every_span(tmp_path):
    store = tmp_path / "store.duckdb"
    result = subprocess.run(
        [sys.executable, "-c", SCENARIO, str(store)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.splitlines()[-1])
    assert seen["warnings"] == []
    assert {"resolve_ticket", "execute_tool lookup", "POST /tickets", "cache read"} <= set(seen["theirs"])
    with Store(store, read_only=True) as opened:
        rows = opened.con.execute("SELECT name, trace_id, service FROM spans").fetchall()
        names = {name for name, _, _ in rows}
        assert {"resolve_ticket", "execute_tool lookup", "POST /tickets", "cache read"} <= names
        assert len({trace for _, trace, _ in rows}) == 1  # one trace: Logfire's span is the task's parent
        assert {service for _, _, service in rows} == {"web-app"}
        report = blame_store(opened, selection=Selection(service="support-agent"))
        assert report is not None and report["tasks"]["names"] == ["resolve_ticket"]
        assert blame_store(opened, selection=Selection(service="web-app"))["tasks"]["count"] == 1
