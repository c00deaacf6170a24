"""The shapes every client-supplied string must have: the shared pydantic types and their plain-function form.

``Identifier`` (ids, names, keys: at most ``MAX_IDENTIFIER_CHARS``) and ``Text`` (free text, bounded by
the body size and per-field settings) both refuse what PostgreSQL cannot store: a NUL character (text
columns reject it) and a lone surrogate (it cannot be encoded as UTF-8). The JSON body decoder
(app.http.json_body) applies the same rule to every string of a body, whatever its field's type.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field, TypeAdapter, ValidationError

from app.errors import InvalidParameter

MAX_IDENTIFIER_CHARS = 256
_SURROGATE = re.compile("[\ud800-\udfff]")


def unstorable(value: str) -> str | None:
    """Why ``value`` cannot be stored as text, or None. A decoded string holds surrogates only unpaired."""
    if "\x00" in value:
        return "must not contain a NUL character (\\u0000)"
    if not value.isascii() and _SURROGATE.search(value):
        return "must not contain a lone surrogate (\\ud800-\\udfff): it is not valid Unicode"
    return None


def _storable(value: str) -> str:
    reason = unstorable(value)
    if reason:
        raise ValueError(reason)
    return value


Text = Annotated[str, AfterValidator(_storable)]
"""Free text (content, queries, descriptions)."""


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


NonBlankText = Annotated[str, AfterValidator(_storable), AfterValidator(_not_blank)]
"""Free text that must say something (a query, a user's message)."""

Identifier = Annotated[str, Field(max_length=MAX_IDENTIFIER_CHARS), AfterValidator(_storable)]
"""An id, name or key: at most ``MAX_IDENTIFIER_CHARS`` characters."""

_IDENTIFIER = TypeAdapter(Identifier)


def check_identifier(name: str, value: str) -> str:
    """``value`` if it is a valid ``Identifier``, else ``InvalidParameter`` naming ``name`` (for path and
    query parameters, which do not go through a request model)."""
    try:
        return _IDENTIFIER.validate_python(value)
    except ValidationError as exc:
        message = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise InvalidParameter(f"Invalid field {name}: {message}") from exc


def check_path_identifier(name: str, value: str, raw_path: bytes | None, query_route: str) -> str:
    """``check_identifier`` for an id taken from a URL path. The router decodes ``%2F`` and drops a trailing ``/``
    before matching, so ``/users/a%2F`` would name user ``a``: a path that carries a ``/`` inside an id (encoded,
    doubled or trailing) is refused, naming ``query_route``, where any id goes as a query parameter."""
    raw = (raw_path or b"").lower()
    if b"%2f" in raw or raw.endswith(b"/") or b"//" in raw:
        raise InvalidParameter(f"Invalid field {name}: an id with '/' cannot go in the path; use {query_route}")
    return check_identifier(name, value)
