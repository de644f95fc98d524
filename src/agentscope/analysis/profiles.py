"""Candidate profiles: what one LLM call would take on a candidate endpoint, from its own tokens (DESIGN §12).

    time = queue_ms + network_ms + ttft_base_ms
           + input_tokens / prefill_tokens_per_s + output_tokens / decode_tokens_per_s   (s → ms)
           + prefill_quadratic_ms · (input_tokens / 1000)²
           + decode_context_ms · output_tokens · (input_tokens + output_tokens / 2) / 1000

The last two terms are what a real engine adds to the straight line: attention
makes the first token come later than linearly in a long prompt, and every
decoded token reads the whole context so far (on average the prompt and half the
answer).  Presets, which publish one rate of each, leave them out.

A profile is TOML: a name, each figure with where it came from, whether it was
``reported`` (published by a vendor or the press) or ``measured`` (by probing
the endpoint), and the date.  Presets built from published figures ship
in ``profiles.toml`` beside this module; measured ones are written by probing an endpoint.

```toml
name = "groq-gpt-oss-120b"
kind = "reported"            # or "measured"
date = "2026-08-01"
model = "openai/gpt-oss-120b"

[figures]
queue_ms = { value = 0, source = "not published" }
decode_tokens_per_s = { value = 500, source = "Groq's published model speed" }
```

A figure left out is 0 (a rate left out adds nothing).  ``concurrency`` (optional) is
the number of calls in flight the figures were measured at: a probe records it,
since an endpoint shares its throughput among concurrent streams.

A measured profile also keeps its probe calls (``calls``).  The figures give a
call's typical time; the calls give the spread around it, which at load is
large: under continuous batching a call's time depends on what it shares the
engine with, and a task's p95 is made of calls that met a busy engine.
:meth:`CandidateProfile.sample_ms` draws a call's time from that spread.
"""

from __future__ import annotations

import functools
import math
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

FIGURES = (
    "queue_ms",
    "network_ms",
    "ttft_base_ms",
    "prefill_tokens_per_s",
    "prefill_quadratic_ms",
    "decode_tokens_per_s",
    "decode_context_ms",
)
UNITS = {
    "prefill_tokens_per_s": "tokens/s",
    "decode_tokens_per_s": "tokens/s",
    "prefill_quadratic_ms": "ms per (1k input tokens)²",
    "decode_context_ms": "ms per output token per 1k tokens of context",
}
"""Each figure's unit where it is not plain ms."""
KINDS = ("reported", "measured")


class ProfileError(ValueError):
    """A profile file that cannot be used; the message names the file and the figure."""


@dataclass(frozen=True)
class Figure:
    value: float
    source: str


@dataclass(frozen=True)
class ProbeCall:
    """One probe call as measured: its tokens (as the endpoint counted them) and its times."""

    input_tokens: int
    output_tokens: int
    ttft_ms: float
    total_ms: float


OUTLIER_SPREAD = 5.0
"""A probe call whose residual is this many times the median absolute residual (and over 5 ms) is left
out of the fit and of the spread: a call slowed by a pause of the machine or the network (the
probe's own span writes, on a small machine) says nothing about the endpoint."""


def typical(abs_residuals_ms: Sequence[float]) -> list[bool]:
    """Per call, whether its absolute residual is within :data:`OUTLIER_SPREAD` of the others'."""
    if not abs_residuals_ms:
        return []
    limit = max(OUTLIER_SPREAD * statistics.median(abs_residuals_ms), 5.0)
    return [r <= limit for r in abs_residuals_ms]


SPREAD_NEIGHBOURS = 0.25
"""The share of a profile's probe calls (at least 3) whose spread a call's time is drawn from: those
nearest it in predicted time."""


