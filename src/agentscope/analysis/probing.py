"""What a probe of a candidate endpoint sends, and the profile it fits from what came back (DESIGN §12).

Pure functions: the recorded calls' token counts in, the calls to send out;
the measured calls in, a :class:`~agentscope.analysis.profiles.CandidateProfile`
out.  The sending itself (the openai SDK) lives in ``agentscope.integrations.openai_probe``.

The fit, by least squares with every coefficient kept ≥ 0 (the best of all
non-negative solutions, not a line clamped after the fact):

- time to first token against the prompt: ``ttft = base + a·n + b·(n/1000)²``
  (prefill grows faster than the prompt on a real engine: attention);
- decode time (last token minus first) against the answer:
  ``decode = out·(c + d·(n + out/2)/1000)`` (each token reads the context so far);

and each call's residual (measured total minus predicted), summarised per band
of prompt sizes.  Each fit is made again without the calls it misses by far
(``profiles.OUTLIER_SPREAD``), so one call slowed by a pause does not move it; every
call's residual is still reported.  Wrong when the app runs at another load than the probe's
(``concurrency``, recorded in the profile), when a prompt cache serves the
filler, or when the endpoint's tokenizer counts the filler very differently from
the recorded prompts.
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from agentscope.analysis.profiles import CandidateProfile, Figure, ProbeCall, typical


@dataclass(frozen=True)
class ResidualBand:
    """How well a profile predicts the probe calls of one band of prompt sizes."""

    inputs: tuple[int, int]
    """The smallest and largest prompt of the band, in tokens."""
    calls: int
    median_ms: float
    """Median of measured minus predicted total time."""
    median_share: float
    """Median of (measured − predicted) / measured."""


LONG_CONTEXT_SHARE = 0.2
"""The share of probe calls sent as long-context answers (a large prompt and a large answer), so the
decode's growth with the context can be told from its rate."""


def choose_sizes(recorded: Sequence[tuple[int, int]], calls: int) -> list[tuple[int, int]]:
    """``calls`` (input, output) sizes spread over the recorded calls' sizes, the largest included.

    Most are the recorded calls at evenly spaced ranks of their total tokens,
    first and last included, so small, typical and the largest calls are all
    sent.  A fifth (at least one, from five calls on) pair the largest recorded
    answer with prompts spread over the recorded range: with the recorded calls
    alone, long prompts and long answers tend to come together, and the
    decode's slope in the context could not be told from its rate.
    """
    sizes = sorted(((max(1, i), max(1, o)) for i, o in recorded), key=lambda pair: (pair[0] + pair[1], pair))
    if not sizes or calls <= 0:
        return []
    if calls >= len(sizes):
        return sizes
    if calls == 1:
        return [sizes[-1]]
    crossed = int(calls * LONG_CONTEXT_SHARE) if calls >= 5 else 0
    spread = _ranks(sizes, calls - crossed)
    inputs = sorted(i for i, _ in sizes)
    longest = max(o for _, o in sizes)
    crossing = [(inputs[round(k * (len(inputs) - 1) / crossed)], longest) for k in range(crossed)]
    return sorted(spread + crossing, key=lambda pair: (pair[0] + pair[1], pair))


BACKGROUND_CALLS_PER_MEASURED = 2
"""Under load, the most calls each background sender may send per measured call (their sum is what the
probe asks consent for; a background call usually takes about as long as a measured one)."""


