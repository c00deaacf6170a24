"""Parsing of the timestamps the API accepts, and the calendar's edges (years 1 to 9999) that every
computation with them must stay within."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from typing import Any

_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")

EARLIEST = datetime.min.replace(tzinfo=UTC)
LATEST = datetime.max.replace(tzinfo=UTC)
_LARGEST_OFFSET = timedelta(hours=23, minutes=59)
"""ISO 8601 offsets reach ±23:59: an instant this far inside the calendar exists in every time zone."""


def parse_iso_datetime(value: Any, *, naive: tzinfo | None = UTC) -> datetime:
    """ISO 8601 with or without an offset; a time without one is in ``naive`` (UTC by default: seed 000,
    FAQ 7), or stays naive with ``naive=None`` (for a caller that knows the zone later: ``in_zone``)."""
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError as exc:
            raise ValueError(f"{value!r} is not an ISO 8601 date-time") from exc
    else:
        raise ValueError("must be an ISO 8601 date-time string")
    if parsed.tzinfo is None:
        if naive is None:
            in_zone(parsed, UTC)  # the calendar's edges; the zone only moves it by up to a day
            return parsed
        parsed = parsed.replace(tzinfo=naive)
    return in_zone(parsed, parsed.tzinfo)


def in_zone(moment: datetime, zone: tzinfo) -> datetime:
    """``moment`` (if naive: read in ``zone``), checked to lie within the calendar in every time zone."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone)
    if not _in_every_zone(moment):
        # Shown in a conversation's time zone it would fall outside the calendar (an OverflowError).
        raise ValueError("must lie between 0001-01-01T23:59:00Z and 9999-12-31T00:00:59Z")
    return moment


def _in_every_zone(moment: datetime) -> bool:
    try:
        utc = moment.astimezone(UTC)
    except OverflowError:
        return False
    return EARLIEST + _LARGEST_OFFSET <= utc <= LATEST - _LARGEST_OFFSET


def day_start(day: date, zone: tzinfo = UTC) -> datetime:
    """Midnight at the start of ``day`` in ``zone`` (UTC's at the calendar's edges, where the zone's is not)."""
    start = datetime.combine(day, time(0), tzinfo=zone)
    return start if zone is UTC or _in_every_zone(start) else datetime.combine(day, time(0), tzinfo=UTC)


def day_end(day: date, zone: tzinfo = UTC) -> datetime:
    """The exclusive end of ``day`` in ``zone``: the next midnight, or the calendar's last instant on 9999-12-31."""
    return LATEST if day == date.max else day_start(day + timedelta(days=1), zone)


def parse_day(value: Any) -> date:
    """A calendar day in ``YYYY-MM-DD``."""
    if isinstance(value, date) and not isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not _DAY.fullmatch(value.strip()):
        raise ValueError("must be a date in YYYY-MM-DD format")
    try:
        return date.fromisoformat(value.strip())
    except ValueError as exc:
        raise ValueError(f"{value!r} is not a valid date") from exc
