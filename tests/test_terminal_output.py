"""The terminal pages at 80 and 120 columns: nothing wraps mid-name, lists wrap between items."""

from __future__ import annotations

import io
import json

import pytest
from agentscope.cli.render import ms_text
from clirun import cli
from tracebuild import store_row

from agentscope.store import Store
from agentscope.store.schema import rows_to_table

TRACE = f"{7:032x}"
LONG_TOOL = "execute_tool search_knowledge_base_for_similar_resolved_tickets"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Tasks with long span and tool names, nested steps, LLM calls with every component."""
    path = tmp_path_factory.mktemp("term") / "term.duckdb"
    rows = []
    for k in range(6):
        trace = TRACE if k == 0 else f"{k + 100:032x}"
        base = k * 10_000

        def row(span, parent, kind, a, b, name, trace=trace, base=base, k=k, **attributes):
            return store_row(
                trace,
                f"{k:08x}{span:08x}",
                parent and f"{k:08x}{parent:08x}",
                kind,
                base + a,
                base + b,
                name,
                **attributes,
            )

        llm = {
            "gen_ai.request.model": "llama-4-maverick-17b-128e-instruct-fp8",
            "agentscope.llm.server.queue_ms": 40,
            "agentscope.llm.server.prefill_ms": 376,
            "agentscope.llm.server.decode_ms": 566 + k,
            "gen_ai.usage.input_tokens": 900,
            "gen_ai.usage.output_tokens": 120,
        }
        rows += [
            row(
                1,
                None,
                "task",
                0,
                2400 + k * 10,
                "resolve_customer_ticket_with_escalation_policy",
                **{"agentscope.task.name": "resolve_customer_ticket_with_escalation_policy"},
            ),
            row(2, 1, "step", 5, 1100, "plan_the_next_action_given_the_conversation_so_far"),
            row(3, 2, "llm", 10, 1050, "chat llama-4-maverick-17b-128e-instruct-fp8", **llm),
            row(
                4,
                1,
                "tool",
                1100,
                1900,
                LONG_TOOL,
                **{"gen_ai.tool.name": "search_knowledge_base_for_similar_resolved_tickets"},
            ),
            row(5, 4, "http", 1120, 1880, "POST", **{"server.address": "kb-search.internal.example.com"}),
            row(
                6,
                1,
                "db",
                1900,
                1990,
                "SELECT postgresql",
                **{"db.system.name": "postgresql", "db.operation.name": "SELECT"},
            ),
            row(7, 1, "llm", 2000, 2390, "chat llama-4-maverick-17b-128e-instruct-fp8", **llm),
        ]
    with Store(path) as opened:
        opened.insert(rows_to_table(rows))
    return path


def run(width: int, *args: str) -> str:
    result = cli(*args, env={"TERM": "dumb"}, columns=width)
    assert result.returncode == 0, result.stderr
    return result.stdout


def whole_or_cut(name: str, lines: list[str]) -> str:
    """'whole' if a line holds ``name``, 'cut' if a line holds a prefix of it ending in an ellipsis."""
    if any(name in line for line in lines):
        return "whole"
    for line in lines:
        at = line.find("…")
        while at > 0:
            start = max(0, at - len(name))
            if any(name.startswith(line[s:at]) and at - s >= 4 for s in range(start, at)):
                return "cut"
            at = line.find("…", at + 1)
    raise AssertionError(
        f"{name!r} is neither whole nor cut with an ellipsis on one line:\n" + "\n".join(lines)
    )


@pytest.mark.parametrize("width", [80, 120])
def test_blame_fits_the_width_and_keeps_component_items_whole(store, width):
    lines = run(width, "blame", "--store", str(store)).splitlines()
    assert max(len(line) for line in lines) <= width
    report = json.loads(run(width, "blame", "--store", str(store), "--format", "json"))
    items = [
        f"{name} {ms_text(ms)}" for row in report["budget"] for name, ms in row["components"].items() if ms
    ]
    assert len(items) >= 3
    for item in items:
        assert any(item in line for line in lines), f"{item!r} was split across lines"
    for op in report["operations"]:
        whole_or_cut(op["name"], lines)


def test_show_fits_80_columns_and_uses_the_width_it_has(store):
    spans = [
        p["name"]
        for p in json.loads(run(120, "show", TRACE, "--store", str(store), "--format", "json"))[
            "critical_path"
        ]
    ]
    names = sorted(set(spans) | {LONG_TOOL, "POST", "plan_the_next_action_given_the_conversation_so_far"})
    shapes = {}
    for width in (80, 120):
        lines = run(width, "show", TRACE, "--store", str(store)).splitlines()
        assert max(len(line) for line in lines) <= width
        shapes[width] = {name: whole_or_cut(name, lines) for name in names}
        bars = [line for line in lines if ("█" in line or "░" in line) and "critical path" not in line]
        assert len(bars) == 7  # one row a span, none wrapped onto a second line
    whole = {width: sum(shape == "whole" for shape in shapes[width].values()) for width in shapes}
    assert whole[120] > whole[80] >= 2


@pytest.mark.parametrize(
    ("width", "expected"),
    [
        (20, ["prefill 376.0 ms,", "decode 566.4 ms,", "unsplit 12.0 ms"]),
        (40, ["prefill 376.0 ms, decode 566.4 ms,", "unsplit 12.0 ms"]),
        (60, ["prefill 376.0 ms, decode 566.4 ms, unsplit 12.0 ms"]),
        (10, ["prefill …,", "decode 5…,", "unsplit 1…"]),
    ],
)
def test_component_lists_wrap_between_items(width, expected):
    from agentscope.cli.render import Items
    from rich.console import Console

    console = Console(width=width, record=True, file=io.StringIO())
    console.print(Items(["prefill 376.0 ms", "decode 566.4 ms", "unsplit 12.0 ms"]))
    assert console.export_text().splitlines() == expected
