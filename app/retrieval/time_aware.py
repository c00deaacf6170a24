"""Time-aware retrieval (seed 004): the window of days a query names, fitted into the SQL's time bounds,
and the boost of memories inside it.

Shared by lightweight retrieval and agentic retrieval (request flag ``time_aware``, on by default in both).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC, date, datetime, tzinfo
from operator import itemgetter

import numpy as np

from app.conversation_meta import service as conversation_meta
from app.retrieval import repository
from app.retrieval.repository import SearchFilters
from app.runtime import Runtime
from app.text.cpu import run_off_loop
from app.text.now_questions import asks_about_now
from app.text.time_expressions import TimeWindow, find_time_window
from app.text.timeparse import day_end, day_start


async def reference_day(runtime: Runtime, group_id: str | None, current_time: date | None) -> tuple[date, tzinfo]:
    """The day a query's time words count from and the zone of its days: the conversation's
    ``default_timezone`` (conversation-meta of ``group_id``), else UTC; ``current_time`` or today there."""
    zone: tzinfo = UTC
    if group_id:
        async with runtime.engine.connect() as conn:
            zone = await conversation_meta.zone_of(conn, group_id)
    return current_time or datetime.now(zone).date(), zone


async def rule_window(query: str, today: date, zone: tzinfo) -> TimeWindow | None:
    """The window the rules find in the query, in ``zone``'s days (CPU work on a client's text: off the loop)."""
    window = await run_off_loop(find_time_window, query, today)
    return dataclasses.replace(window, zone=zone) if window else None


async def query_window(
    runtime: Runtime, query: str, group_id: str | None, current_time: date | None
) -> TimeWindow | None:
    """The window the query names, in its conversation's days; None, without reading the conversation's zone,
    when the rules find no time expression (whether one is found does not depend on the day it counts from). The
    rules run again only when the conversation's today is another day than UTC's."""
    counted_from = current_time or datetime.now(UTC).date()
    window = await run_off_loop(find_time_window, query, counted_from)
    if window is None:
        return None
    today, zone = await reference_day(runtime, group_id, current_time)
    if today != counted_from:
        return await rule_window(query, today, zone)
    return dataclasses.replace(window, zone=zone)


def fit_filters(filters: SearchFilters, window: TimeWindow | None, explicit_range: bool) -> SearchFilters:
    """Fit the SQL's time bounds to the window the query names.

    A window the query asks for plainly ("only last week") becomes the time filter. Any other window
    widens the default ``time_range_days`` so that memories in it can be found and boosted ("two years
    ago" must not be cut off by a range the caller did not set); a ``time_range_days`` the caller set is kept.
    """
    if window is None:
        return filters
    start, end = day_start(window.start, window.zone), day_end(window.end, window.zone)
    if window.plain_filter:
        if explicit_range:
            start, end = max(filters.time_from, start), min(filters.time_to, end)
        return dataclasses.replace(filters, time_from=start, time_to=end)
    if explicit_range:
        return filters
    return dataclasses.replace(filters, time_from=min(filters.time_from, start), time_to=max(filters.time_to, end))


def in_window(memory: dict, window: TimeWindow) -> bool:
    """The memory's day (in the window's zone) lies in the window, or its validity overlaps it."""
    day = _day_in(str(memory["timestamp"]), window.zone)
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


def _day_in(timestamp: str, zone: tzinfo) -> date:
    try:
        return datetime.fromisoformat(timestamp).astimezone(zone).date()
    except (ValueError, OverflowError):  # naive, or at the calendar's edge: its own day
        return date.fromisoformat(timestamp[:10])


def newest_first(
    memories: list[dict],
    band: float,
    key: Callable[[dict], float] = itemgetter("score"),
    alike: Callable[[dict, dict], bool] = lambda newer, older: True,
) -> list[dict]:
    """For a question about now (``app.text.now_questions``): of two memories alike (``alike``: about the same thing)
    that the search found about equally well (the newer's score at least ``band`` times the older's), the newer ranks
    first, where the older stood; a count, a duration or a place said again later is likelier what is true now.
    Otherwise the search's order is kept.

    Each memory's key is its score, lifted to the key of any older memory alike ranked above it within the band; ties
    go to the newer. ``memories`` come in the order ``key`` gives them (n at most ``rrf_candidates``: n²
    comparisons)."""
    times = [datetime.fromisoformat(str(memory["timestamp"])) for memory in memories]
    scores = [float(key(memory)) for memory in memories]
    keys: list[float] = []
    for n, (when, score) in enumerate(zip(times, scores, strict=True)):
        lifted = score
        for m in range(n):
            if times[m] < when and score >= band * scores[m] and keys[m] > lifted and alike(memories[n], memories[m]):
                lifted = keys[m]
        keys.append(lifted)
    order = sorted(range(len(memories)), key=lambda i: (-keys[i], -times[i].timestamp(), i))
    return [memories[i] for i in order]


def orders_now(query: str, time_aware: bool, window: TimeWindow | None) -> bool:
    """Whether a search orders its answer for a question about now (``now_first``): ``time_aware`` on, no time window
    named, and the question about the present (``app.text.now_questions``)."""
    return time_aware and window is None and asks_about_now(query)


async def now_first(
    runtime: Runtime, memories: list[dict], key: Callable[[dict], float] = itemgetter("score")
) -> list[dict]:
    """``newest_first`` for a question about now, two memories being alike when their stored vectors' cosine is at
    least ``now_alike`` (a message not yet formed, which has none here, is alike to none)."""
    settings = runtime.settings
    if len(memories) < 2:
        return memories
    async with runtime.engine.connect() as conn:
        stored = await repository.vectors(conn, runtime.tenant, [memory["id"] for memory in memories])
    unit = {}
    for memory_id, vector in stored.items():
        array = np.asarray(vector, dtype=np.float32)
        unit[memory_id] = array / (np.linalg.norm(array) or 1.0)

    def alike(newer: dict, older: dict) -> bool:
        a, b = unit.get(newer["id"]), unit.get(older["id"])
        return a is not None and b is not None and len(a) == len(b) and float(a @ b) >= settings.now_alike

    return newest_first(memories, settings.now_band, key, alike)
