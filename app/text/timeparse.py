"""Parsing of the timestamps the API accepts."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from typing import Any

_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def parse_iso_datetime(value: Any) -> datetime:
    """ISO 8601 with or without an offset; a naive time is UTC (seed 000, FAQ 7)."""
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
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


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
