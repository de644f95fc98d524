"""The budget against published figures, the catalog format, and the budget/v1 document."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentscope.analysis import KEYS
from agentscope.analysis.report import DEFAULT_SCENARIOS, blame, variants
from agentscope.analysis.tasks import TaskResult
from agentscope.budget import build, load
from agentscope.budget.catalog import CatalogError, parse
from agentscope.budget.costs import break_even_tokens, headroom, per_minute, per_second

SCHEMAS = Path(__file__).resolve().parent.parent / "docs" / "schemas"


@pytest.fixture(scope="module")
def catalog():
    return load()


def option(catalog, name):
    return next(o for o in (*catalog.per_token, *catalog.fixed) if o.name == name)


def test_token_costs_match_published_prices(catalog):
    assert option(catalog, "groq-gpt-oss-120b").cost(30e6, 120e6) == pytest.approx(76.50)
    assert option(catalog, "cerebras-gpt-oss-120b").cost(30e6, 120e6) == pytest.approx(100.50)
    assert option(catalog, "groq-gpt-oss-20b").cost(30e6, 120e6) == pytest.approx(38.25)


def test_fixed_monthly_costs(catalog):
    assert option(catalog, "lambda-b200-x1").monthly_cost == pytest.approx(5102.70)
    assert option(catalog, "lambda-b200-x8").monthly_cost == pytest.approx(39069.60)
    assert option(catalog, "aws-inf2-xlarge").monthly_cost == pytest.approx(554.80)
    assert option(catalog, "gcp-tpu-v6e-8").monthly_cost == pytest.approx(15768.00)
    assert option(catalog, "oci-mi355x-x8").monthly_cost == pytest.approx(50224.00)


def test_blended_price_break_even_and_rate_limit_headroom(catalog):
    groq, b200 = option(catalog, "groq-gpt-oss-120b"), option(catalog, "lambda-b200-x1")
    assert groq.blended_per_million(0.2) == pytest.approx(0.51)
    volume = break_even_tokens(groq, b200, 0.2)
    assert volume == pytest.approx(10.005e9, rel=1e-4)
    assert per_second(volume) == pytest.approx(3808, abs=1)
    assert per_minute(volume) == pytest.approx(228_431, abs=1)
    (tpm,) = [row for row in headroom(groq, volume, 0) if row["limit"] == "tokens_per_minute"]
    assert tpm["share"] == pytest.approx(0.914, abs=0.0005)


def results(n=10, accepted=8) -> list[TaskResult]:
    out = []
    for k in range(n):
        components = [0.0] * len(KEYS)
        components[KEYS.index("inference.decode")] = 600e6
        components[KEYS.index("tool")] = 400e6 + k * 1e6
        out.append(
            TaskResult(
                trace_id=f"{k:032x}",
                span_id=f"{k:016x}",
                name="ticket",
                start_ns=1_700_000_000_000_000_000 + k * 10**9,
                duration_ns=int(sum(components)),
                accepted=k < accepted,
                components=components,
                llm_calls=3,
                input_tokens=3_000,
                output_tokens=12_000,
                models={"gpt-oss-120b": [3_000, 12_000, 0, 3]},
                whatif_ns=[
                    sum(components) - 600e6 * (1 - 1 / f)
                    for s in DEFAULT_SCENARIOS
                    for f in (s.speedups["inference"],) * 2
                ],
            )
        )
    return out


def test_budget_document_prices_the_traced_tokens(catalog):
    rs = results()
    report = build(
        rs, blame(rs), catalog, tasks_per_month=10_000, curve=[(1.0, 1.0, 1.0), (float("inf"), 0.5, 0.6)]
    )
    jsonschema.validate(report, json.loads((SCHEMAS / "budget.v1.schema.json").read_text()))
    assert report["projection"]["monthly_tokens"] == {
        "input": 30e6,
        "output": 120e6,
        "cached": 0.0,
        "total": 150e6,
    }
    options = {o["name"]: o for o in report["options"]}
    assert options["groq-gpt-oss-120b"]["monthly_cost"] == pytest.approx(76.50)
    assert options["cerebras-gpt-oss-120b"]["monthly_cost"] == pytest.approx(100.50)
    assert options["groq-gpt-oss-120b"]["cost_per_accepted_task"] == pytest.approx(76.50 / 8_000)
    assert "groq-gpt-oss-20b" not in options
    assert options["lambda-b200-x1"]["monthly_cost"] == pytest.approx(5102.70)
    even = next(
        b
        for b in report["break_even"]
        if (b["per_token"], b["fixed"]) == ("groq-gpt-oss-120b", "lambda-b200-x1")
    )
    assert even["blended_per_million"] == pytest.approx(0.51)
    assert even["monthly_tokens"] == pytest.approx(10.005e9, rel=1e-4)
    assert even["share_of_tokens_per_minute_limit"] == pytest.approx(0.914, abs=0.0005)
    assert even["tasks_per_month"] == pytest.approx(10.005e9 / 15_000, rel=1e-4)
    assert report["scope"]["accepted_rate"] == 0.8
    assert report["usage"]["per_accepted_task"]["output_tokens"] == pytest.approx(12_000 * 10 / 8)
    limits = {r["limit"]: r for r in report["rate_limits"]}
    assert limits["tokens_per_minute"]["average_use"] == pytest.approx(150e6 / (730 * 60))
    assert report["latency"]["curve"][1]["inference_speedup"] == "inf"


def test_a_per_token_cost_per_accepted_task_does_not_depend_on_the_volume(catalog):
    """With no volume projected (``--tasks-per-month 0``), a per-token option still costs the same per
    accepted task; only a fixed option's cost per task is then undefined."""
    rs = results()
    for volume in (0, 1, 10_000):
        options = {o["name"]: o for o in build(rs, blame(rs), catalog, tasks_per_month=volume)["options"]}
        groq = options["groq-gpt-oss-120b"]
        assert groq["cost_per_task"] == pytest.approx(76.50 / 10_000), volume
        assert groq["cost_per_accepted_task"] == pytest.approx(76.50 / 8_000), volume
        fixed = options["lambda-b200-x1"]["cost_per_accepted_task"]
        assert (fixed is None) if volume == 0 else fixed == pytest.approx(5102.70 / (volume * 0.8)), volume


