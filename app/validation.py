"""The shapes every client-supplied request must have: the base of memsys's request models, the shared pydantic
string types and their plain-function form.

``RequestModel`` refuses a field it does not know, naming the nearest one it does, and takes no string for a number
or a boolean. ``Identifier`` (ids, names, keys: at most ``MAX_IDENTIFIER_CHARS``) and ``Text`` (free text, bounded
by the body size and per-field settings) both refuse what PostgreSQL cannot store: a NUL character (text columns
reject it) and a lone surrogate (it cannot be encoded as UTF-8). The JSON body decoder (app.http.json_body) applies
the same rule to every string of a body, whatever its field's type.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable
from typing import Annotated, Any, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from app.errors import InvalidParameter

MAX_IDENTIFIER_CHARS = 256
UNKNOWN = "Unknown field"
"""How the message of a field a request model does not know begins."""
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

MAX_METADATA_BYTES = 8192
MAX_METADATA_DEPTH = 4


def _bounded_metadata(value: dict[str, Any]) -> dict[str, Any]:
    def depth(node: Any) -> int:
        if isinstance(node, dict):
            return 1 + max((depth(child) for child in node.values()), default=0)
        if isinstance(node, list):
            return 1 + max((depth(child) for child in node), default=0)
        return 0

    if depth(value) > MAX_METADATA_DEPTH:
        raise ValueError(f"nests at most {MAX_METADATA_DEPTH} levels of objects and lists")
    size = len(json.dumps(value, ensure_ascii=False).encode("utf-8"))
    if size > MAX_METADATA_BYTES:
        raise ValueError(f"is {size} bytes as JSON; the limit is {MAX_METADATA_BYTES}")
    return value


Metadata = Annotated[dict[str, Any], AfterValidator(_bounded_metadata)]
"""A caller's own metadata: a JSON object of at most ``MAX_METADATA_BYTES`` and ``MAX_METADATA_DEPTH`` levels,
carried from a message to the memories formed from it, and filtered on (app.retrieval.filters)."""

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


class RequestModel(BaseModel):
    """The base of every request model of memsys's own API (v3): a field it does not know is refused, naming the
    nearest known one (``groupId`` must not quietly send a message to the sender's personal stream), and types are
    strict: ``"5"`` is no number, ``"true"`` no boolean (an integer still does for a float). JSON has no date type:
    each date or time field parses its ISO string in a ``mode="before"`` validator (``app.text.timeparse``)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @classmethod
    def model_validate(cls, obj: Any, *, strict: bool | None = None, **options: Any) -> Self:
        # Litestar validates every request body with strict=False, which would override this model's strict config.
        return super().model_validate(obj, strict=strict or None, **options)

    @model_validator(mode="wrap")
    @classmethod
    def _name_the_nearest_field(cls, data: Any, handler: Any) -> Any:
        try:
            return handler(data)
        except ValidationError as exc:
            errors = exc.errors()
            if not any(_unknown_here(error) for error in errors):
                raise
            details = [
                {
                    "type": PydanticCustomError(
                        error["type"],
                        _unknown_field(str(error["loc"][0]), cls.model_fields)
                        if _unknown_here(error)
                        else error["msg"],
                    ),
                    "loc": error["loc"],
                    "input": error.get("input"),
                }
                for error in errors
            ]
            raise ValidationError.from_exception_data(exc.title, details) from None


def _unknown_here(error: Any) -> bool:
    """An unknown field of this model itself (a nested model has named its own)."""
    return error["type"] == "extra_forbidden" and len(error["loc"]) == 1


def _unknown_field(name: str, fields: Iterable[str]) -> str:
    known = list(fields)
    nearest = nearest_field(name, known)
    if nearest is not None:
        return f"{UNKNOWN} (did you mean {nearest!r}?)"
    return f"{UNKNOWN} (known fields: {', '.join(known)})"


def _folded(name: str) -> str:
    return name.lower().replace("_", "").replace("-", "")


def nearest_field(name: str, fields: Iterable[str]) -> str | None:
    """The field ``name`` most likely meant: the same but for case, ``_`` and ``-`` (``groupId``: ``group_id``),
    else the closest spelling (``gruop_id``), else None."""
    by_folded = {_folded(field): field for field in fields}
    folded = _folded(name[:MAX_IDENTIFIER_CHARS])
    if folded in by_folded:
        return by_folded[folded]
    close = difflib.get_close_matches(folded, by_folded, n=1)
    return by_folded[close[0]] if close else None
