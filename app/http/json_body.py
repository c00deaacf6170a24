"""The one place request bodies are decoded: hostile JSON is a 400 naming what is wrong, never a 500.

Litestar decodes bodies with msgspec, which raises ``RecursionError`` on a body nested thousands of
levels deep (Litestar lets it through as a 500) and cannot say which field holds a lone surrogate. Here
the nesting depth is measured on the raw bytes before anything is decoded, and every string of the
decoded body, keys included, must be storable (``app.validation.unstorable``), so a NUL or a lone
surrogate in any field is a 400 naming that field, whatever type the field has.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

import msgspec
from litestar import Request
from litestar.types import Empty

from app.errors import InvalidParameter, UnsupportedMediaType
from app.validation import unstorable

MAX_JSON_DEPTH = 32
"""Deepest nesting of arrays and objects a request body may have; memsys's own bodies need three."""

# A string runs to its closing quote, or to the end of a body that never closes it: without the second
# way out, an unclosed string made the scan restart from every later quote (quadratic; 80 KB took 25 s).
_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+(?:"|\Z)', re.DOTALL)
_NOT_BRACKET = bytes(set(range(256)) - set(b"[]{}"))
_STEP = [0] * 256
_STEP[ord("[")] = _STEP[ord("{")] = 1
_STEP[ord("]")] = _STEP[ord("}")] = -1
# A NUL or a surrogate can only reach a decoded string as a \u escape (raw ones are not valid JSON).
_RISKY_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")


class MemsysRequest(Request):
    """Litestar's request with ``json()`` going through ``decode_body``."""

    async def json(self) -> Any:
        if self._connection_state.json is Empty:
            body = await self.body()
            if body:
                check_media_type(self.headers.get("content-type", ""))
            self._connection_state.json = decode_body(body or b"null")
        return await super().json()


def check_media_type(content_type: str) -> None:
    """A body is JSON only when it says so: a web page's form, ``text/plain`` or typeless post (which a browser
    sends to any address without asking) is refused, not read as JSON."""
    media_type = content_type.split(";")[0].strip().lower()
    json_like = media_type.startswith("application/") and media_type.endswith("+json")
    if media_type != "application/json" and not json_like:
        raise UnsupportedMediaType(
            f"Invalid header Content-Type: {media_type or 'none'!r}; a request body must be application/json"
        )


def decode_body(raw: bytes) -> Any:
    """The JSON value of ``raw``; ``InvalidParameter`` when it is malformed, too deep or holds a string
    that cannot be stored."""
    if json_depth(raw) > MAX_JSON_DEPTH:
        raise InvalidParameter(f"The JSON body is nested more than {MAX_JSON_DEPTH} levels deep")
    try:
        value = msgspec.json.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        # msgspec refuses a lone surrogate outright; find the field that holds it to name it.
        _raise_for_unstorable(_decode_leniently(raw))
        raise InvalidParameter("Malformed JSON body") from exc
    if _RISKY_ESCAPE.search(raw):
        _raise_for_unstorable(value)
    return value


def json_depth(raw: bytes) -> int:
    """How deep arrays and objects nest in ``raw`` (brackets inside strings do not count)."""
    if raw.count(b"[") + raw.count(b"{") <= MAX_JSON_DEPTH:
        return 0  # cannot be deeper than the limit; skip the scan
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKET)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def _decode_leniently(raw: bytes) -> Any:
    try:
        return json.loads(raw.decode("utf-8", "surrogatepass"))
    except ValueError:
        return None


def _raise_for_unstorable(value: Any) -> None:
    """``InvalidParameter`` naming a string (or key) in ``value`` that cannot be stored, if there is one."""
    pending: list[tuple[str, Any]] = [("", value)]
    while pending:
        path, item = pending.pop()
        if isinstance(item, str):
            reason = unstorable(item)
            if reason:
                raise InvalidParameter(f"Invalid field {path or 'body'}: {reason}")
        elif isinstance(item, dict):
            for key, child in item.items():
                reason = unstorable(key)
                if reason:
                    raise InvalidParameter(f"Invalid field {path or 'body'}: a key {reason}")
                pending.append((f"{path}.{key}" if path else key, child))
        elif isinstance(item, list):
            pending.extend((f"{path}.{index}" if path else str(index), child) for index, child in enumerate(item))
