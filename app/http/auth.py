"""The guard every route passes: the request's API key becomes its tenant (``request.state.tenant``).

Public routes (``/``, ``/health``, ``/metrics``) are marked ``opt={"public": True}``, which also declares them
keyless in the OpenAPI document (app.http.docs); the API docs and their assets live under the docs path.
The tenant of a valid key is remembered for ``MEMSYS_KEY_CACHE_SECONDS``; 0 looks every request's key up in the
database. Any change to the keys empties that memory at once where the keys watch listens (app.tenancy.watch, plain
PostgreSQL; on Citus a revoked key keeps working for at most that long). A request without a key is served
anonymously without a query while the watch knows no active key exists, and looks the keys up otherwise: a key
created for an anonymous server closes it at once either way. Refusals are never remembered: random keys cannot
fill the cache.
Under /inspect the key may also come from the inspector's session, named by its login cookie (app.inspect.browser).
"""

from __future__ import annotations

import time

from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

from app.runtime import Runtime
from app.tenancy import service as keys

DOCS_PATHS = ("/docs",)  # the OpenAPI document, Swagger UI and its files (app.http.docs)
INSPECTOR_PATH = "/inspect"  # the web inspector (app.inspect), where the key may come in a cookie
INSPECTOR_SESSION_COOKIE = "memsys_session"  # a session id (app.inspect.browser), never the key
_CACHE_LIMIT = 10_000


class KeyCache:
    """Hash of a valid key → (its tenant, expiry); one per app."""

    def __init__(self, ttl_s: float) -> None:
        self.ttl_s = ttl_s
        self._entries: dict[str, tuple[str, float]] = {}

    def get(self, key_hash: str) -> str | None:
        entry = self._entries.get(key_hash)
        if entry is None or entry[1] < time.monotonic():
            return None
        return entry[0]

    def clear(self) -> None:
        self._entries.clear()

    def put(self, key_hash: str, tenant: str) -> None:
        if self.ttl_s <= 0:
            return
        if len(self._entries) >= _CACHE_LIMIT:  # only valid keys get here: as many as the database holds
            self._entries.clear()
        self._entries[key_hash] = (tenant, time.monotonic() + self.ttl_s)


def bearer_token(connection: ASGIConnection) -> str | None:
    """The key of ``Authorization: Bearer``."""
    scheme, _, token = connection.headers.get("authorization", "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def inspector_cookie(connection: ASGIConnection) -> str | None:
    """Under /inspect, the session id of the login form's cookie (a browser navigating cannot send a header)."""
    path = connection.url.path
    if path == INSPECTOR_PATH or path.startswith(INSPECTOR_PATH + "/"):
        return connection.cookies.get(INSPECTOR_SESSION_COOKIE)
    return None


async def authenticate(connection: ASGIConnection, handler: BaseRouteHandler) -> None:
    """The request's tenant (``state.tenant``) and who it is (``state.actor``): from its bearer key, or, under
    /inspect without one, from the inspector session its cookie names (``state.inspector_session``)."""
    if handler.opt.get("public") or connection.url.path.startswith(DOCS_PATHS):
        return
    runtime: Runtime = connection.app.state.runtime
    cache: KeyCache = connection.app.state.key_cache
    bearer = bearer_token(connection)
    session = None
    if bearer is None and (cookie := inspector_cookie(connection)):
        session = await connection.app.state.inspector_sessions.get(cookie)
    connection.state.inspector_session = session
    key_hash = keys.key_hash(bearer) if bearer else session.key_hash if session else None
    anonymous_ok = keys.anonymous_allowed(runtime.settings.host, runtime.settings.allow_anonymous)
    tenant = cache.get(key_hash) if key_hash else None
    if tenant is None and key_hash is None and anonymous_ok and connection.app.state.keys_watch.anonymous:
        tenant = keys.DEFAULT_TENANT  # no active key exists: app.tenancy.watch knows it without a query
    if tenant is None:
        async with runtime.engine.connect() as conn:
            tenant, valid_key = await keys.authenticate_hash(conn, key_hash, anonymous_ok=anonymous_ok)
        if valid_key:
            cache.put(key_hash, tenant)
    connection.state.tenant = tenant
    # Who a memory's history says did an edit, a delete or a restore: the key's prefix, as `memsys keys list` shows it.
    connection.state.actor = session.actor if session else keys.key_actor(bearer)


def actor_of(connection: ASGIConnection) -> str:
    """Who made the request, as a memory's history records it (``authenticate`` sets it)."""
    return getattr(connection.state, "actor", "anonymous")