def test_model_map_prices_a_traced_model_as_a_candidate(catalog):
    rs = results()
    for r in rs:
        r.models = {"my-finetune": r.models.pop("gpt-oss-120b")}
    plain = build(rs, blame(rs), catalog, tasks_per_month=10_000)
    assert plain["usage"]["unpriced_models"] == ["my-finetune"]
    assert [o["kind"] for o in plain["options"]].count("per_token") == 0
    mapped = build(rs, blame(rs), catalog, tasks_per_month=10_000, model_map={"my-finetune": "gpt-oss-20b"})
    (option_row,) = [o for o in mapped["options"] if o["kind"] == "per_token"]
    assert option_row["name"] == "groq-gpt-oss-20b" and option_row["monthly_cost"] == pytest.approx(38.25)


def test_catalog_errors_name_the_entry_and_field(tmp_path):
    with pytest.raises(CatalogError, match=r"per_token entry 1 \(cheap\): output_per_million"):
        parse('[[per_token]]\nname="cheap"\nprovider="x"\nmodel="m"\ninput_per_million=1\n', "mine.toml")
    with pytest.raises(CatalogError, match="count must be a positive whole number"):
        parse('[[fixed]]\nname="g"\nprovider="x"\nunit="GPU"\nper_hour=2\ncount=0\n', "mine.toml")
    with pytest.raises(CatalogError, match="not valid TOML"):
        parse("[[per_token]\n", "mine.toml")
    with pytest.raises(CatalogError, match="cannot read pricing file"):
        load(tmp_path / "missing.toml")
    own = parse(
        '[[per_token]]\nname="own"\nprovider="us"\nmodel="m"\ninput_per_million=1\noutput_per_million=2\n'
        "cached_input_per_million=0.5\n",
        "mine.toml",
    )
    assert own.per_token[0].cost(1e6, 1e6, cached_tokens=5e5) == pytest.approx(0.5 + 0.25 + 2)
    assert variants(DEFAULT_SCENARIOS)


