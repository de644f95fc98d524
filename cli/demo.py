"""``agentscope demo``: three example agents against simulated providers, then their blame."""

from __future__ import annotations

import time
from pathlib import Path

from agentscope.cli.render import print_blame
from agentscope.examples import coding_agent, research_agent, support_agent
from rich.console import Console

import agentscope as ags
from agentscope.analysis import report
from agentscope.analysis.pipeline import task_results
from agentscope.store.shared import SharedStore

AGENTS = (
    ("support agent", support_agent, "resolve_ticket", 4),
    ("coding agent", coding_agent, "fix_bug", 4),
    ("research agent", research_agent, "research_question", 4),
)


def run_demo(tasks: int, store: Path, console: Console) -> None:
    """Run the three agents into ``store`` and print a blame report for each (one analysis pass)."""
    ags.init(service_name="agentscope-demo", store=store)
    try:
        for title, module, _, concurrency in AGENTS:
            started = time.perf_counter()
            with console.status(f"running the {title}: {tasks} tasks against a simulated provider"):
                module.run(tasks=tasks, concurrency=concurrency)
            console.print(
                f"[dim]ran the {title}: {tasks} tasks in {time.perf_counter() - started:.1f} s[/dim]"
            )
    finally:
        ags.shutdown()
    shared = SharedStore(store)
    results = task_results(shared, report.variants(report.DEFAULT_SCENARIOS))  # keeps the task table's rows
    slowest = max(results, key=lambda r: r.duration_ns).trace_id if results else None
    for title, module, task_name, _ in AGENTS:
        tasks_of_agent = [r for r in results if r.name == task_name]
        if tasks_of_agent:
            console.rule(f"[bold]{title}[/bold] — {module.__doc__.splitlines()[0]}")
            print_blame(report.blame(tasks_of_agent), console)
    console.rule()
    console.print(
        f"Next: [bold]agentscope budget --store {store} --tasks-per-month 40000[/bold] for the cost side, "
        f"[bold]agentscope show {slowest} --store {store}[/bold] for the slowest task's waterfall.",
        highlight=False,
    )