@dataclass(frozen=True)
class CandidateProfile:
    """A candidate endpoint's predicted call time, figure by figure (each with its source)."""

    name: str
    kind: str
    date: str
    figures: dict[str, Figure]
    model: str | None = None
    description: str = ""
    residuals_ms: list[float] = field(default_factory=list)
    """For a measured profile: measured minus predicted time of each probe call."""
    concurrency: int | None = None
    """The calls in flight the figures were measured at (None: not stated)."""
    calls: tuple[ProbeCall, ...] = ()
    """For a measured profile: the probe calls it was fitted on (the spread of :meth:`sample_ms`)."""

    def value(self, figure: str) -> float:
        found = self.figures.get(figure)
        return found.value if found is not None else 0.0

    def predict_ms(self, input_tokens: int, output_tokens: int) -> float:
        """The call's predicted time on this candidate, in ms."""
        ms = self.value("queue_ms") + self.value("network_ms") + self.value("ttft_base_ms")
        prefill, decode = self.value("prefill_tokens_per_s"), self.value("decode_tokens_per_s")
        if prefill > 0:
            ms += input_tokens / prefill * 1000
        if decode > 0:
            ms += output_tokens / decode * 1000
        ms += self.value("prefill_quadratic_ms") * (input_tokens / 1000) ** 2
        ms += self.value("decode_context_ms") * output_tokens * (input_tokens + output_tokens / 2) / 1000
        return ms

    def sample_ms(self, input_tokens: int, output_tokens: int, draw: float) -> float:
        """The call's time drawn from the spread the probe measured, in ms; ``draw`` in [0, 1) picks it.

        The probe calls nearest this call in predicted time (:data:`SPREAD_NEIGHBOURS`) each
        give a ratio, measured over predicted; ``draw`` picks one of them by rank, and the
        prediction is scaled by it.  Ratios rather than milliseconds, and from calls of a
        similar time, since what a call meets at load grows with its own length.  Calls slowed
        by a pause (:func:`typical`) are left out, as from the fit.  Without probe calls,
        :meth:`predict_ms`.
        """
        predicted = self.predict_ms(input_tokens, output_tokens)
        ratios = self._spread(predicted)
        if not ratios:
            return predicted
        return predicted * ratios[min(int(draw * len(ratios)), len(ratios) - 1)]

    def _spread(self, predicted_ms: float) -> list[float]:
        """Measured over predicted, sorted, for the probe calls nearest ``predicted_ms`` in predicted time."""
        paired = sorted(self._measured, key=lambda pm: abs(pm[0] - predicted_ms))
        nearest = paired[: max(3, round(len(paired) * SPREAD_NEIGHBOURS))]
        return sorted(m / p for p, m in nearest)

    @functools.cached_property
    def _measured(self) -> list[tuple[float, float]]:
        """(predicted, measured) ms of each probe call the spread draws from, worked out once: a target
        samples every recorded call."""
        paired = [(self.predict_ms(c.input_tokens, c.output_tokens), c.total_ms) for c in self.calls]
        paired = [(p, m) for p, m in paired if p > 0 and m > 0]
        kept = typical([abs(m - p) for p, m in paired])
        return [pm for pm, typical_call in zip(paired, kept, strict=True) if typical_call]

    def to_toml(self) -> str:
        """The profile as TOML, the format :func:`load_profile` reads."""
        lines = [f'name = "{self.name}"', f'kind = "{self.kind}"', f'date = "{self.date}"']
        if self.model:
            lines.append(f'model = "{self.model}"')
        if self.description:
            lines.append(f'description = "{_escape(self.description)}"')
        if self.concurrency is not None:
            lines.append(f"concurrency = {self.concurrency}")
        if self.residuals_ms:
            lines.append("residuals_ms = [" + ", ".join(f"{r:.1f}" for r in self.residuals_ms) + "]")
        if self.calls:
            lines.append("calls = [")
            lines += [
                f"  {{ input_tokens = {c.input_tokens}, output_tokens = {c.output_tokens},"
                f" ttft_ms = {c.ttft_ms:.1f}, total_ms = {c.total_ms:.1f} }},"
                for c in self.calls
            ]
            lines.append("]")
        lines += ["", "[figures]"]
        for name in FIGURES:
            if name in self.figures:
                figure = self.figures[name]
                lines.append(
                    f'{name} = {{ value = {figure.value:.6g}, source = "{_escape(figure.source)}" }}'
                )
        return "\n".join(lines) + "\n"


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def parse_profile(data: dict[str, Any], where: str) -> CandidateProfile:
    """A profile from parsed TOML; ``where`` names it in errors (a file, or a preset)."""
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise ProfileError(f"{where}: a profile needs a name")
    kind = data.get("kind")
    if kind is None:
        raise ProfileError(f"{where}: a profile needs a kind, one of {', '.join(KINDS)}")
    if kind not in KINDS:
        raise ProfileError(f"{where}: kind must be one of {', '.join(KINDS)}, not {kind!r}")
    entries = data.get("figures") or {}
    if not isinstance(entries, dict):
        raise ProfileError(f"{where}: figures must be a [figures] table, not {entries!r}")
    figures: dict[str, Figure] = {}
    for figure, entry in entries.items():
        if figure not in FIGURES:
            raise ProfileError(f"{where}: unknown figure {figure!r} (known: {', '.join(FIGURES)})")
        if not isinstance(entry, dict) or not isinstance(entry.get("value"), int | float):
            raise ProfileError(f"{where}: figures.{figure} needs a numeric value and a source")
        if (
            not 0 <= entry["value"] < math.inf
            or not isinstance(entry.get("source"), str)
            or not entry["source"]
        ):
            raise ProfileError(f"{where}: figures.{figure} must be a finite number ≥ 0 and say its source")
        figures[figure] = Figure(float(entry["value"]), entry["source"])
    if "decode_tokens_per_s" not in figures or figures["decode_tokens_per_s"].value <= 0:
        raise ProfileError(f"{where}: a profile needs a decode_tokens_per_s above 0")
    concurrency = data.get("concurrency")
    if concurrency is not None and (
        not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1
    ):
        raise ProfileError(f"{where}: concurrency must be a whole number of calls ≥ 1, not {concurrency!r}")
    return CandidateProfile(
        calls=_calls(data.get("calls") or [], where),
        name=name,
        kind=kind,
        date=str(data.get("date") or ""),
        figures=figures,
        model=data.get("model"),
        description=str(data.get("description") or ""),
        residuals_ms=_residuals(data.get("residuals_ms") or [], where),
        concurrency=concurrency,
    )