TOKEN_OPTION = 'name="{name}"\nprovider="x"\nmodel="m"\ninput_per_million={price}\noutput_per_million=2\n'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[[per_token]]\n" + TOKEN_OPTION.format(name="a", price="nan"),
            "input_per_million must be a non-negative number, got nan",
        ),
        (
            "[[per_token]]\n" + TOKEN_OPTION.format(name="a", price="inf"),
            "input_per_million must be a non-negative number, got inf",
        ),
        (
            '[[fixed]]\nname="g"\nprovider="x"\nunit="GPU"\nper_hour=nan\n',
            "per_hour must be a non-negative number",
        ),
        (
            "[[per_token]]\n"
            + TOKEN_OPTION.format(name="a", price=1)
            + "[per_token.limits]\ntokens_per_minute=0\n",
            "limits.tokens_per_minute must be a positive number, got 0",
        ),
        (
            "[[per_token]]\n"
            + TOKEN_OPTION.format(name="a", price=1)
            + "[per_token.limits]\nrequests_per_minute=-5\n",
            "limits.requests_per_minute must be a positive number, got -5",
        ),
        (
            "[[per_token]]\n" + TOKEN_OPTION.format(name="a", price=1) + 'limits = "fast"\n',
            "limits must be a [per_token.limits] table",
        ),
        ("per_token = 5\n", "per_token must be [[per_token]] tables, got 5"),
        ("fixed = [1]\n", "fixed must be [[fixed]] tables, got [1]"),
        (
            "[[per_token]]\n"
            + TOKEN_OPTION.format(name="a", price=1)
            + "[[fixed]]\n"
            + 'name="a"\nprovider="x"\nunit="GPU"\nper_hour=2\n',
            "option names must be unique; given more than once: a",
        ),
    ],
    ids=[
        "nan",
        "inf",
        "fixed-nan",
        "zero-limit",
        "negative-limit",
        "limits-not-a-table",
        "not-tables",
        "not-tables-fixed",
        "repeated-name",
    ],
)
def test_catalog_values_that_would_print_nonsense_are_refused_by_name(text, message):
    """NaN and infinite prices printed NaN into budget's JSON, a limit of 0 an infinite share, a key
    that is not a list of tables an internal error, and two options of one name made rows ambiguous."""
    with pytest.raises(CatalogError) as refused:
        parse(text, "mine.toml")
    assert str(refused.value).startswith("mine.toml: ") and message in str(refused.value)


def test_the_population_sums_to_the_nanosecond_in_any_order_and_ranks_only_its_window(monkeypatch):
    """Means and sums add each task's components rounded to a whole nanosecond, exactly, so any order of
    the tasks gives one population; percentiles are the nearest ranks of the sorted values; the window
    is the tasks ranked within it by duration, trace id and span id, many of them tied, found without
    ranking the others.  Blocks of three rows give the same population as one block, and a component
    that is not finite sums to NaN as floats do."""
    import math
    import random

    import numpy as np

    from agentscope.analysis import report

    rng = random.Random(7)
    tasks = results(400)
    for task in tasks:
        task.components = [rng.random() * 10 ** rng.randrange(3, 12) for _ in KEYS]
        task.duration_ns = 10**9 * rng.randrange(1, 9)  # ties across the window's edges
        task.serial_llm_calls = rng.randrange(6)
        task.whatif_ns = [rng.random() * 1e9 for _ in task.whatif_ns]
    rng.shuffle(tasks)
    whole = report.Population.of(tasks, 95)
    ranked = sorted(tasks, key=lambda t: (t.duration_ns, t.trace_id, t.span_id))
    index = {key: i for i, key in enumerate(KEYS)}
    assert whole.mean_components == [
        sum(round(t.components[i]) for t in tasks) / 400 for i in range(len(KEYS))
    ]
    assert whole.unsplit_ns == sum(round(t.components[index["inference.unsplit"]]) for t in tasks)
    pd = (index["inference.prefill"], index["inference.decode"])
    assert whole.split_measured_ns == sum(
        round(t.components[pd[0]]) + round(t.components[pd[1]]) for t in tasks
    )
    lo, hi = report.window_ranks(400, 95)
    near = ranked[lo - 1 : hi]
    assert (
        ranked[lo - 2].duration_ns == near[0].duration_ns and near[-1].duration_ns == ranked[hi].duration_ns
    )
    assert whole.window == report.Window.of(
        np.array([t.components for t in near]), [t.operations for t in near]
    )
    serial = sorted(t.serial_llm_calls for t in tasks)
    assert (whole.serial_mean, whole.serial_p95) == (sum(serial) / 400, report.nearest_rank(serial, 95))
    for j, found in enumerate(whole.whatif_ns):
        column = sorted(t.whatif_ns[j] for t in tasks)
        assert found == {q: report.nearest_rank(column, q) for q in (50, 95)}
    rng.shuffle(tasks)
    assert report.Population.of(tasks, 95) == whole
    monkeypatch.setattr(report, "IN_ORDER_ROWS", 3)
    assert report.Population.of(tasks, 95) == whole
    tasks[5].components[index["inference.unsplit"]] = math.nan
    broken = report.Population.of(tasks, 95)
    assert math.isnan(broken.unsplit_ns) and broken.mean_components[0] == whole.mean_components[0]


