"""``agentscope probe`` through the CLI against simulated providers: consent, keys, 429s, its own spans."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest
from tracebuild import llm_task_store

from agentscope.analysis.probing import (
    ProbeCall,
    calls_in_flight,
    choose_sizes,
    fit_profile,
    load_plan,
    residual_bands,
)
from agentscope.analysis.profiles import CandidateProfile, Figure, ProfileError, load_profile
from agentscope.sim import Profile, SimServer
from agentscope.store import Store

SECRET = "sk-probe-secret-1234"


@pytest.fixture
def recorded(tmp_path):
    """A store of LLM calls of assorted sizes."""
    return llm_task_store(tmp_path / "recorded.duckdb", [(100 + 150 * k, 5 + 3 * k) for k in range(12)])


def probe(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "agentscope.cli", "probe", *args],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "160", **(env or {})},
    )


def test_probe_honours_429s_keeps_the_key_secret_and_stores_its_calls_apart(recorded, tmp_path):
    server = SimServer(
        Profile(queue_ms=1, prefill_ms=5, tokens_per_s=2_000, rate_limit_first=True, retry_after_ms=20)
    )
    server.start()
    try:
        out = tmp_path / "p.toml"
        args = ["--base-url", server.base_url, "--model", "m", "--store", str(recorded), "--calls", "6"]
        result = probe(
            *args,
            *("--concurrency", "1", "--api-key-env", "PROBE_KEY", "--yes", "--output", str(out)),
            env={"PROBE_KEY": SECRET},
        )
    finally:
        server.stop()
    assert result.returncode == 0, result.stderr
    assert SECRET not in result.stdout + result.stderr + out.read_text()
    assert any(h.get("authorization") == f"Bearer {SECRET}" for h in server.seen_headers)
    assert {s.status for s in server.served} == {200, 429}  # every call was refused once, then retried
    with Store(recorded, read_only=True) as store:
        assert (
            store.scalar("SELECT count(*) FROM spans WHERE service = 'agentscope-probe' AND kind = 'llm'")
            == 8
        )
        stored = "".join(a for (a,) in store.con.execute("SELECT attributes FROM spans").fetchall())
        assert SECRET not in stored
    blame = subprocess.run(
        [sys.executable, "-m", "agentscope.cli", "blame", "--store", str(recorded), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert json.loads(blame.stdout)["tasks"]["count"] == 12  # the probe's calls are not the app's tasks


def test_probe_asks_before_spending_and_names_missing_things(recorded, tmp_path):
    args = ["--base-url", "http://127.0.0.1:9/v1", "--model", "gpt-oss-120b", "--store", str(recorded)]
    unasked = probe(*args)
    assert unasked.returncode == 2 and "pass --yes" in unasked.stderr
    assert "input and" in unasked.stderr and "list price" in unasked.stderr  # volume and price said first
    no_key = probe(*args, "--api-key-env", "NOT_SET_ANYWHERE", "--yes")
    assert no_key.returncode == 2 and "NOT_SET_ANYWHERE" in no_key.stderr
    empty = tmp_path / "empty.duckdb"
    Store(empty).close()
    nothing = probe("--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--store", str(empty), "--yes")
    assert nothing.returncode == 2 and "no LLM call with input and output token counts" in nothing.stderr
    not_a_url = probe("--base-url", "api.groq.com/openai/v1", *args[2:], "--yes")
    assert not_a_url.returncode == 2
    assert "--base-url 'api.groq.com/openai/v1': give an http(s) URL" in not_a_url.stderr.replace("\n", " ")
    unreachable = probe(*args, "--yes", env={"OPENAI_API_KEY": "sk-x"})
    assert unreachable.returncode == 2
    said = " ".join(unreachable.stderr.split())
    assert "the endpoint http://127.0.0.1:9/v1 failed: APIConnectionError" in said
    outputs = unasked.stderr + no_key.stderr + nothing.stderr + not_a_url.stderr + unreachable.stderr
    assert "Traceback" not in outputs


def test_sizes_cover_the_spread_and_the_fit_recovers_known_rates():
    recorded = [(i * 10, i) for i in range(1, 101)]
    sizes = choose_sizes(recorded, 5)
    assert sizes[-1] == (1000, 100) and len(sizes) == 5
    assert (10, 1) in sizes and (
        10,
        100,
    ) in sizes  # the smallest call, and the longest answer to a short prompt
    calls = [
        ProbeCall(i, o, ttft_ms=30 + i / 5_000 * 1000, total_ms=30 + i / 5_000 * 1000 + o / 400 * 1000)
        for i, o in sizes
    ]
    fitted = fit_profile("x", "m", calls, "http://127.0.0.1")
    assert fitted.value("ttft_base_ms") == pytest.approx(30)
    assert fitted.value("prefill_tokens_per_s") == pytest.approx(5_000)
    assert fitted.value("decode_tokens_per_s") == pytest.approx(400)
    assert max(abs(r) for r in fitted.residuals_ms) < 1e-6


def engine_call(i: int, o: int) -> ProbeCall:
    """A call on an engine like llama.cpp's: prefill convex in the prompt, decode slower in a long context."""
    ttft = 40 + i / 2_000 * 1000 + 90 * (i / 1000) ** 2
    return ProbeCall(i, o, ttft_ms=ttft, total_ms=ttft + o * (6.0 + 4.0 * (i + o / 2) / 1000))