def load_plan(
    sizes: Sequence[tuple[int, int]], recorded: Sequence[tuple[int, int]], concurrency: int
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """What a probe sends at ``concurrency`` calls at once: (the measured sizes in the order sent, the
    sizes of the calls sent only to make the load).

    Under continuous batching a call's time depends on what it shares the engine
    with: beside a long prefill, every stream's decode waits.  So the load a
    measured call meets must be the app's own, not the other measured calls (whose
    sizes are spread for the fit, not mixed as the app mixes them): the measured
    calls go one at a time, and ``concurrency − 1`` senders keep the engine busy
    with calls drawn from the ``recorded`` ones, as often as the app makes each
    size.  When the measured calls made the load among themselves, at four at once
    on a real engine, the app's own calls then took 17% longer relative to the fit
    than the probe's had.  At load 1, the sizes and nothing else.
    """
    if concurrency <= 1 or not sizes or not recorded:
        return list(sizes), []
    rng = random.Random(0)
    measured = rng.sample(list(sizes), len(sizes))
    background = rng.choices(list(recorded), k=BACKGROUND_CALLS_PER_MEASURED * (concurrency - 1) * len(sizes))
    return measured, background


def _ranks(sizes: list[tuple[int, int]], calls: int) -> list[tuple[int, int]]:
    """``calls`` (at least 2) of ``sizes`` at evenly spaced ranks, first and last included."""
    step = (len(sizes) - 1) / (calls - 1)
    return [sizes[round(k * step)] for k in range(calls)]


def nonnegative_least_squares(columns: Sequence[Sequence[float]], ys: Sequence[float]) -> list[float]:
    """The coefficients ≥ 0 that minimise the squared error of ``sum(coef · column)`` against ``ys``.

    Exact for the few columns a profile has: the unconstrained solution on every
    subset of the columns, the others held at 0, and the best one with no
    negative coefficient (the minimum lies on one of those faces).
    """
    a = np.array(columns, dtype=float).T
    y = np.array(ys, dtype=float)
    best, best_error = [0.0] * len(columns), float(np.sum(y**2))
    for size in range(1, len(columns) + 1):
        for subset in itertools.combinations(range(len(columns)), size):
            coefficients, *_ = np.linalg.lstsq(a[:, subset], y, rcond=None)
            if np.any(coefficients < 0):
                continue
            error = float(np.sum((a[:, subset] @ coefficients - y) ** 2))
            if error < best_error - 1e-9 * max(1.0, best_error):
                best, best_error = [0.0] * len(columns), error
                for k, value in zip(subset, coefficients, strict=True):
                    best[k] = float(value)
    return best


def _robust_fit(columns: Sequence[Sequence[float]], ys: Sequence[float]) -> list[float]:
    """:func:`nonnegative_least_squares`, refitted once without the outlying calls (from 8 calls on)."""
    coefficients = nonnegative_least_squares(columns, ys)
    if len(ys) < 8:
        return coefficients
    a = np.array(columns, dtype=float).T
    kept = np.array(typical(np.abs(np.array(ys, dtype=float) - a @ np.array(coefficients)).tolist()))
    if kept.all() or kept.sum() < len(columns) + 2:
        return coefficients
    return nonnegative_least_squares(a[kept].T.tolist(), np.array(ys, dtype=float)[kept].tolist())


def fit_profile(
    name: str, model: str, calls: Sequence[ProbeCall], endpoint: str, concurrency: int = 1
) -> CandidateProfile:
    """The measured profile of an endpoint at ``concurrency`` calls in flight, with each probe call's
    residual."""
    if len(calls) < 2:
        raise ValueError("a profile needs at least two probe calls")
    n = len(calls)
    inputs = [float(c.input_tokens) for c in calls]
    base, per_token, quadratic = _robust_fit(
        [[1.0] * n, inputs, [(i / 1000) ** 2 for i in inputs]], [c.ttft_ms for c in calls]
    )
    outputs = [float(c.output_tokens) for c in calls]
    decode = [max(c.total_ms - c.ttft_ms, 0.0) for c in calls]
    context = [o * (i + o / 2) / 1000 for i, o in zip(inputs, outputs, strict=True)]
    per_output, per_context = _robust_fit([outputs, context], decode)
    if per_output <= 0:  # a decode with no rate of its own: the one rate that fits best
        per_output, per_context = _robust_fit([outputs], decode)[0], 0.0
    today = datetime.date.today().isoformat()
    where = f"measured by agentscope probe of {endpoint} on {today}, {n} calls at {concurrency} at once"
    ttft_fit = f"{where}: non-negative least squares of time to first token"
    decode_fit = f"{where}: non-negative least squares of the streamed decode"
    figures = {
        "ttft_base_ms": Figure(base, f"{ttft_fit}, intercept"),
        "decode_tokens_per_s": Figure(1000 / per_output if per_output > 0 else 0.0, f"{decode_fit}, rate"),
    }
    if per_token > 0:
        figures["prefill_tokens_per_s"] = Figure(1000 / per_token, f"{ttft_fit}, linear term")
    if quadratic > 0:
        figures["prefill_quadratic_ms"] = Figure(quadratic, f"{ttft_fit}, quadratic term")
    if per_context > 0:
        figures["decode_context_ms"] = Figure(per_context, f"{decode_fit}, growth with the context")
    profile = CandidateProfile(
        name,
        "measured",
        today,
        figures,
        model=model,
        description=f"{model} at {endpoint}",
        concurrency=concurrency,
        calls=tuple(calls),
    )
    residuals = [c.total_ms - profile.predict_ms(c.input_tokens, c.output_tokens) for c in calls]
    return dataclasses.replace(profile, residuals_ms=residuals)


def residual_bands(
    calls: Sequence[ProbeCall], residuals_ms: Sequence[float], bands: int = 3
) -> list[ResidualBand]:
    """The residuals of ``calls`` summarised in ``bands`` bands of prompt size (equal numbers of calls,
    smallest prompts first)."""
    ordered = sorted(zip(calls, residuals_ms, strict=True), key=lambda pair: pair[0].input_tokens)
    out: list[ResidualBand] = []
    for k in range(min(bands, len(ordered))):
        part = ordered[k * len(ordered) // bands : (k + 1) * len(ordered) // bands]
        if not part:
            continue
        shares = [r / c.total_ms for c, r in part if c.total_ms > 0]
        out.append(
            ResidualBand(
                (part[0][0].input_tokens, part[-1][0].input_tokens),
                len(part),
                float(np.median([r for _, r in part])),
                float(np.median(shares)) if shares else 0.0,
            )
        )
    return out


def calls_in_flight(intervals: Sequence[tuple[int, int]]) -> int:
    """The app's typical number of LLM calls in flight: the median, over its calls, of how many calls
    (itself included) were running when each one started.  ``intervals`` are (start, end) times."""
    if not intervals:
        return 1
    spans = np.array(intervals, dtype=np.int64)
    starts, ends = np.sort(spans[:, 0]), np.sort(spans[:, 1])
    running = np.searchsorted(starts, spans[:, 0], side="right") - np.searchsorted(
        ends, spans[:, 0], side="right"
    )
    return max(1, round(float(np.median(running))))
