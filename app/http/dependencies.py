"""Dependencies handed to route handlers: the runtime of the request's tenant, and one transaction per request."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from litestar import Request
from sqlalchemy.ext.asyncio import AsyncConnection

from app.runtime import Runtime


async def provide_runtime(request: Request) -> Runtime:
    """The shared runtime scoped to the tenant the auth guard found (app.http.auth)."""
    return request.app.state.runtime.for_tenant(request.state.tenant)


async def provide_transaction(request: Request) -> AsyncGenerator[AsyncConnection, None]:
    """A connection in a transaction of the request's tenant, committed when the handler returns, rolled
    back if it raises."""
    runtime = await provide_runtime(request)
    async with runtime.engine.begin() as conn:
        yield conn
