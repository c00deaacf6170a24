"""The guard every route passes: the request's API key becomes its tenant (``request.state.tenant``).

Public routes (``/health`` and the API docs) are marked ``opt={"public": True}`` or live under the docs path.
What a key resolves to is remembered for ``MEMSYS_KEY_CACHE_SECONDS`` (a revoked key keeps working for at
most that long); 0 looks every request's key up in the database.
"""

from __future__ import annotations

import time

from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

from app.errors import Unauthorized
from app.runtime import Runtime
from app.tenancy import service as keys

DOCS_PATHS = ("/docs",)  # the OpenAPI document and its two renderings (app.http.app)
_CACHE_LIMIT = 10_000


class KeyCache:
    """bearer hash → (tenant or the Unauthorized it raised, expiry); one per app."""

    def __init__(self, ttl_s: float) -> None:
        self.ttl_s = ttl_s
        self._entries: dict[str, tuple[str | Unauthorized, float]] = {}

    def get(self, key: str) -> str | Unauthorized | None:
        entry = self._entries.get(key)
        if entry is None or entry[1] < time.monotonic():
            return None
        return entry[0]

    def put(self, key: str, value: str | Unauthorized) -> None:
        if self.ttl_s <= 0:
            return
        if len(self._entries) >= _CACHE_LIMIT:
            self._entries.clear()
        self._entries[key] = (value, time.monotonic() + self.ttl_s)


def bearer_token(connection: ASGIConnection) -> str | None:
    scheme, _, token = connection.headers.get("authorization", "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


async def authenticate(connection: ASGIConnection, handler: BaseRouteHandler) -> None:
    if handler.opt.get("public") or connection.url.path.startswith(DOCS_PATHS):
        return
    runtime: Runtime = connection.app.state.runtime
    cache: KeyCache = connection.app.state.key_cache
    bearer = bearer_token(connection)
    cache_key = keys.key_hash(bearer) if bearer else ""
    found = cache.get(cache_key)
    if found is None:
        settings = runtime.settings
        try:
            async with runtime.engine.connect() as conn:
                found = await keys.authenticate(
                    conn, bearer, anonymous_ok=keys.anonymous_allowed(settings.host, settings.allow_anonymous)
                )
        except Unauthorized as refused:
            found = refused
        cache.put(cache_key, found)
    if isinstance(found, Unauthorized):
        raise Unauthorized(str(found))
    connection.state.tenant = found
