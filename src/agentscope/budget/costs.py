"""The arithmetic of a budget: token volumes, monthly costs, break-even points, headroom.

Pure functions over plain numbers, so each can be checked against published
figures (tests/test_budget.py does).
"""

from __future__ import annotations

from agentscope.budget.catalog import HOURS_PER_MONTH, FixedOption, PerTokenOption

SECONDS_PER_MONTH = HOURS_PER_MONTH * 3600
MINUTES_PER_MONTH = HOURS_PER_MONTH * 60


def per_second(monthly: float) -> float:
    """Average rate per second of a monthly volume (a month is 730 hours)."""
    return monthly / SECONDS_PER_MONTH


def per_minute(monthly: float) -> float:
    return monthly / MINUTES_PER_MONTH


def break_even_tokens(option: PerTokenOption, fixed: FixedOption, input_share: float) -> float:
    """Monthly tokens at which ``option`` costs as much as renting ``fixed`` all month.

    Tokens are priced at the blend of input and output prices given by ``input_share``
    (the traced mix).  Whether ``fixed`` could serve that volume is not modelled.
    """
    blended = option.blended_per_million(input_share)
    return float("inf") if blended <= 0 else fixed.monthly_cost / blended * 1e6


def headroom(option: PerTokenOption, tokens_per_month: float, requests_per_month: float) -> list[dict]:
    """Average use of each rate limit the option states (peaks are higher than averages)."""
    rows = []
    limits = option.limits
    if isinstance(limits.get("tokens_per_minute"), (int, float)):
        use = per_minute(tokens_per_month)
        rows.append(_limit(option, "tokens_per_minute", limits["tokens_per_minute"], use))
    if isinstance(limits.get("requests_per_minute"), (int, float)):
        use = per_minute(requests_per_month)
        rows.append(_limit(option, "requests_per_minute", limits["requests_per_minute"], use))
    return rows


def _limit(option: PerTokenOption, name: str, limit: float, use: float) -> dict:
    return {
        "option": option.name,
        "tier": option.limits.get("tier"),
        "limit": name,
        "limit_value": float(limit),
        "average_use": use,
        "share": use / limit if limit else float("inf"),
    }
