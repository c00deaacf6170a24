"""What keeps the inspector safe in a browser (issue 27): server-side sessions, the same-origin check of its forms,
CSRF tokens, and the headers every inspector response carries.

**Sessions.** The login cookie holds a random session id (256 bits), never the API key: the key stays in this
process's memory, mapped from the id, so a cookie that leaks (a proxy's log, a shared machine) is worth nothing
once the session ends, and nothing a browser stores can call the API. A session ends at logout, when its key
stops working (revoked: the next page finds no valid key), after ``SESSION_SECONDS``, or when the server
restarts (memory only: the inspector is a tool a person signs in to again; no table, no migration). Sessions are
per process, like the key cache; ``memsys serve`` runs one.
**Forms.** Login and logout are POSTs that a page of another origin must not make: their ``Origin`` must be this
server's (a browser always sends it on a POST; a client without it and without ``Sec-Fetch-Site`` is not a
browser, so not the victim of a forged request). Logout also needs the session's CSRF token, which only the
inspector's own pages hold (in the form).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from litestar.datastructures import MutableScopeHeaders
from litestar.types import Message, Scope

from app.http.auth import INSPECTOR_PATH
from app.http.limits import request_path

SESSION_SECONDS = 12 * 3600
MAX_SESSIONS = 10_000
"""Sessions kept at most; beyond, the oldest ends (only valid keys open one)."""

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


@dataclass
class Session:
    key: str
    csrf_token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    expires: float = field(default_factory=lambda: time.monotonic() + SESSION_SECONDS)


class InspectorSessions:
    """Session id → the API key it signs in with and its CSRF token; one per app."""

    def __init__(self) -> None:
        self._sessions: dict[str, Session] = {}

    def open(self, key: str) -> str:
        """A new session for a valid key; its id (the cookie's value)."""
        if len(self._sessions) >= MAX_SESSIONS:
            del self._sessions[next(iter(self._sessions))]  # the oldest: dicts keep insertion order
        session_id = secrets.token_urlsafe(32)
        self._sessions[session_id] = Session(key)
        return session_id

    def get(self, session_id: str | None) -> Session | None:
        session = self._sessions.get(session_id) if session_id else None
        if session is not None and session.expires < time.monotonic():
            self.close(session_id)
            return None
        return session

    def close(self, session_id: str | None) -> None:
        if session_id:
            self._sessions.pop(session_id, None)


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