def test_the_fit_recovers_a_convex_prefill_and_a_decode_that_slows_with_the_context(tmp_path):
    recorded = [(100 + 45 * k, 16 + (k * 37) % 112) for k in range(30)]
    calls = [engine_call(i, o) for i, o in choose_sizes(recorded, 30)]
    fitted = fit_profile("x", "m", calls, "http://127.0.0.1", concurrency=4)
    assert fitted.value("ttft_base_ms") == pytest.approx(40, abs=0.01)
    assert fitted.value("prefill_tokens_per_s") == pytest.approx(2_000, rel=1e-4)
    assert fitted.value("prefill_quadratic_ms") == pytest.approx(90, rel=1e-4)
    assert fitted.value("decode_tokens_per_s") == pytest.approx(1000 / 6.0, rel=1e-4)
    assert fitted.value("decode_context_ms") == pytest.approx(4.0, rel=1e-4)
    assert max(abs(r) for r in fitted.residuals_ms) < 1e-6
    written = tmp_path / "fitted.toml"
    written.write_text(fitted.to_toml())
    loaded = load_profile(written)
    assert fitted.concurrency == 4 and loaded.concurrency == 4
    assert {k: round(v.value, 3) for k, v in loaded.figures.items()} == {
        k: round(v.value, 3) for k, v in fitted.figures.items()
    }


def test_a_convex_prefill_fitted_by_a_line_is_not_clamped_after_the_fact():
    """The straight line through a convex prefill has a negative intercept: no intercept is not the same
    as clamping it and keeping the slope, which adds its size to every call."""
    calls = [
        ProbeCall(i, 1, ttft_ms=0.0002 * i * i, total_ms=0.0002 * i * i + 5) for i in range(100, 1600, 100)
    ]
    fitted = fit_profile("x", "m", calls, "http://127.0.0.1")
    predicted = [fitted.predict_ms(c.input_tokens, c.output_tokens) for c in calls]
    assert fitted.value("ttft_base_ms") >= 0
    assert max(abs(p - c.total_ms) for p, c in zip(predicted, calls)) < 1e-6  # the quadratic term carries it
    line = fit_profile(
        "x", "m", [ProbeCall(c.input_tokens, 1, c.ttft_ms, c.total_ms) for c in calls[::7]], "u"
    )
    assert line.value("ttft_base_ms") >= 0 and all(r == r for r in line.residuals_ms)


def test_residual_bands_say_where_a_straight_line_misses():
    calls = [engine_call(i, 64) for i in range(100, 1600, 50)]
    straight = fit_profile("x", "m", calls, "u")
    linear = dataclasses.replace(
        straight,
        figures={
            k: v
            for k, v in straight.figures.items()
            if k not in ("prefill_quadratic_ms", "decode_context_ms")
        },
    )
    residuals = [c.total_ms - linear.predict_ms(c.input_tokens, c.output_tokens) for c in calls]
    bands = residual_bands(calls, residuals)
    assert [b.calls for b in bands] == [10, 10, 10] and bands[0].inputs == (100, 550)
    assert bands[-1].median_ms > 0  # the long prompts take longer than the line says
    assert all(abs(b.median_ms) < 1e-6 for b in residual_bands(calls, straight.residuals_ms))


def test_the_calls_in_flight_are_the_median_running_at_each_start():
    assert calls_in_flight([]) == 1
    assert calls_in_flight([(0, 10), (10, 20), (20, 30)]) == 1  # one after another
    four = [(k * 10 + start, k * 10 + start + 100) for k in range(4) for start in range(0, 2000, 100)]
    assert calls_in_flight(four) == 4


def test_the_old_profiles_load_and_a_figure_left_out_is_zero(tmp_path):
    old = tmp_path / "old.toml"
    old.write_text(
        'name = "old"\nkind = "measured"\ndate = "2026-01-01"\n\n[figures]\n'
        'ttft_base_ms = { value = 50, source = "probe" }\n'
        'prefill_tokens_per_s = { value = 2000, source = "probe" }\n'
        'decode_tokens_per_s = { value = 100, source = "probe" }\n'
    )
    profile = load_profile(old)
    assert profile.concurrency is None
    assert profile.predict_ms(1000, 10) == pytest.approx(50 + 500 + 100)
    bad = tmp_path / "bad.toml"
    bad.write_text(old.read_text().replace('date = "2026-01-01"', 'date = "2026-01-01"\nconcurrency = 0'))
    with pytest.raises(ProfileError, match="concurrency must be a whole number"):
        load_profile(bad)


