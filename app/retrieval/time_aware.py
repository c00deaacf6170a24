"""Time-aware retrieval (seed 004): the window of days a query names, fitted into the SQL's time bounds,
and the boost of memories inside it.

Shared by lightweight retrieval (request flag ``time_aware``, default off) and agentic retrieval (on).
"""

from __future__ import annotations

import dataclasses
from datetime import date

from app.retrieval.repository import SearchFilters
from app.text.time_expressions import TimeWindow
from app.text.timeparse import day_end, day_start


def fit_filters(filters: SearchFilters, window: TimeWindow | None, explicit_range: bool) -> SearchFilters:
    """Fit the SQL's time bounds to the window the query names.

    A window the query asks for plainly ("only last week") becomes the time filter. Any other window
    widens the default ``time_range_days`` so that memories in it can be found and boosted ("two years
    ago" must not be cut off by the default of 365 days); a ``time_range_days`` the caller set is kept.
    """
    if window is None:
        return filters
    start, end = day_start(window.start), day_end(window.end)
    if window.plain_filter:
        if explicit_range:
            start, end = max(filters.time_from, start), min(filters.time_to, end)
        return dataclasses.replace(filters, time_from=start, time_to=end)
    if explicit_range:
        return filters
    return dataclasses.replace(filters, time_from=min(filters.time_from, start), time_to=max(filters.time_to, end))


def in_window(memory: dict, window: TimeWindow) -> bool:
    """The memory's day lies in the window, or its validity overlaps it."""
    day = date.fromisoformat(str(memory["timestamp"])[:10])
    if window.start <= day <= window.end:
        return True
    valid_from, valid_to = memory.get("valid_from"), memory.get("valid_to")
    if valid_from or valid_to:
        start = date.fromisoformat(str(valid_from)[:10]) if valid_from else date.min
        end = date.fromisoformat(str(valid_to)[:10]) if valid_to else date.max
        return start <= window.end and end >= window.start
    return False


def time_factor(memory: dict, window: TimeWindow | None, boost: float) -> float | None:
    """The memory's time factor: ``boost`` inside the window, 1 outside; None when a plain filter drops it."""
    if window is None:
        return 1.0
    if in_window(memory, window):
        return boost
    return None if window.plain_filter else 1.0
