"""Candidate profiles and ``blame --target`` (DESIGN §12): each LLM call takes its predicted time."""

from __future__ import annotations

import json

import jsonschema
import pytest
from agentscope.cli.app import app
from test_cli_blame import SCHEMAS, runner
from tracebuild import MS, llm_task_store, span, trace

from agentscope.analysis.profiles import CandidateProfile, Figure, ProfileError, load_presets, load_profile
from agentscope.analysis.tasks import explain


def profile(ttft_ms: float = 10, decode: float = 100, prefill: float = 0) -> CandidateProfile:
    figures = {"ttft_base_ms": Figure(ttft_ms, "test"), "decode_tokens_per_s": Figure(decode, "test")}
    if prefill:
        figures["prefill_tokens_per_s"] = Figure(prefill, "test")
    return CandidateProfile("test", "measured", "2026-12-01", figures)


def on_target(t, target: CandidateProfile) -> tuple[float, int]:
    result = explain(t, 0, targets=[target]).result
    return result.whatif_ns[-1] / MS, result.calls_without_tokens


def test_a_profile_that_reproduces_every_call_reproduces_every_task():
    exact = profile(ttft_ms=10, decode=100, prefill=1000)  # 10 ms + in/1000 s + out/100 s
    t = trace(
        span("R", None, "task", 0, 400),
        span("A", "R", "llm", 0, 160, input_tokens=100, output_tokens=5),  # 10 + 100 + 50
        span("T", "R", "tool", 160, 200),
        span("B", "R", "llm", 200, 330, input_tokens=20, output_tokens=10),  # 10 + 20 + 100
        span("C", "R", "llm", 200, 270, input_tokens=0, output_tokens=6),  # parallel with B
    )
    assert on_target(t, exact) == (pytest.approx(400), 0)


def test_calls_without_tokens_keep_their_time_and_are_counted():
    t = trace(
        span("R", None, "task", 0, 300),
        span("A", "R", "llm", 0, 200),
        span("B", "R", "llm", 200, 300, input_tokens=10, output_tokens=4),
    )
    assert on_target(t, profile(ttft_ms=0, decode=100)) == (pytest.approx(240), 1)


def test_parallel_calls_stay_parallel_and_what_waited_moves_with_them():
    t = trace(
        span("R", None, "task", 0, 300),
        span("A", "R", "llm", 0, 200, input_tokens=1, output_tokens=4),
        span("B", "R", "llm", 0, 100, input_tokens=1, output_tokens=4),
        span("C", "R", "tool", 200, 300),
    )
    assert on_target(t, profile(ttft_ms=10, decode=100)) == (pytest.approx(50 + 100), 0)


def test_failed_attempts_and_backoff_keep_their_time():
    t = trace(
        span("R", None, "task", 0, 300),
        span("L", "R", "llm", 0, 300, input_tokens=1, output_tokens=9),
        span("H", "L", "http", 0, 30, http_status=429),
        span("W", "L", "backoff", 30, 80),
    )
    assert on_target(t, profile(ttft_ms=10, decode=100)) == (pytest.approx(30 + 50 + 100), 0)


def test_presets_say_their_sources_and_bad_profiles_are_named(tmp_path):
    presets = load_presets()
    assert presets["groq-gpt-oss-120b"].value("decode_tokens_per_s") == 500
    assert presets["cerebras-gpt-oss-120b"].value("decode_tokens_per_s") == 3000
    assert all(p.kind == "reported" and all(f.source for f in p.figures.values()) for p in presets.values())
    written = tmp_path / "mine.toml"
    written.write_text(profile(prefill=800).to_toml())
    assert load_profile(written).predict_ms(800, 100) == pytest.approx(10 + 1000 + 1000)
    bad = tmp_path / "bad.toml"
    bad.write_text(
        'name = "x"\nkind = "measured"\n[figures]\ndecode_tokens_per_s = { value = -1, source = "me" }\n'
    )
    with pytest.raises(
        ProfileError, match=r"bad\.toml: figures\.decode_tokens_per_s must be a finite number ≥ 0"
    ):
        load_profile(bad)


