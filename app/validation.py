"""Bounds on identifiers a client sends (placeholder, replaced by the hostile-input work)."""

from __future__ import annotations

from app.errors import InvalidParameter

MAX_IDENTIFIER_CHARS = 256


def check_identifier(name: str, value: str) -> str:
    if not value.strip() or len(value) > MAX_IDENTIFIER_CHARS or "\x00" in value:
        raise InvalidParameter(f"Invalid field {name}: 1 to {MAX_IDENTIFIER_CHARS} characters, no NUL")
    return value
