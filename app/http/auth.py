"""The guard every route passes: the request's API key becomes its tenant (``request.state.tenant``).

Public routes (``/health`` and the API docs) are marked ``opt={"public": True}`` or live under the docs path.
"""

from __future__ import annotations

from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

from app.runtime import Runtime
from app.tenancy import service as keys

DOCS_PATHS = ("/docs",)  # the OpenAPI document and its two renderings (app.http.app)


def bearer_token(connection: ASGIConnection) -> str | None:
    scheme, _, token = connection.headers.get("authorization", "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


async def authenticate(connection: ASGIConnection, handler: BaseRouteHandler) -> None:
    if handler.opt.get("public") or connection.url.path.startswith(DOCS_PATHS):
        return
    runtime: Runtime = connection.app.state.runtime
    settings = runtime.settings
    async with runtime.engine.connect() as conn:
        connection.state.tenant = await keys.authenticate(
            conn,
            bearer_token(connection),
            anonymous_ok=keys.anonymous_allowed(settings.host, settings.allow_anonymous),
        )
