"""End to end: ``agentscope demo`` runs three agents whose verdicts point different ways."""

from __future__ import annotations

import json
from functools import partial

import clirun

cli = partial(clirun.cli, columns=160, timeout=600)


def test_demo_verdicts_differ_in_the_expected_direction(tmp_path):
    store = tmp_path / "demo.duckdb"
    demo = cli("demo", "--tasks", "8", "--store", str(store))
    assert demo.returncode == 0, demo.stderr
    assert demo.stdout.count("faster inference chip would cut p95") == 3
    flat = " ".join(demo.stdout.split())
    assert "agentscope budget --store" in flat and "agentscope show" in flat
    reports = {}
    for task in ("resolve_ticket", "fix_bug", "research_question"):
        result = cli("blame", "--store", str(store), "--task", task, "--format", "json")
        assert result.returncode == 0, result.stderr
        reports[task] = json.loads(result.stdout)
    change = {
        task: next(w for w in r["whatif"] if w["scenario"] == "inference x3.6")["p95_change"]
        for task, r in reports.items()
    }
    assert change["resolve_ticket"] > change["fix_bug"]  # a faster chip cuts support's p95 by less
    coding = {row["category"]: row["ms"] for row in reports["fix_bug"]["budget"]}
    assert max(coding, key=coding.get) == "inference"
    support = {row["category"]: row["ms"] for row in reports["resolve_ticket"]["budget"]}
    assert support["inference"] < support["tool"] + support["retry"] + support["db"] + support["network"]
    research = {row["category"]: row for row in reports["research_question"]["budget"]}
    assert (
        research["inference"]["components"]["prefill"] > 0
        and research["inference"]["components"]["decode"] > 0
    )
