"""agentscope budget: markdown, JSON and an HTML report checked in a real headless Chromium."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import jsonschema
import pytest
from agentscope.cli.app import app
from test_cli_blame import store_path  # noqa: F401 - the same hand-built store
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
runner = CliRunner()


def budget(*args: str) -> str:
    result = runner.invoke(app, ["budget", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_json_validates_and_prices_the_store(store_path):  # noqa: F811
    doc = json.loads(budget("--store", str(store_path), "--format", "json", "--tasks-per-month", "40000"))
    jsonschema.validate(doc, json.loads((ROOT / "docs" / "schemas" / "budget.v1.schema.json").read_text()))
    assert doc["scope"]["tasks"] == 20
    assert doc["usage"]["per_task"]["input_tokens"] == 100
    options = {o["name"]: o for o in doc["options"]}
    assert options["groq-gpt-oss-120b"]["monthly_cost"] == pytest.approx(40_000 * 100 * 0.15 / 1e6)
    assert options["lambda-b200-x1"]["monthly_cost"] == pytest.approx(5102.70)
    assert doc["latency"]["verdict"].startswith("A 3.6× faster inference chip")
    curve = doc["latency"]["curve"]
    assert [p["inference_speedup"] for p in curve][:3] == [1.0, 1.25, 1.5] and curve[-1][
        "inference_speedup"
    ] == "inf"
    assert curve[0]["p95_ms"] == pytest.approx(doc["latency"]["latency_ms"]["p95"])
    assert curve[-1]["p95_ms"] == pytest.approx(118 - 30)


def test_markdown_reads_on_its_own(store_path, tmp_path):  # noqa: F811
    out = tmp_path / "budget.md"
    budget("--store", str(store_path), "--tasks-per-month", "40000", "--output", str(out))
    text = out.read_text()
    for heading in (
        "# Inference budget: ticket",
        "## Would faster inference help?",
        "### What if",
        "## Tokens",
        "## Monthly cost",
        "## Break-even",
        "## Assumptions",
        "## Sources",
        "## Method",
    ):
        assert heading in text, heading
    assert "$5,102.70" in text and "40,000 tasks a month" in text and "730 hours" in text


def test_model_map_and_pricing_file(store_path, tmp_path):  # noqa: F811
    pricing = tmp_path / "prices.toml"
    pricing.write_text(
        '[[per_token]]\nname = "ours"\nprovider = "us"\nmodel = "house-model"\n'
        "input_per_million = 1.0\noutput_per_million = 2.0\n"
    )
    doc = json.loads(
        budget(
            "--store",
            str(store_path),
            "--format",
            "json",
            "--pricing",
            str(pricing),
            "--model-map",
            "gpt-oss-120b=house-model",
            "--tasks-per-month",
            "1000",
        )
    )
    (option,) = doc["options"]
    assert option["name"] == "ours" and option["monthly_cost"] == pytest.approx(1000 * 100 / 1e6)
    bad = runner.invoke(app, ["budget", "--store", str(store_path), "--pricing", str(tmp_path / "none.toml")])
    assert bad.exit_code == 2 and "cannot read pricing file" in bad.output
    bad = runner.invoke(app, ["budget", "--store", str(store_path), "--model-map", "nope"])
    assert bad.exit_code == 2 and "TRACED=CANDIDATE" in bad.output
    typo = ["--pricing", str(pricing), "--model-map", "gpt-oss-120b=house"]
    bad = runner.invoke(app, ["budget", "--store", str(store_path), *typo])
    assert bad.exit_code == 2 and "Traceback" not in bad.output
    expected = (
        f"--model-map 'gpt-oss-120b=house': {pricing} prices no model 'house' (its models: house-model)"
    )
    assert expected in " ".join(bad.output.split())


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def test_html_opens_in_chromium_with_every_chart(store_path, tmp_path):  # noqa: F811
    executable = chromium()
    if executable is None:
        if os.environ.get("AGENTSCOPE_REQUIRE_SERVICES") == "1":
            pytest.fail("Chromium is required here (install Debian's chromium package)")
        pytest.skip("Chromium is not installed (Debian package chromium)")
    playwright = pytest.importorskip("playwright.sync_api")
    page_file = tmp_path / "budget.html"
    budget("--store", str(store_path), "--format", "html", "--output", str(page_file))
    html = page_file.read_text()
    assert "<script" in html and not re.search(r"<(script|link)[^>]+(src|href)=[\"']?https?:", html)
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=executable,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 2400})
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.route(
                "**/*",
                lambda route: (
                    route.abort() if not route.request.url.startswith("file:") else route.continue_()
                ),
            )
            page.goto(page_file.as_uri())
            page.wait_for_selector("#chart-3 .main-svg", timeout=30_000)
            assert errors == []
            assert page.locator("#chart-0 .barlayer .point").count() == 8
            assert page.locator("#chart-1 .scatterlayer .trace").count() == 2
            assert page.locator("#chart-2 .barlayer .point").count() > 0
            assert page.locator("#chart-3 .scatterlayer .trace").count() >= 3
            assert "would cut p95" in page.locator(".verdict").inner_text()
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "budget.png"), full_page=True)
        finally:
            browser.close()
    assert (ARTIFACTS / "budget.png").stat().st_size > 10_000
