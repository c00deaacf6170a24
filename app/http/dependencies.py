"""Dependencies handed to route handlers: the runtime, and one transaction per request."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from litestar.datastructures import State
from sqlalchemy.ext.asyncio import AsyncConnection

from app.runtime import Runtime


async def provide_runtime(state: State) -> Runtime:
    return state.runtime


async def provide_transaction(state: State) -> AsyncGenerator[AsyncConnection, None]:
    """A connection in a transaction, committed when the handler returns, rolled back if it raises."""
    async with state.runtime.engine.begin() as conn:
        yield conn
