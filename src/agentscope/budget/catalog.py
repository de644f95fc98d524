"""Pricing catalogs: per-token API prices and fixed hourly capacity, from a TOML file."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

HOURS_PER_MONTH = 730.0


class CatalogError(ValueError):
    """A pricing file that cannot be used; the message names the entry and the field."""


@dataclass(frozen=True)
class PerTokenOption:
    name: str
    provider: str
    model: str
    input_per_million: float
    output_per_million: float
    cached_input_per_million: float | None = None
    limits: dict[str, Any] = field(default_factory=dict)
    source: str = ""

    def cost(self, input_tokens: float, output_tokens: float, cached_tokens: float = 0.0) -> float:
        """Dollars for these tokens; cached input is billed at its own price where one is listed."""
        cached_price = self.cached_input_per_million
        if cached_price is None:
            return (input_tokens * self.input_per_million + output_tokens * self.output_per_million) / 1e6
        uncached = max(0.0, input_tokens - cached_tokens)
        return (
            uncached * self.input_per_million
            + min(cached_tokens, input_tokens) * cached_price
            + output_tokens * self.output_per_million
        ) / 1e6

    def blended_per_million(self, input_share: float) -> float:
        """Price of a million tokens split ``input_share`` input / the rest output."""
        return input_share * self.input_per_million + (1 - input_share) * self.output_per_million


@dataclass(frozen=True)
class FixedOption:
    name: str
    provider: str
    unit: str
    per_hour: float
    count: int = 1
    source: str = ""

    @property
    def monthly_cost(self) -> float:
        return self.per_hour * self.count * HOURS_PER_MONTH


@dataclass(frozen=True)
class Catalog:
    per_token: tuple[PerTokenOption, ...]
    fixed: tuple[FixedOption, ...]
    origin: str

    def for_model(self, model: str) -> list[PerTokenOption]:
        return [option for option in self.per_token if option.model == model]

    def check_model_map(self, model_map: Mapping[str, str]) -> None:
        """Refuse a traced model priced as a model this catalog has no price for: a typo there would
        leave the traced model's calls unpriced without a word."""
        for traced, candidate in model_map.items():
            if not self.for_model(candidate):
                known = ", ".join(sorted({option.model for option in self.per_token})) or "none"
                raise CatalogError(
                    f"--model-map '{traced}={candidate}': {self.origin} prices no model {candidate!r} "
                    f"(its models: {known})"
                )


def _number(entry: dict[str, Any], key: str, where: str, required: bool = True) -> float | None:
    value = entry.get(key)
    if value is None and not required:
        return None
    if not _finite(value) or value < 0:
        raise CatalogError(f"{where}: {key} must be a non-negative number, got {value!r}")
    return float(value)


def _finite(value: Any) -> bool:
    """Whether a TOML value is a finite number (TOML has ``nan`` and ``inf``; a boolean is no number)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _entries(data: dict[str, Any], kind: str, origin: str) -> list[dict[str, Any]]:
    """The ``[[kind]]`` tables of a catalog (none when it has no such key)."""
    entries = data.get(kind, [])
    if not isinstance(entries, list) or not all(isinstance(entry, dict) for entry in entries):
        raise CatalogError(f"{origin}: {kind} must be [[{kind}]] tables, got {entries!r}")
    return entries


_LIMITS = ("tokens_per_minute", "requests_per_minute")


def _limits(entry: dict[str, Any], where: str) -> dict[str, Any]:
    """An option's rate limits: each a positive number (a limit of 0 would be no service at all)."""
    limits = entry.get("limits") or {}
    if not isinstance(limits, dict):
        raise CatalogError(f"{where}: limits must be a [per_token.limits] table, got {limits!r}")
    for key in _LIMITS:
        value = limits.get(key)
        if value is not None and (not _finite(value) or value <= 0):
            raise CatalogError(f"{where}: limits.{key} must be a positive number, got {value!r}")
    return dict(limits)


def _text(entry: dict[str, Any], key: str, where: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value:
        raise CatalogError(f"{where}: {key} must be a non-empty string")
    return value


def parse(text: str, origin: str) -> Catalog:
    """A catalog from TOML text; CatalogError naming the bad entry otherwise."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"{origin}: not valid TOML: {exc}") from None
    per_token, fixed = [], []
    for n, entry in enumerate(_entries(data, "per_token", origin), start=1):
        where = f"{origin}: per_token entry {n} ({entry.get('name', '?')})"
        per_token.append(
            PerTokenOption(
                name=_text(entry, "name", where),
                provider=_text(entry, "provider", where),
                model=_text(entry, "model", where),
                input_per_million=_number(entry, "input_per_million", where),
                output_per_million=_number(entry, "output_per_million", where),
                cached_input_per_million=_number(entry, "cached_input_per_million", where, required=False),
                limits=_limits(entry, where),
                source=str(entry.get("source", "")),
            )
        )
    for n, entry in enumerate(_entries(data, "fixed", origin), start=1):
        where = f"{origin}: fixed entry {n} ({entry.get('name', '?')})"
        count = entry.get("count", 1)
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise CatalogError(f"{where}: count must be a positive whole number, got {count!r}")
        fixed.append(
            FixedOption(
                name=_text(entry, "name", where),
                provider=_text(entry, "provider", where),
                unit=_text(entry, "unit", where),
                per_hour=_number(entry, "per_hour", where),
                count=count,
                source=str(entry.get("source", "")),
            )
        )
    if not per_token and not fixed:
        raise CatalogError(f"{origin}: no [[per_token]] or [[fixed]] entries")
    names = [option.name for option in (*per_token, *fixed)]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise CatalogError(
            f"{origin}: option names must be unique; given more than once: {', '.join(repeated)}"
        )
    return Catalog(tuple(per_token), tuple(fixed), origin)


def load(path: str | Path | None = None) -> Catalog:
    """The catalog at ``path``, or the default catalog shipped with agentscope."""
    if path is None:
        text = resources.files("agentscope.budget").joinpath("catalog.toml").read_text(encoding="utf-8")
        return parse(text, "default catalog (prices as of 2026-08-27)")
    try:
        return parse(Path(path).read_text(encoding="utf-8"), str(path))
    except OSError as exc:
        raise CatalogError(f"cannot read pricing file {path}: {exc.strerror}") from None