FIGURE = '[figures]\ndecode_tokens_per_s = {{ value = {rate}, source = "me" }}\n'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('name = "x"\n' + FIGURE.format(rate=500), "a profile needs a kind, one of reported, measured"),
        (
            'name = "x"\nkind = "measured"\n' + FIGURE.format(rate="nan"),
            "decode_tokens_per_s must be a finite",
        ),
        (
            'name = "x"\nkind = "measured"\n' + FIGURE.format(rate="inf"),
            "decode_tokens_per_s must be a finite",
        ),
        ('name = "x"\nkind = "measured"\nfigures = 3\n', "figures must be a [figures] table, not 3"),
        (
            'name = "x"\nkind = "measured"\nresiduals_ms = ["a"]\n' + FIGURE.format(rate=500),
            "residuals_ms must be a list of finite numbers of ms",
        ),
        (
            'name = "x"\nkind = "measured"\ncalls = [{input_tokens = 1, output_tokens = 1, ttft_ms = nan, '
            "total_ms = 5}]\n" + FIGURE.format(rate=500),
            "calls[0] has a negative or non-finite figure",
        ),
    ],
    ids=["no-kind", "nan", "inf", "figures-not-a-table", "residuals", "call-nan"],
)
def test_profile_values_that_cannot_be_used_are_named(text, message, tmp_path):
    """A missing kind said 'not None'; NaN figures were taken, and a figures key that is not a table or
    residuals that are not numbers ended in an internal error."""
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(ProfileError) as refused:
        load_profile(path)
    assert str(refused.value).startswith(f"{path}: ") and message in str(refused.value)


def test_blame_target_rows_validate_and_name_the_best_target(tmp_path):
    store = llm_task_store(tmp_path / "t.duckdb", [(500, 300)] * 10)
    result = runner.invoke(
        app,
        [
            "blame",
            str(store),
            "--format",
            "json",
            "--target",
            "groq-gpt-oss-120b",
            "--target",
            "cerebras-gpt-oss-120b",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    jsonschema.validate(report, json.loads((SCHEMAS / "blame.v1.schema.json").read_text()))
    rows_by_target = {r["target"]: r for r in report["whatif"] if "target" in r}
    assert rows_by_target["groq-gpt-oss-120b"]["p95_ms"] == pytest.approx(100 + 300 / 500 * 1000)
    assert rows_by_target["cerebras-gpt-oss-120b"]["p95_ms"] == pytest.approx(100 + 100)
    assert report["verdict"].startswith("Of the targets, cerebras-gpt-oss-120b would bring p95")
    unknown = runner.invoke(app, ["blame", str(store), "--target", "tpu-v9"])
    assert unknown.exit_code == 2 and "unknown target 'tpu-v9'" in unknown.output


def test_budget_target_puts_each_option_beside_its_cost(tmp_path):
    store = llm_task_store(tmp_path / "t.duckdb", [(500, 300)] * 10, model="gpt-oss-120b")
    args = ["budget", str(store), "--target", "groq-gpt-oss-120b", "--target", "cerebras-gpt-oss-120b"]
    result = runner.invoke(app, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    jsonschema.validate(document, json.loads((SCHEMAS / "budget.v1.schema.json").read_text()))
    traced, groq, cerebras = document["decision"]
    assert traced["option"] == "as traced" and traced["p95_ms"] == pytest.approx(1000)
    assert groq["p95_ms"] == pytest.approx(100 + 600) and cerebras["p95_ms"] == pytest.approx(200)
    assert groq["cost_per_accepted_task"] == pytest.approx((500 * 0.15 + 300 * 0.60) / 1e6)
    assert groq["priced_as"] == "groq-gpt-oss-120b" and groq["break_even_tasks_per_month"] > 0
    markdown = runner.invoke(app, args).stdout
    assert (
        "## The options side by side" in markdown
        and "| cerebras-gpt-oss-120b | 0.20 s | 0.20 s |" in markdown
    )
    table = markdown.split("## The options side by side\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert (
        len(table) == 5 and len({line.count("|") for line in table}) == 1
    )  # every row as wide as the header
    page = tmp_path / "b.html"
    assert runner.invoke(app, [*args, "--format", "html", "--output", str(page)]).exit_code == 0
    assert "The options side by side" in page.read_text()