def _calls(entries: Any, where: str) -> tuple[ProbeCall, ...]:
    """A profile's probe calls, each checked: whole token counts, times in ms ≥ 0."""
    if not isinstance(entries, list):
        raise ProfileError(f"{where}: calls must be a list of probe calls")
    calls = []
    for k, entry in enumerate(entries):
        try:
            call = ProbeCall(
                int(entry["input_tokens"]),
                int(entry["output_tokens"]),
                float(entry["ttft_ms"]),
                float(entry["total_ms"]),
            )
        except (TypeError, KeyError, ValueError):
            raise ProfileError(
                f"{where}: calls[{k}] needs input_tokens, output_tokens, ttft_ms and total_ms"
            ) from None
        if min(call.input_tokens, call.output_tokens) < 0 or not all(
            0 <= ms < math.inf for ms in (call.ttft_ms, call.total_ms)
        ):
            raise ProfileError(f"{where}: calls[{k}] has a negative or non-finite figure")
        calls.append(call)
    return tuple(calls)


def _residuals(values: Any, where: str) -> list[float]:
    """A fit's residuals: finite milliseconds (they set the prediction's range)."""
    if not isinstance(values, list) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in values
    ):
        raise ProfileError(f"{where}: residuals_ms must be a list of finite numbers of ms")
    return [float(v) for v in values]


def load_profile(path: Path) -> CandidateProfile:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{path}: cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{path}: not valid TOML: {exc}") from None
    return parse_profile(data, str(path))


def load_presets() -> dict[str, CandidateProfile]:
    """The profiles shipped with agentscope, by name."""
    text = resources.files("agentscope.analysis").joinpath("profiles.toml").read_text(encoding="utf-8")
    data = tomllib.loads(text)
    return {
        name: parse_profile({"name": name, **entry}, f"preset {name}")
        for name, entry in data["profiles"].items()
    }


def resolve(name_or_path: str) -> CandidateProfile:
    """A preset by name, else a profile file by path."""
    presets = load_presets()
    if name_or_path in presets:
        return presets[name_or_path]
    path = Path(name_or_path)
    if path.exists():
        return load_profile(path)
    raise ProfileError(
        f"unknown target {name_or_path!r}: neither a preset ({', '.join(sorted(presets))}) nor a profile file"
    )
