"""Budget periods: calendar day, ISO week (Monday), calendar month, or the key's whole life — in UTC.

A period is named by its start (``month:2026-12``, ``week:2026-11-30``, ``day:2026-12-01``,
``total``) so every replica files a request's cost under the same name, and a new period starts
from zero without anyone resetting anything.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

_cache: dict[str, tuple[str, float, float]] = {}


def period_bounds(period: str, now: float) -> tuple[str, float | None, float | None]:
    """(id, start, end) epoch seconds of the period containing ``now``; ``total`` has no bounds."""
    if period == "total":
        return "total", None, None
    hit = _cache.get(period)
    if hit is not None and hit[1] <= now < hit[2]:
        return hit
    found = _bounds(period, now)
    _cache[period] = found
    return found


def _bounds(period: str, now: float) -> tuple[str, float, float]:
    t = datetime.fromtimestamp(now, UTC)
    day = t.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "day":
        start, end = day, day + timedelta(days=1)
        name = f"day:{start:%Y-%m-%d}"
    elif period == "week":
        start = day - timedelta(days=day.weekday())
        end = start + timedelta(days=7)
        name = f"week:{start:%Y-%m-%d}"
    elif period == "month":
        start = day.replace(day=1)
        end = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)
        name = f"month:{start:%Y-%m}"
    else:
        raise ValueError(f"unknown budget period {period!r}")
    return name, start.timestamp(), end.timestamp()