@given(
    stored=st.lists(st.integers(1, 40), min_size=1, max_size=300),
    added=st.lists(st.integers(0, 41), max_size=40),
    slack=st.integers(0, 5),
    percentile=st.sampled_from((1, 50, 90, 95, 99, 100)),
    ties=st.randoms(use_true_random=False),
)
def test_the_window_of_tasks_yet_to_be_added_lies_within_its_durations(
    stored, added, slack, percentile, ties
):
    """Every task of ``stored`` that is in the budget's window once ``added`` tasks rank among them (at
    most ``len(added) + slack`` of them, which is all a reader knows) has a duration within
    ``window_durations``; with nothing added, the bounds are the window's own first and last durations."""
    import numpy as np

    from agentscope.analysis import report

    low, high = report.window_durations(np.array(stored, dtype=np.int64), percentile, len(added) + slack)
    ranked = [(d, False) for d in stored] + [(d, True) for d in added]
    ties.shuffle(ranked)
    ranked.sort(key=lambda task: task[0])  # tied tasks in any order, as trace and span ids may put them
    lo, hi = report.window_ranks(len(ranked), percentile)
    assert all(low <= d <= high for d, new in ranked[lo - 1 : hi] if not new)
    if not added and not slack:
        assert (low, high) == (ranked[lo - 1][0], ranked[hi - 1][0])


def test_a_window_read_without_its_operations_says_so():
    """A per-task table whose window's tasks were read without their operations is read again whole, not
    reported from what it holds."""
    import pyarrow as pa

    from agentscope.analysis import report
    from agentscope.analysis.rows import results_table

    table = results_table(results(40))
    report.Population.of_table(table, 95)
    where = table.schema.get_field_index("operations")
    blank = table.set_column(where, "operations", pa.nulls(40, pa.string()))
    with pytest.raises(report.OperationsNotRead, match="window's tasks"):
        report.Population.of_table(blank, 95)


def test_what_ifs_read_a_position_at_a_time_equal_the_matrix_s_columns():
    """A curve or a report reads a few what-if positions of every row's list, gathered where each chunk
    holds them: the same values as the columns of a matrix of all of them."""
    import numpy as np
    import pyarrow as pa

    from agentscope.analysis import report

    rows = [[float(10 * r + k) for k in range(5)] for r in range(11)]
    chunked = pa.chunked_array(
        [pa.array(part, pa.list_(pa.float64())) for part in (rows[:4], [], rows[4:9], rows[9:])]
    )
    matrix = report.list_matrix(chunked, len(rows))
    assert [c.tolist() for c in report.list_columns(chunked)] == [c.tolist() for c in matrix.T]
    assert [c.tolist() for c in report.list_columns(chunked, [3, 0])] == [
        matrix[:, 3].tolist(),
        matrix[:, 0].tolist(),
    ]
    assert all(c.flags.c_contiguous and c.dtype == np.float64 for c in report.list_columns(chunked, [1]))


def test_a_percentile_found_in_a_sampled_band_is_the_sorted_values_one(monkeypatch):
    """Percentiles of many values partition only a band that a sample bounds; the counts around the
    band decide, so the answer is the nearest rank whatever the sample saw: values in order, ties,
    integers, NaN (sorted last), and values whose sampled positions mislead it (the band then misses,
    and every value is partitioned; the other cases partition a band only)."""
    import numpy as np

    from agentscope.analysis import report

    partitioned: list[int] = []
    partition = np.partition
    monkeypatch.setattr(np, "partition", lambda a, k: partitioned.append(len(a)) or partition(a, k))
    rng = np.random.default_rng(11)
    n = 100_003
    misleading = rng.random(n)
    misleading[:: n // report.SELECT_SAMPLE] += 10  # the sample sees only the largest values
    with_nan = rng.lognormal(size=n)
    with_nan[rng.integers(0, n, 5000)] = np.nan
    cases = {
        "lognormal": rng.lognormal(size=n),
        "ascending": np.arange(n, dtype=np.float64),
        "ties": rng.integers(0, 7, n).astype(np.float64),
        "integers": rng.integers(0, 1000, n),
        "misleading": misleading,
        "nan": with_nan,
    }
    for name, values in cases.items():
        ranked = np.sort(values)
        partitioned.clear()
        found = report._percentiles(values, (0, 1, 50, 92.5, 95, 97.5, 99.9, 100))
        expected = {q: ranked[report._rank_index(n, q)].item() for q in found}
        assert found.keys() == expected.keys(), name
        assert all(a == b or (np.isnan(a) and np.isnan(b)) for a, b in zip(found.values(), expected.values()))
        if name == "misleading":
            assert n in partitioned
        elif name != "nan":  # NaN's ranks are past the band: those are found among every value
            assert n not in partitioned, name


def test_task_durations_are_summed_exactly_past_what_64_bits_hold():
    """The mean task duration divides an exact sum: 64-bit NumPy would wrap."""
    import numpy as np

    from agentscope.analysis import report

    rng = np.random.default_rng(5)
    for values in (
        rng.integers(-(2**62), 2**62, 100_000),
        np.full(5, 2**63 - 1),
        np.full(3, -(2**63)),
        rng.integers(0, 10**13, 7),
        np.array([], dtype=np.int64),
    ):
        assert report._exact_sum(values) == sum(values.tolist())
