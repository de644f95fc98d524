"""What a probe of a candidate endpoint sends, and the profile it fits from what came back (DESIGN §12).

Pure functions: the recorded calls' token counts in, the calls to send out;
the measured calls in, a :class:`~agentscope.analysis.profiles.CandidateProfile`
out.  The sending itself (the openai SDK) lives in ``agentscope.integrations.openai_probe``.

The fit: time to first token against input tokens by least squares
(``ttft = base + input / prefill_rate``), the decode rate as all output tokens
over all time from first token to last, and each call's residual (measured total
minus predicted).  Wrong when the endpoint batches differently under load than
under the probe's concurrency, when a prompt cache serves the filler, or when
its tokenizer counts the filler very differently from the recorded prompts.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Sequence
from dataclasses import dataclass

from agentscope.analysis.profiles import CandidateProfile, Figure


@dataclass(frozen=True)
class ProbeCall:
    """One probe call as measured: its tokens (as the endpoint counted them) and its times."""

    input_tokens: int
    output_tokens: int
    ttft_ms: float
    total_ms: float


def choose_sizes(recorded: Sequence[tuple[int, int]], calls: int) -> list[tuple[int, int]]:
    """``calls`` (input, output) sizes spread over the recorded calls' sizes, the largest included.

    The recorded calls are ordered by their total tokens and taken at evenly
    spaced ranks, first and last included, so small, typical and the largest
    calls are all sent.
    """
    sizes = sorted(((max(1, i), max(1, o)) for i, o in recorded), key=lambda pair: (pair[0] + pair[1], pair))
    if not sizes or calls <= 0:
        return []
    if calls >= len(sizes):
        return sizes
    if calls == 1:
        return [sizes[-1]]
    step = (len(sizes) - 1) / (calls - 1)
    return [sizes[round(k * step)] for k in range(calls)]


def fit_profile(name: str, model: str, calls: Sequence[ProbeCall], endpoint: str) -> CandidateProfile:
    """The measured profile of an endpoint, with each probe call's residual."""
    if len(calls) < 2:
        raise ValueError("a profile needs at least two probe calls")
    n = len(calls)
    xs = [c.input_tokens for c in calls]
    ys = [c.ttft_ms for c in calls]
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    spread = sum((x - mean_x) ** 2 for x in xs)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread if spread else 0.0
    slope = max(slope, 0.0)  # more input never makes the first token come sooner
    base = max(mean_y - slope * mean_x, 0.0)
    decode_ms = sum(max(c.total_ms - c.ttft_ms, 0.0) for c in calls)
    output = sum(c.output_tokens for c in calls)
    today = datetime.date.today().isoformat()
    where = f"measured by agentscope probe of {endpoint} on {today}, {n} calls"
    figures = {
        "ttft_base_ms": Figure(base, f"{where}: least-squares intercept of time to first token"),
        "decode_tokens_per_s": Figure(
            output / decode_ms * 1000 if decode_ms > 0 else 0.0, f"{where}: streamed"
        ),
    }
    if slope > 0:
        figures["prefill_tokens_per_s"] = Figure(
            1000 / slope, f"{where}: least-squares slope of time to first token"
        )
    profile = CandidateProfile(
        name, "measured", today, figures, model=model, description=f"{model} at {endpoint}"
    )
    residuals = [c.total_ms - profile.predict_ms(c.input_tokens, c.output_tokens) for c in calls]
    return dataclasses.replace(profile, residuals_ms=residuals)
