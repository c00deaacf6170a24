"""What keeps the inspector safe in a browser (issue 27): server-side sessions, the same-origin check of its forms,
CSRF tokens, and the headers every inspector response carries.

**Sessions.** The login cookie holds a random session id (256 bits), never the API key. PostgreSQL keeps the
sessions (``inspector_sessions``, migration 0028), so every replica behind a load balancer knows a cookie another
one gave: the id as its SHA-256 only, the key as its hash, as ``api_keys`` holds it — a cookie that leaks (a proxy's
log, a shared machine) is worth nothing once the session ends, nothing a browser stores can call the API, and the
table gives no cookie and no key away. A session ends at logout, when its key stops working (revoked: the next
page finds no valid key), or after ``SESSION_SECONDS``.
**Forms.** Login and logout are POSTs that a page of another origin must not make: their ``Origin`` must be this
server's (a browser always sends it on a POST; a client without it and without ``Sec-Fetch-Site`` is not a
browser, so not the victim of a forged request). Logout also needs the session's CSRF token, which only the
inspector's own pages hold (in the form).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from litestar.datastructures import MutableScopeHeaders
from litestar.types import Message, Scope
from sqlalchemy.ext.asyncio import AsyncEngine

from app.http.auth import INSPECTOR_PATH
from app.http.limits import request_path
from app.inspect import repository
from app.tenancy.service import key_actor, key_hash

SESSION_SECONDS = 12 * 3600

SECURITY_HEADERS = {
    # No script at all; the one inline <style> of the layout; forms post to this origin only; never in a frame.
    "content-security-policy": (
        "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; base-uri 'none'; "
        "frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


@dataclass(frozen=True)
class Session:
    key_hash: str
    actor: str
    """Who the memory history names for the session's edits: the key's prefix, as for a request with the key."""
    csrf_token: str


class InspectorSessions:
    """Session id → the key (its hash) it signs in with and its CSRF token, in PostgreSQL; one per app."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def open(self, key: str) -> str:
        """A new session for a valid key; its id (the cookie's value)."""
        session_id = secrets.token_urlsafe(32)
        row = {
            "id_hash": _id_hash(session_id),
            "key_hash": key_hash(key),
            "actor": key_actor(key),
            "csrf_token": secrets.token_urlsafe(32),
        }
        async with self._engine.begin() as conn:
            await repository.open_session(conn, row, SESSION_SECONDS)
        return session_id

    async def get(self, session_id: str | None) -> Session | None:
        if not session_id:
            return None
        async with self._engine.connect() as conn:
            row = await repository.session(conn, _id_hash(session_id))
        return Session(**row) if row else None

    async def close(self, session_id: str | None) -> None:
        if session_id:
            async with self._engine.begin() as conn:
                await repository.close_session(conn, _id_hash(session_id))


def _id_hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def csrf_token_matches(session: Session | None, token: str) -> bool:
    return session is not None and secrets.compare_digest(session.csrf_token.encode(), token.encode())


def same_origin(headers: Mapping[str, str]) -> bool:
    """Whether a form POST comes from a page of this server: its ``Origin`` names the host it was sent to (the
    default ports aside: a proxy may end TLS in front), or is ``null`` with ``Sec-Fetch-Site: same-origin``.
    Without ``Origin``, only a request that is not a browser's cross-site one (no ``Sec-Fetch-Site``, or
    ``same-origin`` / ``none``) passes."""
    origin = headers.get("origin")
    fetch_site = headers.get("sec-fetch-site")
    if origin is None:
        return fetch_site in (None, "same-origin", "none")
    if origin == "null":
        # What a browser sends from a page whose Referrer-Policy is no-referrer (ours): then the browser's own
        # Sec-Fetch-Site, which no page can set, says whether the form was this origin's.
        return fetch_site == "same-origin"
    parts = urlsplit(origin)
    host = headers.get("host")
    if parts.scheme not in ("http", "https") or not parts.netloc or not host:
        return False
    return _authority(parts.netloc) == _authority(host)


def _authority(netloc: str) -> str:
    netloc = netloc.lower()
    for default in (":80", ":443"):
        netloc = netloc.removesuffix(default)
    return netloc


async def security_headers(message: Message, scope: Scope) -> None:
    """The app's ``before_send`` hook: every inspector response (pages, redirects, errors, and the refusals of
    the admission layer in front of it) carries ``SECURITY_HEADERS``."""
    if message["type"] == "http.response.start" and _is_inspector(scope):
        headers = MutableScopeHeaders.from_message(message)
        for name, value in SECURITY_HEADERS.items():
            headers[name] = value


def _is_inspector(scope: Scope) -> bool:
    path = request_path(scope)
    return path == INSPECTOR_PATH or path.startswith(INSPECTOR_PATH + "/")