def test_one_call_slowed_by_a_pause_does_not_move_the_fit():
    calls = [engine_call(i, 32) for i in range(100, 1600, 100)]
    slowed = calls[0]
    calls[0] = ProbeCall(slowed.input_tokens, 32, slowed.ttft_ms + 60, slowed.total_ms + 60)
    fitted = fit_profile("x", "m", calls, "u")
    assert fitted.value("ttft_base_ms") == pytest.approx(40, abs=0.01)
    assert fitted.residuals_ms[0] == pytest.approx(60, abs=0.01)  # still reported


def test_a_profile_keeps_its_probe_calls_and_draws_a_call_from_the_spread_of_calls_like_it(tmp_path):
    """Short calls were measured 1.5–2.5× their prediction and long ones 0.9–1.1×: a short call's draw
    comes from the short calls' spread, a long call's from the long ones', in the order of ``draw``; a
    call slowed by a pause is left out."""
    figures = {
        "prefill_tokens_per_s": Figure(1_000, "test"),  # 1 ms per prompt token
        "decode_tokens_per_s": Figure(100, "test"),  # 10 ms per output token
    }
    spreads = {(100, 10): (1.5, 2.0, 2.5), (2_000, 100): (0.9, 1.0, 1.1)}
    calls = (
        ProbeCall(2_000, 100, 0.0, 9_000.0),  # a long call slowed threefold by a pause: never drawn
        *(ProbeCall(i, o, 0.0, round((i + 10 * o) * r, 1)) for (i, o), rs in spreads.items() for r in rs),
    )
    path = tmp_path / "p.toml"
    path.write_text(CandidateProfile("p", "measured", "2026-12-05", figures, calls=calls).to_toml())
    profile = load_profile(path)
    assert profile.calls == calls
    for (i, o), ratios in spreads.items():
        draws = [profile.sample_ms(i, o, d / 12) for d in range(12)]
        assert draws == sorted(draws)
        assert sorted(set(draws)) == pytest.approx([(i + 10 * o) * r for r in ratios])
    assert dataclasses.replace(profile, calls=()).sample_ms(100, 10, 0.99) == profile.predict_ms(100, 10)


def test_a_profile_with_a_broken_probe_call_names_it(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text(
        'name = "p"\nkind = "measured"\ndate = "2026-01-01"\n'
        "calls = [{ input_tokens = 10, output_tokens = 2, ttft_ms = 5.0, total_ms = 9.0 },"
        " { input_tokens = 10, output_tokens = 2, total_ms = 9.0 }]\n\n[figures]\n"
        'decode_tokens_per_s = { value = 100, source = "probe" }\n'
    )
    with pytest.raises(ProfileError, match=r"p.toml: calls\[1\] needs input_tokens, output_tokens, ttft_ms"):
        load_profile(path)


def test_at_load_the_probe_measures_one_call_at_a_time_beside_calls_like_the_apps():
    sizes = [(100 * k, k) for k in range(1, 11)]
    recorded = [(150, 20)] * 90 + [(1_200, 100)] * 10  # the app's mix: mostly short calls
    assert load_plan(sizes, recorded, 1) == (sizes, [])  # one at a time: the sizes, nothing else
    measured, background = load_plan(sizes, recorded, 4)
    assert sorted(measured) == sizes and measured != sizes  # each once, shuffled
    assert len(background) == 2 * 3 * len(sizes) and set(background) <= set(recorded)
    assert 0.75 < background.count((150, 20)) / len(background) < 1  # as often as the app makes each
    assert load_plan(sizes, recorded, 4) == (measured, background)  # fixed


def test_every_call_a_probe_measures_at_load_met_that_load():
    """On an engine whose calls slow by half for each other call in flight, twelve calls of one size at
    four at once each took the time of a call among three others: the first did not start on an idle
    engine, nor the last ones on an emptying one."""
    from agentscope.integrations.openai_probe import Endpoint, probe

    server = SimServer(Profile(queue_ms=0, prefill_ms=60, tokens_per_s=1_000, batch_slowdown=0.5))
    server.start()
    try:
        calls = probe(Endpoint(server.base_url, "m", "local"), [(300, 20)] * 12, concurrency=4)
    finally:
        server.stop()
    loaded = (60 + 20) * (1 + 0.5 * 3)  # ms: prefill and decode, shared with three others
    assert len(calls) == 12
    times = sorted(c.total_ms for c in calls)
    assert 0.75 * loaded < times[0] and times[-1] < 1.3 * loaded, times  # made the load among themselves,
    assert 0.9 * loaded < times[len(times) // 2] < 1.1 * loaded, times  # the first three took 0.45-0.8×
